package controller

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// The ServiceMonitor of a server that serves its metrics (servermetrics.go): the
// Prometheus Operator's monitoring.coreos.com/v1 kind, an optional kind
// (optionalkinds.go) made while the cluster serves it and the operator ConfigMap does
// not turn it off (featureFlags enableServiceMonitor). No typed client of the
// Prometheus Operator's API is a dependency: the kind is written and watched as
// unstructured objects through the dynamic client (unstructured.go), and only the
// fields below are set.

// serviceMonitorResource is the resource of the ServiceMonitor child.
var serviceMonitorResource = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}

const serviceMonitorKind = "ServiceMonitor"

// wantsServiceMonitor tells whether l's server has a ServiceMonitor: its metrics are on
// and the operator ConfigMap allows it; while the ConfigMap does not say, existing
// ones are left as they are.
func wantsServiceMonitor(l *v1alpha2.LlamaStackDistribution, in childInputs) (want, known bool) {
	return in.cfg.EnableServiceMonitor && in.listening.Metrics, in.cfg.ServiceMonitorKnown
}

// newServiceMonitor builds the ServiceMonitor that has Prometheus scrape the metrics
// port of l's Service (selected by the labels only that Service of the namespace has,
// among those a Prometheus Operator would look at: the CR's instance label and the
// controller's), over plain HTTP at the Prometheus default interval (the metrics endpoint does not serve
// TLS, whatever the API does).
func newServiceMonitor(l *v1alpha2.LlamaStackDistribution) *unstructured.Unstructured {
	selector := children.AnyMap(llsd.SelectorLabels(l))
	selector[llsd.LabelManagedBy] = ManagedByValue
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": serviceMonitorResource.GroupVersion().String(),
		"kind":       serviceMonitorKind,
		"metadata":   children.ObjectMetaMap(llsd.ChildObjectMeta(l, llsd.ServiceMonitorName(l))),
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": selector},
			"endpoints": []any{map[string]any{
				"port":   children.MetricsPortName,
				"path":   "/metrics",
				"scheme": "http",
			}},
		},
	}}
}
