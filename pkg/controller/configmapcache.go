package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unique"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
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

// keptConfigMapAnnotations are the annotations the controller reads on a ConfigMap: the
// opt-in of a source in another namespace, and its own hashes on the ConfigMaps it manages.
var keptConfigMapAnnotations = []string{AllowedNamespacesAnnotation, llsd.AnnotationSourceHash, annotationBundleHash}

// configMapEntry is what the ConfigMap cache keeps of one ConfigMap. It holds its fields
// itself rather than in a metav1.ObjectMeta, most of whose fields it would leave empty
// (the struct is 112 bytes; a metav1.ObjectMeta alone is 232), and implements
// metav1.Object over them: the informer's key function, the controllerUID index and the
// event handlers read an entry as any object.
type configMapEntry struct {
	name string
	// namespace is interned: the ConfigMaps of a namespace share one copy of its name.
	namespace unique.Handle[string]
	// uuid is the UID when it is a UUID as the API server writes them (36 characters
	// of text, 16 bytes here); any other UID is in rare.
	uuid            [16]byte
	resourceVersion string
	// keys are the keys of data, each followed by '/', then those of binaryData, each
	// followed by ':', sorted: one string for all the keys, usually one. A ConfigMap key
	// has neither character ([-._a-zA-Z0-9]+).
	keys string
	// hash is the content hash of data and binaryData (revision.HashSum).
	hash [sha256.Size]byte
	// rare has what most ConfigMaps lack; nil when the ConfigMap has none of it.
	rare *configMapRare
}

// configMapRare is the part of a configMapEntry that most ConfigMaps leave empty.
type configMapRare struct {
	// uid is a UID that is not a UUID as the API server writes them.
	uid types.UID
	// deletionTimestamp is the ConfigMap's own, shared with it.
	deletionTimestamp *metav1.Time
	// owner is the controller reference when it is a LlamaStackDistribution.
	owner *metav1.OwnerReference
	// annotations are the kept ones (keptConfigMapAnnotations); nil when none is set.
	annotations map[string]string
}

// rareFields are the entry's rare fields, empty ones when it has none.
func (e *configMapEntry) rareFields() configMapRare {
	if e.rare == nil {
		return configMapRare{}
	}
	return *e.rare
}

// editRare sets rare fields: edit changes a copy, which replaces e.rare, or nil when it
// is empty.
func (e *configMapEntry) editRare(edit func(*configMapRare)) {
	r := e.rareFields()
	edit(&r)
	if r.uid == "" && r.deletionTimestamp == nil && r.owner == nil && r.annotations == nil {
		e.rare = nil
	} else {
		e.rare = &r
	}
}

const (
	dataKeyEnd   = '/'
	binaryKeyEnd = ':'
)

var (
	_ runtime.Object = &configMapEntry{}
	_ metav1.Object  = &configMapEntry{}
)

// GetObjectKind implements runtime.Object: an entry has no kind of its own.
func (e *configMapEntry) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (e *configMapEntry) DeepCopyObject() runtime.Object {
	out := *e
	if e.rare != nil {
		r := *e.rare
		r.deletionTimestamp = r.deletionTimestamp.DeepCopy()
		if r.owner != nil {
			r.owner = r.owner.DeepCopy()
		}
		r.annotations = maps.Clone(r.annotations)
		out.rare = &r
	}
	return &out
}

func newConfigMapEntry(cm *corev1.ConfigMap) *configMapEntry {
	e := &configMapEntry{
		name:            cm.Name,
		namespace:       unique.Make(cm.Namespace),
		resourceVersion: cm.ResourceVersion,
		keys:            joinKeys(cm.Data, cm.BinaryData),
		hash:            revision.HashSum(cm.Data, cm.BinaryData),
	}
	e.SetUID(cm.UID)
	e.SetDeletionTimestamp(cm.DeletionTimestamp)
	e.SetOwnerReferences(cm.OwnerReferences)
	e.SetAnnotations(cm.Annotations)
	return e
}

// joinKeys is configMapEntry.keys for data and binaryData.
func joinKeys(data map[string]string, binary map[string][]byte) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(data)) {
		b.WriteString(k)
		b.WriteByte(dataKeyEnd)
	}
	for _, k := range slices.Sorted(maps.Keys(binary)) {
		b.WriteString(k)
		b.WriteByte(binaryKeyEnd)
	}
	return b.String()
}

// configMap gives the entry back as a ConfigMap: its metadata, the keys of data and
// binaryData with empty values, and the content hash in revision.CacheHashAnnotation. It is made
// on each call and, like anything read from a cache, must not be modified.
func (e *configMapEntry) configMap() *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:              e.name,
		Namespace:         e.GetNamespace(),
		UID:               e.GetUID(),
		ResourceVersion:   e.resourceVersion,
		DeletionTimestamp: e.GetDeletionTimestamp(),
		OwnerReferences:   e.GetOwnerReferences(),
	}}
	annotations := e.GetAnnotations()
	cm.Annotations = make(map[string]string, len(annotations)+1)
	maps.Copy(cm.Annotations, annotations)
	cm.Annotations[revision.CacheHashAnnotation] = hex.EncodeToString(e.hash[:])
	start := 0
	for i := 0; i < len(e.keys); i++ {
		switch e.keys[i] {
		case dataKeyEnd:
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[e.keys[start:i]] = ""
		case binaryKeyEnd:
			if cm.BinaryData == nil {
				cm.BinaryData = map[string][]byte{}
			}
			cm.BinaryData[e.keys[start:i]] = nil
		default:
			continue
		}
		start = i + 1
	}
	return cm
}

