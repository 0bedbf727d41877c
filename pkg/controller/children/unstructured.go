package children

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
// informer, the typed-client shape Kind calls, the Extract function and the
// metadata every child carries.

// NewUnstructuredInformer is the informer of the children of an optional kind without
// a typed client (started while the cluster serves the kind): the controller's own,
// kept without others' managed fields, never resynced.
func NewUnstructuredInformer(client dynamic.Interface, resource schema.GroupVersionResource, namespace string) cache.SharedIndexInformer {
	informer := dynamicinformer.NewFilteredDynamicInformer(client, resource, namespace, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(o *metav1.ListOptions) { o.LabelSelector = ManagedSelector() }).Informer()
	// Only fails once the informer has started.
	_ = informer.SetTransform(TransformStripManagedFields)
	return informer
}

// UnstructuredClient adapts the dynamic client of one resource in one namespace to the
// typed client Kind calls; its apply configuration is the object itself.
type UnstructuredClient struct {
	Resource dynamic.ResourceInterface
}

func (c UnstructuredClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error) {
	return c.Resource.Get(ctx, name, opts)
}

func (c UnstructuredClient) Apply(ctx context.Context, obj *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	return c.Resource.Apply(ctx, obj.GetName(), obj, opts)
}

func (c UnstructuredClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error) {
	return c.Resource.Patch(ctx, name, pt, data, opts, subresources...)
}

func (c UnstructuredClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.Resource.Delete(ctx, name, opts)
}

// ExtractUnstructured is the Extract function of a kind without a typed client: the
// fields manager owns in obj, as the object to apply is made (ToApplyConfiguration),
// so that the two compare equal when nothing differs. Without a schema, lists are
// taken whole.
func ExtractUnstructured(obj *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
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

// ObjectMetaMap is the unstructured form of a child's metadata (llsd.ChildObjectMeta):
// name, namespace, labels and the controller reference.
func ObjectMetaMap(meta metav1.ObjectMeta) map[string]any {
	ref := meta.OwnerReferences[0]
	return map[string]any{
		"name":      meta.Name,
		"namespace": meta.Namespace,
		"labels":    AnyMap(meta.Labels),
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

// AnyMap is a string map as unstructured objects hold it.
func AnyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
