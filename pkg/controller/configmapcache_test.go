package controller

import (
	"bytes"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// busyConfigMap is a ConfigMap as the API server sends it, with everything the cache
// has no use for: labels, others' annotations (kubectl's last-applied-configuration
// repeats the data), others' owner references and managed fields.
func busyConfigMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID("uid-cm-" + name), ResourceVersion: "42",
			CreationTimestamp: metav1.Now(),
			Labels:            map[string]string{"app": "something"},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": `{"data":` + fmt.Sprintf("%q", data) + `}`,
				AllowedNamespacesAnnotation:                        "team-a",
			},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "Secret", Name: "other", UID: "uid-other"},
				{APIVersion: "llamastack.io/v1alpha1", Kind: "LlamaStackDistribution", Name: "app", UID: "uid-app", Controller: ptr.To(true)},
			},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)}},
				{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1",
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)}},
			},
		},
		Data:       data,
		BinaryData: map[string][]byte{"blob": []byte("binary")},
	}
}

func TestTransformConfigMapKeepsWhatTheControllerReads(t *testing.T) {
	data := map[string]string{"config.yaml": startingUserConfig, "ca-bundle.crt": strings.Repeat("x", 1<<10)}
	src := busyConfigMap("ns", "cfg", data)
	obj, err := TransformConfigMap(src.DeepCopy())
	require.NoError(t, err)
	entry, ok := obj.(*configMapEntry)
	require.True(t, ok, "got %T", obj)

	again, err := TransformConfigMap(entry)
	require.NoError(t, err)
	assert.Same(t, entry, again, "the transform leaves an entry as it is")

	got := entry.configMap()
	assert.Equal(t, metav1.ObjectMeta{
		Namespace: "ns", Name: "cfg", UID: "uid-cm-cfg", ResourceVersion: "42",
		Annotations: map[string]string{
			AllowedNamespacesAnnotation:  "team-a",
			revision.CacheHashAnnotation: revision.HashData(src.Data, src.BinaryData),
		},
		OwnerReferences: []metav1.OwnerReference{src.OwnerReferences[1]},
	}, got.ObjectMeta)
	assert.Equal(t, map[string]string{"config.yaml": "", "ca-bundle.crt": ""}, got.Data)
	assert.Equal(t, map[string][]byte{"blob": nil}, got.BinaryData)
	assert.Equal(t, revision.HashData(src.Data, src.BinaryData), revision.ConfigMapHash(got), "the hash of the data that was dropped")
	assert.Equal(t, revision.ConfigMapHash(src), revision.ConfigMapHash(got), "the same hash as the full ConfigMap's")

	// Each read is a ConfigMap of its own: a careless edit does not reach the cache.
	got.Annotations["x"] = "y"
	got.Data["x"] = "y"
	assert.NotContains(t, entry.configMap().Annotations, "x")
	assert.NotContains(t, entry.configMap().Data, "x")

	// The controller's own annotations on the ConfigMaps it manages are kept.
	managed := busyConfigMap("ns", "app-ca-bundle", nil)
	managed.Annotations = map[string]string{llsd.AnnotationSourceHash: "s", annotationBundleHash: "b", "other": "o"}
	obj, err = TransformConfigMap(managed)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{llsd.AnnotationSourceHash: "s", annotationBundleHash: "b"}, obj.(*configMapEntry).GetAnnotations())

	// A ConfigMap without data, annotations or owner has nothing but its identity and hash.
	obj, err = TransformConfigMap(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "empty"}})
	require.NoError(t, err)
	empty := obj.(*configMapEntry).configMap()
	assert.Nil(t, empty.Data)
	assert.Nil(t, empty.BinaryData)
	assert.Equal(t, map[string]string{revision.CacheHashAnnotation: revision.HashData(nil, nil)}, empty.Annotations)

	// The copy the informers may make is a deep one.
	cp := entry.DeepCopyObject().(*configMapEntry)
	assert.Equal(t, entry, cp)
	cp.rare.owner.Name = "changed"
	cp.rare.annotations[AllowedNamespacesAnnotation] = "changed"
	assert.Equal(t, "app", entry.rare.owner.Name)
	assert.Equal(t, "team-a", entry.rare.annotations[AllowedNamespacesAnnotation])
}

