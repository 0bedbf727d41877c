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
)

// The optional kinds without a typed client (ServiceMonitors, OpenShift Routes) are
// written and watched as unstructured objects through the dynamic client: the
// informer, the typed-client shape childKind calls, the Extract function and the
// metadata every child carries.

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

// objectMetaMap is the unstructured form of a child's metadata (llsd.ChildObjectMeta):
// name, namespace, labels and the controller reference.
func objectMetaMap(meta metav1.ObjectMeta) map[string]any {
	ref := meta.OwnerReferences[0]
	return map[string]any{
		"name":      meta.Name,
		"namespace": meta.Namespace,
		"labels":    anyMap(meta.Labels),
		"ownerReferences": []any{map[string]any{
			"apiVersion":         ref.APIVersion,
			"kind":               ref.Kind,
			"name":               ref.Name,
			"uid":                string(ref.UID),
			"controller":         true,
			"blockOwnerDeletion": true,
		}},
	}
}

// anyMap is a string map as unstructured objects hold it.
func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
