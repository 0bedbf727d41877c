package children

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// The ServiceMonitor of a server that serves its metrics (servermetrics.go): the
// Prometheus Operator's monitoring.coreos.com/v1 kind, an optional kind made while the
// cluster serves it and the operator ConfigMap does not turn it off (featureFlags
// enableServiceMonitor). No typed client of the
// Prometheus Operator's API is a dependency: the kind is written and watched as
// unstructured objects through the dynamic client (unstructured.go), and only the
// fields below are set.

// ServiceMonitorResource is the resource of the ServiceMonitor child.
var ServiceMonitorResource = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}

// ServiceMonitorKind is the kind of the ServiceMonitor child.
const ServiceMonitorKind = "ServiceMonitor"

// NewServiceMonitor builds the ServiceMonitor that has Prometheus scrape the metrics
// port of l's Service (selected by the labels only that Service of the namespace has,
// among those a Prometheus Operator would look at: the CR's instance label and the
// controller's), over plain HTTP at the Prometheus default interval (the metrics
// endpoint does not serve TLS, whatever the API does).
func NewServiceMonitor(l *v1alpha2.LlamaStackDistribution) *unstructured.Unstructured {
	selector := AnyMap(llsd.SelectorLabels(l))
	selector[llsd.LabelManagedBy] = llsd.ManagedByValue
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ServiceMonitorResource.GroupVersion().String(),
		"kind":       ServiceMonitorKind,
		"metadata":   ObjectMetaMap(llsd.ChildObjectMeta(l, llsd.ServiceMonitorName(l))),
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": selector},
			"endpoints": []any{map[string]any{
				"port":   MetricsPortName,
				"path":   "/metrics",
				"scheme": "http",
			}},
		},
	}}
}