func TestCachedConfigMap(t *testing.T) {
	f := newFixture(t, busyConfigMap(testNamespace, "cfg", map[string]string{"config.yaml": "a: 1"}))
	cm, err := f.c.cachedConfigMap(testNamespace, "cfg")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"config.yaml": ""}, cm.Data)
	assert.Empty(t, cm.Labels)
	assert.Empty(t, cm.ManagedFields)

	_, err = f.c.cachedConfigMap(testNamespace, "missing")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)

	// A cache filled without the transform is read as it is.
	plain := configMap(testNamespace, "plain", map[string]string{"k": "v"}, nil)
	require.NoError(t, f.c.configMapCache.Add(plain))
	cm, err = f.c.cachedConfigMap(testNamespace, "plain")
	require.NoError(t, err)
	assert.Same(t, plain, cm)
}

// BenchmarkConfigMapCache measures what the ConfigMap cache keeps per ConfigMap of
// 100 KiB (one key, created by a client as the benchmark's unrelated ConfigMaps are):
// decoded from protobuf as the informer receives it, transformed, and added to an
// indexer with the key function and the indexes of the controller's ConfigMap informer
// (as NewController leaves it). retained-B/ConfigMap is the heap still in use after a
// GC, per ConfigMap, the store's own keys and indexes included.
func BenchmarkConfigMapCache(b *testing.B) {
	const n = 1000
	ser := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	payload := strings.Repeat("0123456789abcdef", (100<<10)/16)
	raws := make([][]byte, n)
	for i := range raws {
		name := fmt.Sprintf("unrelated-%04d", i)
		cm := &corev1.ConfigMap{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{
				Namespace: fmt.Sprintf("unrelated-%d", i%10), Name: name,
				UID: types.UID(fmt.Sprintf("6f1c2a9e-0d4b-4c55-9a3e-%012d", i)), ResourceVersion: fmt.Sprint(100000 + i),
				CreationTimestamp: metav1.Now(), Labels: map[string]string{"app": "unrelated"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate,
					APIVersion: "v1", Time: ptr.To(metav1.Now()), FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:payload":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`)}}},
			},
			Data: map[string]string{"payload": name + payload[len(name):]},
		}
		var buf bytes.Buffer
		if err := ser.Encode(cm, &buf); err != nil {
			b.Fatal(err)
		}
		raws[i] = buf.Bytes()
	}
	indexers := newFixture(b).c.configMapCache.GetIndexers()
	if _, ok := indexers[controllerUIDIndex]; !ok {
		b.Fatalf("the ConfigMap informer has no %s index: %v", controllerUIDIndex, slices.Collect(maps.Keys(indexers)))
	}
	var retained float64
	for b.Loop() {
		indexer := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers)
		before := liveHeap()
		for _, raw := range raws {
			decoded, _, err := ser.Decode(raw, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			obj, err := TransformConfigMap(decoded)
			if err != nil {
				b.Fatal(err)
			}
			if err := indexer.Add(obj); err != nil {
				b.Fatal(err)
			}
		}
		retained = float64(liveHeap()-before) / n
		runtime.KeepAlive(indexer)
	}
	b.ReportMetric(retained, "retained-B/ConfigMap")
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// cachedBefore is what cachedConfigMap gave for a ConfigMap when the cache kept a
// metav1.ObjectMeta and the hash in hex: the entry's output must stay the same.
func cachedBefore(src *corev1.ConfigMap) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: src.Name, Namespace: src.Namespace, UID: src.UID, ResourceVersion: src.ResourceVersion,
		DeletionTimestamp: src.DeletionTimestamp,
	}}
	if ref := metav1.GetControllerOfNoCopy(src); ref != nil && ref.Kind == llsd.ControllerKind.Kind {
		cm.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	cm.Annotations = map[string]string{revision.CacheHashAnnotation: revision.HashData(src.Data, src.BinaryData)}
	for _, k := range keptConfigMapAnnotations {
		if v, ok := src.Annotations[k]; ok {
			cm.Annotations[k] = v
		}
	}
	for k := range src.Data {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[k] = ""
	}
	for k := range src.BinaryData {
		if cm.BinaryData == nil {
			cm.BinaryData = map[string][]byte{}
		}
		cm.BinaryData[k] = nil
	}
	return cm
}

