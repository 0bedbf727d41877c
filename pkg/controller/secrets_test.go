package controller

import (
	"context"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned/fake"
)

// kubeMetadata is a metadata client of Secrets over a (fake) clientset, as the API
// server's metadata API answers: the Secrets' metadata without their data. Its lists and
// watches are the clientset's, and recorded as its actions.
type kubeMetadata struct{ kube kubernetes.Interface }

func (m kubeMetadata) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	if gvr != secretsResource {
		panic("kubeMetadata serves only Secrets, not " + gvr.String())
	}
	return kubeMetadataSecrets{kube: m.kube}
}

// IsWatchListSemanticsUnSupported: the fake clientset sends no initial events on a watch.
func (kubeMetadata) IsWatchListSemanticsUnSupported() bool { return true }

// kubeMetadataSecrets lists and watches Secrets' metadata; its other methods are not
// implemented (the embedded nil interface).
type kubeMetadataSecrets struct {
	metadata.ResourceInterface
	kube      kubernetes.Interface
	namespace string
}

func (s kubeMetadataSecrets) Namespace(ns string) metadata.ResourceInterface {
	s.namespace = ns
	return s
}

func (s kubeMetadataSecrets) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	list, err := s.kube.CoreV1().Secrets(s.namespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{ListMeta: list.ListMeta}
	for i := range list.Items {
		out.Items = append(out.Items, *secretMetadata(&list.Items[i]))
	}
	return out, nil
}

func (s kubeMetadataSecrets) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := s.kube.CoreV1().Secrets(s.namespace).Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if secret, ok := e.Object.(*corev1.Secret); ok {
			e.Object = secretMetadata(secret)
		}
		return e, true
	}), nil
}

// secretMetadata is a Secret as the metadata API serves it.
func secretMetadata(s *corev1.Secret) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: *s.ObjectMeta.DeepCopy()}
}

// The Secret cache keeps a Secret's name, namespace, UID and resourceVersion, nothing
// else (no data, labels, annotations or managed fields).
func TestTransformSecret(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "serving", Namespace: testNamespace, UID: "uid-1", ResourceVersion: "42", Generation: 3,
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...the data...}"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Certificate", Name: "serving", UID: "c"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "cert-manager"}}},
		Data: map[string][]byte{corev1.TLSPrivateKeyKey: []byte("secret")},
	}
	want := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "serving", Namespace: testNamespace, UID: "uid-1", ResourceVersion: "42"}}
	for name, in := range map[string]any{"its metadata": secretMetadata(s), "a whole Secret": s} {
		t.Run(name, func(t *testing.T) {
			got, err := TransformSecret(in)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "demo/serving", Obj: s}
	got, err := TransformSecret(tombstone)
	require.NoError(t, err)
	assert.Equal(t, tombstone, got, "a tombstone passes")
}

// A running controller (its Secret informer over the fake's watch) sees a TLS Secret
// deleted, and then put back, within seconds: no recheck, no change of the CR.
func TestRunSeesTLSSecretDeletedAndPutBack(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serving := newTestServing(t, "app-service.demo.svc")
	client := fake.NewClientset(newLLSD("app", withServerTLS("serving")))
	kubeclient := k8sfake.NewClientset(serving.secret("serving"))
	_, done := runControllerWith(ctx, t, client, kubeclient, func(cfg *Config) { cfg.Recorder = record.NewFakeRecorder(1000) })
	reason := func() string {
		l, err := client.LlamastackV1alpha2().LlamaStackDistributions(testNamespace).Get(ctx, "app", metav1.GetOptions{})
		require.NoError(t, err)
		if c := findCondition(l, v1alpha2.ConditionDeploymentReady); c != nil {
			return c.Reason
		}
		return ""
	}
	waitForReason := func(what string, ok func(string) bool) {
		t.Helper()
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true,
			func(context.Context) (bool, error) { return ok(reason()), nil }), "%s (reason %q)", what, reason())
	}
	waitForReason("served", func(r string) bool { return r != "" && r != v1alpha2.ReasonTLSSecretNotFound })

	require.NoError(t, kubeclient.CoreV1().Secrets(testNamespace).Delete(ctx, "serving", metav1.DeleteOptions{}))
	waitForReason("the deletion is reported", func(r string) bool { return r == v1alpha2.ReasonTLSSecretNotFound })

	put := serving.secret("serving")
	put.ResourceVersion = "2"
	_, err := kubeclient.CoreV1().Secrets(testNamespace).Create(ctx, put, metav1.CreateOptions{})
	require.NoError(t, err)
	waitForReason("it recovers", func(r string) bool { return r != v1alpha2.ReasonTLSSecretNotFound })
	cancel()
	require.NoError(t, <-done)
}

// BenchmarkSecretCache measures what the Secret cache keeps per Secret (of 8 KiB of
// data, labels, an annotation and managed fields, as the metadata API would serve it
// without the data): transformed, and added to an indexer with the key function and
// the (no) indexes of the controller's Secret informer. retained-B/Secret is the heap
// still in use after a GC, per Secret, the store's own keys included.
func BenchmarkSecretCache(b *testing.B) {
	const n = 1000
	metas := make([]*metav1.PartialObjectMetadata, n)
	for i := range metas {
		metas[i] = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Namespace: fmt.Sprintf("unrelated-%d", i%10), Name: fmt.Sprintf("unrelated-%04d", i),
			UID: types.UID(fmt.Sprintf("6f1c2a9e-0d4b-4c55-9a3e-%012d", i)), ResourceVersion: fmt.Sprint(100000 + i),
			CreationTimestamp: metav1.Now(), Labels: map[string]string{"app": "unrelated"},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 8<<10)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: ptr.To(metav1.Now()), FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:payload":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`)}}},
		}}
	}
	indexers := newFixture(b).c.secretCache.GetIndexers()
	if len(indexers) != 0 {
		b.Fatalf("the Secret informer has indexes: %v", slices.Collect(maps.Keys(indexers)))
	}
	var retained float64
	for b.Loop() {
		indexer := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers)
		before := liveHeap()
		for _, m := range metas {
			obj, err := TransformSecret(m.DeepCopy())
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
	b.ReportMetric(retained, "retained-B/Secret")
}