// The metav1.Object methods. An entry has the fields that TransformConfigMap keeps, and
// the setters keep what it would: the LlamaStackDistribution controller reference among
// the owner references, the kept annotations among the annotations. The other fields are
// always empty, and setting them does nothing, as the transform drops them. (Nothing
// sets a field of a cached object; the informer and the controller only read them.)

func (e *configMapEntry) GetName() string     { return e.name }
func (e *configMapEntry) SetName(name string) { e.name = name }

func (e *configMapEntry) GetNamespace() string {
	if e.namespace == (unique.Handle[string]{}) {
		return ""
	}
	return e.namespace.Value()
}
func (e *configMapEntry) SetNamespace(namespace string) { e.namespace = unique.Make(namespace) }

func (e *configMapEntry) GetUID() types.UID {
	if e.uuid == ([16]byte{}) {
		return e.rareFields().uid
	}
	return types.UID(formatUUID(e.uuid))
}

func (e *configMapEntry) SetUID(uid types.UID) {
	u, ok := parseUUID(string(uid))
	if !ok || u == ([16]byte{}) {
		u = [16]byte{}
	} else {
		uid = ""
	}
	e.uuid = u
	e.editRare(func(r *configMapRare) { r.uid = uid })
}

// parseUUID reads a UUID written as formatUUID writes it, and only such a one: false for
// any other text, so that formatUUID gives back the very text.
func parseUUID(s string) ([16]byte, bool) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	hexDigits := s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(u[:], []byte(hexDigits)); err != nil || formatUUID(u) != s {
		return [16]byte{}, false
	}
	return u, true
}

// formatUUID writes a UUID in lowercase hex, grouped 8-4-4-4-12.
func formatUUID(u [16]byte) string {
	var b [36]byte
	hex.Encode(b[:8], u[:4])
	hex.Encode(b[9:13], u[4:6])
	hex.Encode(b[14:18], u[6:8])
	hex.Encode(b[19:23], u[8:10])
	hex.Encode(b[24:], u[10:])
	b[8], b[13], b[18], b[23] = '-', '-', '-', '-'
	return string(b[:])
}

func (e *configMapEntry) GetResourceVersion() string        { return e.resourceVersion }
func (e *configMapEntry) SetResourceVersion(version string) { e.resourceVersion = version }

func (e *configMapEntry) GetDeletionTimestamp() *metav1.Time {
	return e.rareFields().deletionTimestamp
}

func (e *configMapEntry) SetDeletionTimestamp(timestamp *metav1.Time) {
	e.editRare(func(r *configMapRare) { r.deletionTimestamp = timestamp })
}

func (e *configMapEntry) GetOwnerReferences() []metav1.OwnerReference {
	if owner := e.rareFields().owner; owner != nil {
		return []metav1.OwnerReference{*owner}
	}
	return nil
}

func (e *configMapEntry) SetOwnerReferences(refs []metav1.OwnerReference) {
	var owner *metav1.OwnerReference
	for i := range refs {
		if ref := &refs[i]; ref.Controller != nil && *ref.Controller {
			if ref.Kind == llsd.ControllerKind.Kind {
				owner = ref.DeepCopy()
			}
			break
		}
	}
	e.editRare(func(r *configMapRare) { r.owner = owner })
}

func (e *configMapEntry) GetAnnotations() map[string]string { return e.rareFields().annotations }

func (e *configMapEntry) SetAnnotations(annotations map[string]string) {
	var kept map[string]string
	for _, k := range keptConfigMapAnnotations {
		if v, ok := annotations[k]; ok {
			if kept == nil {
				kept = make(map[string]string, 1)
			}
			kept[k] = v
		}
	}
	e.editRare(func(r *configMapRare) { r.annotations = kept })
}

func (e *configMapEntry) GetGenerateName() string                       { return "" }
func (e *configMapEntry) SetGenerateName(string)                        {}
func (e *configMapEntry) GetGeneration() int64                          { return 0 }
func (e *configMapEntry) SetGeneration(int64)                           {}
func (e *configMapEntry) GetSelfLink() string                           { return "" }
func (e *configMapEntry) SetSelfLink(string)                            {}
func (e *configMapEntry) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (e *configMapEntry) SetCreationTimestamp(metav1.Time)              {}
func (e *configMapEntry) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (e *configMapEntry) SetDeletionGracePeriodSeconds(*int64)          {}
func (e *configMapEntry) GetLabels() map[string]string                  { return nil }
func (e *configMapEntry) SetLabels(map[string]string)                   {}
func (e *configMapEntry) GetFinalizers() []string                       { return nil }
func (e *configMapEntry) SetFinalizers([]string)                        {}
func (e *configMapEntry) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (e *configMapEntry) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

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