func TestConfigMapEntryGivesBackWhatTheCacheGaveBefore(t *testing.T) {
	llsdRef := func(controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "llamastack.io/v1alpha1", Kind: "LlamaStackDistribution",
			Name: "app", UID: "uid-app", Controller: ptr.To(controller), BlockOwnerDeletion: ptr.To(true)}
	}
	otherController := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "uid-d", Controller: ptr.To(true)}
	deleting := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	for name, cm := range map[string]*corev1.ConfigMap{
		"busy":  busyConfigMap("ns", "busy", map[string]string{"config.yaml": "a: 1", "b.txt": "b"}),
		"empty": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "empty"}},
		"no namespace": {ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
			Data: map[string]string{"k": "v"}},
		"UUID": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "uuid",
			UID: "6f1c2a9e-0d4b-4c55-9a3e-0123456789ab", ResourceVersion: "1"}},
		"uppercase UUID": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "upper",
			UID: "6F1C2A9E-0D4B-4C55-9A3E-0123456789AB"}},
		"zero UUID": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "zero",
			UID: "00000000-0000-0000-0000-000000000000"}},
		"UUID-like, not hex": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "like",
			UID: "6f1c2a9e-0d4b-4c55-9a3e-0123456789ag"}},
		"binary only": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bin", UID: "u", ResourceVersion: "7"},
			BinaryData: map[string][]byte{"a.bin": {0, 1}, "b.bin": nil}},
		"same key in data and binaryData": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "both"},
			Data: map[string]string{"k": "v", "x": ""}, BinaryData: map[string][]byte{"k": []byte("v")}},
		"deleting": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "del", DeletionTimestamp: &deleting},
			Data: map[string]string{"k": "v"}},
		"controlled by a CR": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "copy",
			OwnerReferences: []metav1.OwnerReference{llsdRef(true)},
			Annotations:     map[string]string{llsd.AnnotationSourceHash: "s", annotationBundleHash: "b", "other": "o"}}},
		"owned by a CR, not controlled": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owned",
			OwnerReferences: []metav1.OwnerReference{llsdRef(false)}}},
		"controlled by another kind": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other",
			OwnerReferences: []metav1.OwnerReference{otherController, llsdRef(true)}}},
		"opted in": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "src",
			Annotations: map[string]string{AllowedNamespacesAnnotation: "a,b"}}, Data: map[string]string{"config.yaml": "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			obj, err := TransformConfigMap(cm.DeepCopy())
			require.NoError(t, err)
			entry := obj.(*configMapEntry)
			assert.Equal(t, cachedBefore(cm), entry.configMap())
			if name == "UUID" {
				assert.Nil(t, entry.rare, "a UUID is kept as its 16 bytes, not in rare")
			}
			assert.Equal(t, entry.configMap(), entry.DeepCopyObject().(*configMapEntry).configMap())

			// The informer's key function and indexes, and the handlers, read the entry
			// as the ConfigMap.
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(entry)
			require.NoError(t, err)
			want, err := cache.MetaNamespaceKeyFunc(cm)
			require.NoError(t, err)
			assert.Equal(t, want, key)
			for _, index := range []cache.IndexFunc{cache.MetaNamespaceIndexFunc, indexByControllerUID} {
				got, err := index(entry)
				require.NoError(t, err)
				want, err := index(cm)
				require.NoError(t, err)
				assert.Equal(t, want, got)
			}
			_, ref := controllerOf(entry, llsd.ControllerKind.Kind)
			_, wantRef := controllerOf(cm, llsd.ControllerKind.Kind)
			assert.Equal(t, wantRef, ref)
		})
	}
}

func TestUUIDText(t *testing.T) {
	u, ok := parseUUID("6f1c2a9e-0d4b-4c55-9a3e-0123456789ab")
	require.True(t, ok)
	assert.Equal(t, [16]byte{0x6f, 0x1c, 0x2a, 0x9e, 0x0d, 0x4b, 0x4c, 0x55, 0x9a, 0x3e, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab}, u)
	assert.Equal(t, "6f1c2a9e-0d4b-4c55-9a3e-0123456789ab", formatUUID(u))
	for _, s := range []string{
		"", "uid-cm-cfg", "6F1C2A9E-0D4B-4C55-9A3E-0123456789AB", "6f1c2a9e0d4b4c559a3e0123456789ab",
		"{6f1c2a9e-0d4b-4c55-9a3e-0123456789ab}", "6f1c2a9e-0d4b-4c55-9a3e-0123456789a", "6f1c2a9e-0d4b-4c55-9a3e_0123456789ab",
		"6f1c2a9e-0d4b-4c55-9a3e-0123456789ag", "6f1c2a9-e0d4b-4c55-9a3e-0123456789ab",
	} {
		_, ok := parseUUID(s)
		assert.False(t, ok, "%q is not a UUID as the API server writes them", s)
	}
}
