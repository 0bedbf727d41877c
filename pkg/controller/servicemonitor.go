package controller

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// The ServiceMonitor of a server that serves its metrics (servermetrics.go): the
// Prometheus Operator's monitoring.coreos.com/v1 kind, an optional kind
// (optionalkinds.go) made while the cluster serves it and the operator ConfigMap does
// not turn it off (featureFlags enableServiceMonitor). No typed client of the
// Prometheus Operator's API is a dependency: the kind is written and watched as
// unstructured objects through the dynamic client, and only the fields below are set.

// serviceMonitorResource is the resource of the ServiceMonitor child.
var serviceMonitorResource = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}

const serviceMonitorKind = "ServiceMonitor"

// wantsServiceMonitor tells whether l's server has a ServiceMonitor: its metrics are on
// and the operator ConfigMap allows it; while the ConfigMap does not say, existing
// ones are left as they are.
func wantsServiceMonitor(l *v1alpha2.LlamaStackDistribution, in childInputs) (want, known bool) {
	return in.cfg.enableServiceMonitor && metricsOn(l, in.serverVersion), in.cfg.serviceMonitorKnown
}

// newServiceMonitor builds the ServiceMonitor that has Prometheus scrape the metrics
// port of l's Service (selected by the labels only that Service of the namespace has,
// among those a Prometheus Operator would look at: the CR's instance label and the
// controller's), over plain HTTP at the Prometheus default interval (the metrics endpoint does not serve
// TLS, whatever the API does).
func newServiceMonitor(l *v1alpha2.LlamaStackDistribution) *unstructured.Unstructured {
	selector := map[string]any{}
	for k, v := range selectorLabels(l) {
		selector[k] = v
	}
	selector[labelManagedBy] = ManagedByValue
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": serviceMonitorResource.GroupVersion().String(),
		"kind":       serviceMonitorKind,
		"metadata":   objectMetaMap(childObjectMeta(l, serviceMonitorName(l))),
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": selector},
			"endpoints": []any{map[string]any{
				"port":   metricsPortName,
				"path":   "/metrics",
				"scheme": "http",
			}},
		},
	}}
}

// newUnstructuredInformer is the informer of the children of an optional kind without
// a typed client (started while the cluster serves the kind): the controller's own,
// kept without others' managed fields, never resynced.
func newUnstructuredInformer(client dynamic.Interface, resource schema.GroupVersionResource, namespace string) cache.SharedIndexInformer {
	informer := dynamicinformer.NewFilteredDynamicInformer(client, resource, namespace, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(o *metav1.ListOptions) { o.LabelSelector = ManagedSelector() }).Informer()
	// Only fails once the informer has started.
	_ = informer.SetTransform(TransformStripManagedFields)
	return informer
}

// unstructuredClient adapts the dynamic client of one resource in one namespace to the
// typed client childKind calls; its apply configuration is the object itself.
type unstructuredClient struct {
	resource dynamic.ResourceInterface
}

func (c unstructuredClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error) {
	return c.resource.Get(ctx, name, opts)
}

func (c unstructuredClient) Apply(ctx context.Context, obj *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	return c.resource.Apply(ctx, obj.GetName(), obj, opts)
}

func (c unstructuredClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error) {
	return c.resource.Patch(ctx, name, pt, data, opts, subresources...)
}

func (c unstructuredClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.resource.Delete(ctx, name, opts)
}

// extractUnstructured is the Extract function of a kind without a typed client: the
// fields manager owns in obj, as the object to apply is made (toApplyConfiguration),
// so that the two compare equal when nothing differs. Without a schema, lists are
// taken whole.
func extractUnstructured(obj *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
	owned := map[string]any{}
	if err := managedfields.ExtractInto(obj, typed.DeducedParseableType, manager, &owned, ""); err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{}
	if len(owned) == 0 {
		return out, nil
	}
	raw, err := json.Marshal(owned)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("reading the fields of %s: %w", manager, err)
	}
	// The typed Extract functions name the object; so does the object to apply.
	out.SetName(obj.GetName())
	out.SetNamespace(obj.GetNamespace())
	return out, nil
}
