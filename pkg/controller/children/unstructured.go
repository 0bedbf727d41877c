package children

import (
	"context"
	"iter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
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
// fields manager owns in obj (the fields of its server-side apply), as the object to
// apply is made (ToApplyConfiguration), so that the two compare equal when nothing
// differs.
//
// The kind's schema is the API server's, and the controller does not have it, so the
// fields are read from the managed fields alone: each field the set names as a leaf is
// taken whole from obj. That is what the API server recorded, whatever the schema: a
// structure it keeps atomic (a label selector, a list without keys) is one leaf, and so
// is an item of a keyed list (an ownerReference, keyed by uid), found by its key; a
// granular map names each of its fields. (Extracting with a schema deduced from the
// object instead took every map as granular: the ServiceMonitor's atomic selector came
// back empty, and every sync applied it again.)
func ExtractUnstructured(obj *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
	out := &unstructured.Unstructured{}
	set, ok := AppliedFields(obj, manager)
	if !ok {
		return out, nil
	}
	owned, _ := ownedValue(obj.Object, set.Leaves()).(map[string]any)
	if len(owned) == 0 {
		return out, nil
	}
	// Copied, so that the result shares nothing with obj (a cached object).
	out.Object = runtime.DeepCopyJSON(owned)
	// The typed Extract functions name the object and its kind; so does the object to
	// apply.
	out.SetAPIVersion(obj.GetAPIVersion())
	out.SetKind(obj.GetKind())
	out.SetName(obj.GetName())
	out.SetNamespace(obj.GetNamespace())
	return out, nil
}

// ownedValue is the part of v that the field set s (relative to v, leaves only) names:
// a leaf is taken whole, a path with children is followed.
func ownedValue(v any, s *fieldpath.Set) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for pe := range s.Members.All() {
			if pe.FieldName != nil {
				if val, ok := t[*pe.FieldName]; ok {
					out[*pe.FieldName] = val
				}
			}
		}
		for pe := range s.Children.All() {
			if pe.FieldName == nil {
				continue
			}
			if val, ok := t[*pe.FieldName]; ok {
				child, _ := s.Children.Get(pe)
				out[*pe.FieldName] = ownedValue(val, child)
			}
		}
		return out
	case []any:
		var out []any
		for i, item := range t {
			if pe, ok := findElement(s.Members.All(), i, item); ok && pe != nil {
				out = append(out, item)
				continue
			}
			if pe, ok := findElement(s.Children.All(), i, item); ok {
				child, _ := s.Children.Get(*pe)
				owned := ownedValue(item, child)
				// The key fields name the item; the set need not list them.
				if m, isMap := owned.(map[string]any); isMap && pe.Key != nil {
					for _, f := range *pe.Key {
						m[f.Name] = item.(map[string]any)[f.Name]
					}
				}
				out = append(out, owned)
			}
		}
		return out
	default:
		return v
	}
}

// findElement finds, among elements, the path element that names item, the i-th item
// of a list: by its index, its value (a set), or its key fields (a keyed list).
func findElement(elements iter.Seq[fieldpath.PathElement], i int, item any) (*fieldpath.PathElement, bool) {
	for pe := range elements {
		switch {
		case pe.Index != nil:
			if *pe.Index == i {
				return &pe, true
			}
		case pe.Value != nil:
			if value.Equals(*pe.Value, value.NewValueInterface(item)) {
				return &pe, true
			}
		case pe.Key != nil:
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			matches := true
			for _, f := range *pe.Key {
				field, found := m[f.Name]
				if !found || !value.Equals(f.Value, value.NewValueInterface(field)) {
					matches = false
					break
				}
			}
			if matches {
				return &pe, true
			}
		}
	}
	return nil, false
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
