package controller

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The ConfigMap cache holds every ConfigMap the controller may be asked to read (a CR can
// name any ConfigMap of its namespace, or an opted-in one of another), which is every
// ConfigMap of the cluster or of the watched namespace. So that it costs a few hundred
// bytes per ConfigMap whatever the ConfigMaps hold, it keeps of each only what the
// controller reads (a configMapEntry): identity, a controller reference to a CR, the
// annotations the controller acts on, the keys of the data and a content hash. Data,
// labels, other annotations (kubectl's last-applied-configuration alone may repeat the
// whole data) and managed fields are dropped. The rest of the controller reads the cache
// through cachedConfigMap, which gives the entry back as a *corev1.ConfigMap.

// cacheHashAnnotation carries, on the ConfigMaps that cachedConfigMap returns, the content
// hash of the data the cache dropped. It never reaches the API server.
const cacheHashAnnotation = "internal.llama-stack-controller/content-hash"

// keptConfigMapAnnotations are the annotations the controller reads on a ConfigMap: the
// opt-in of a source in another namespace, and its own hashes on the ConfigMaps it manages.
var keptConfigMapAnnotations = []string{AllowedNamespacesAnnotation, annotationSourceHash, annotationBundleHash}

// configMapEntry is what the ConfigMap cache keeps of one ConfigMap.
type configMapEntry struct {
	// ObjectMeta has the name, namespace, UID, resourceVersion, deletionTimestamp, the
	// controller reference when it is a LlamaStackDistribution, and the kept annotations.
	metav1.ObjectMeta
	// hash is the content hash of data and binaryData (hashData).
	hash string
	// dataKeys and binaryKeys are the keys of data and binaryData, sorted.
	dataKeys, binaryKeys []string
}

var _ runtime.Object = &configMapEntry{}

// GetObjectKind implements runtime.Object: an entry has no kind of its own.
func (e *configMapEntry) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (e *configMapEntry) DeepCopyObject() runtime.Object {
	out := &configMapEntry{hash: e.hash, dataKeys: slices.Clone(e.dataKeys), binaryKeys: slices.Clone(e.binaryKeys)}
	e.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// TransformConfigMap is the informer transform of the ConfigMap cache: it turns each
// ConfigMap into its configMapEntry. Other objects only lose the managed fields of other
// managers.
func TransformConfigMap(obj any) (any, error) {
	switch o := obj.(type) {
	case *configMapEntry:
		return o, nil
	case *corev1.ConfigMap:
		return newConfigMapEntry(o), nil
	default:
		return TransformStripManagedFields(obj)
	}
}

func newConfigMapEntry(cm *corev1.ConfigMap) *configMapEntry {
	e := &configMapEntry{
		ObjectMeta: metav1.ObjectMeta{
			Name:              cm.Name,
			Namespace:         cm.Namespace,
			UID:               cm.UID,
			ResourceVersion:   cm.ResourceVersion,
			DeletionTimestamp: cm.DeletionTimestamp,
		},
		hash:       hashData(cm.Data, cm.BinaryData),
		dataKeys:   sortedKeys(cm.Data),
		binaryKeys: sortedKeys(cm.BinaryData),
	}
	if ref := metav1.GetControllerOfNoCopy(cm); ref != nil && ref.Kind == controllerKind.Kind {
		e.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	for _, k := range keptConfigMapAnnotations {
		if v, ok := cm.Annotations[k]; ok {
			if e.Annotations == nil {
				e.Annotations = make(map[string]string, 1)
			}
			e.Annotations[k] = v
		}
	}
	return e
}

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

// configMap gives the entry back as a ConfigMap: its metadata, the keys of data and
// binaryData with empty values, and the content hash in cacheHashAnnotation. It is made
// on each call and, like anything read from a cache, must not be modified.
func (e *configMapEntry) configMap() *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: e.ObjectMeta}
	cm.Annotations = make(map[string]string, len(e.Annotations)+1)
	maps.Copy(cm.Annotations, e.Annotations)
	cm.Annotations[cacheHashAnnotation] = e.hash
	if len(e.dataKeys) > 0 {
		cm.Data = make(map[string]string, len(e.dataKeys))
		for _, k := range e.dataKeys {
			cm.Data[k] = ""
		}
	}
	if len(e.binaryKeys) > 0 {
		cm.BinaryData = make(map[string][]byte, len(e.binaryKeys))
		for _, k := range e.binaryKeys {
			cm.BinaryData[k] = nil
		}
	}
	return cm
}

// cachedConfigMap reads a ConfigMap from the ConfigMap cache (see configMapEntry.configMap);
// a NotFound error when there is none of that name.
func (c *Controller) cachedConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	obj, exists, err := c.configMapCache.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(corev1.Resource("configmap"), name)
	}
	switch o := obj.(type) {
	case *configMapEntry:
		return o.configMap(), nil
	case *corev1.ConfigMap:
		return o, nil // a cache filled without TransformConfigMap
	default:
		return nil, fmt.Errorf("the ConfigMap cache holds a %T under %s/%s", obj, namespace, name)
	}
}
