package children

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// The children of the optional kinds as a real API server stores them, with each kind's
// real CRD (the Prometheus Operator's, Gateway API's standard channel, a Route CRD of
// OpenShift's types), after the controller's apply: their specs with what the server
// defaults, and our manager's managed fields as the server records them (an atomic
// selector or list is one leaf; the ownerReference is the item keyed by its uid), next
// to another manager's. (Read from a kube-apiserver 1.37 by the e2e test
// TestUnchangedSyncsWriteNothing, names and uid made the test CR's.) The ensure of the
// unchanged CR finds nothing to write.
func TestStoredChildrenNeedNoWrite(t *testing.T) {
	const uid = "uid-app"
	metadata := func(name, apiVersion, kind, spec, ourFields string, extraMeta string) string {
		return fmt.Sprintf(`{
  "apiVersion": %q, "kind": %q,
  "metadata": {
    "name": %q, "namespace": %q, "uid": "child-uid", "resourceVersion": "42", "generation": 1%s,
    "labels": {"app": "llama-stack", "app.kubernetes.io/instance": "app", "app.kubernetes.io/managed-by": "llama-stack-operator",
      "app.kubernetes.io/part-of": "llama-stack", "team": "ml"},
    "ownerReferences": [{"apiVersion": "llamastack.io/v1alpha1", "kind": "LlamaStackDistribution", "name": "app", "uid": %q,
      "controller": true, "blockOwnerDeletion": true}],
    "managedFields": [
      {"manager": "llama-stack-controller", "operation": "Apply", "apiVersion": %q, "fieldsType": "FieldsV1",
       "fieldsV1": {"f:metadata": {%s"f:labels": {"f:app": {}, "f:app.kubernetes.io/instance": {}, "f:app.kubernetes.io/managed-by": {},
         "f:app.kubernetes.io/part-of": {}}, "f:ownerReferences": {"k:{\"uid\":\"%s\"}": {}}}, %s}},
      {"manager": "kubectl-label", "operation": "Update", "apiVersion": %q, "fieldsType": "FieldsV1",
       "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}}
    ]
  },
  "spec": %s
}`, apiVersion, kind, name, testNamespace, extraMeta, uid, apiVersion, annotationFields(extraMeta), uid, ourFields, apiVersion, spec)
	}
	exposed := v1alpha2.ExposeSpec{Hostname: "app.example.com", Annotations: map[string]string{"example.com/expose": "app"}}
	annotations := `, "annotations": {"example.com/expose": "app"}`

	t.Run("ServiceMonitor", func(t *testing.T) {
		l := newLLSD("app")
		stored := unstructuredFrom(t, metadata("app-service-monitor", "monitoring.coreos.com/v1", "ServiceMonitor",
			`{"endpoints": [{"path": "/metrics", "port": "metrics", "scheme": "http"}],
			  "selector": {"matchLabels": {"app": "llama-stack", "app.kubernetes.io/instance": "app", "app.kubernetes.io/managed-by": "llama-stack-operator"}}}`,
			`"f:spec": {"f:endpoints": {}, "f:selector": {}}`, ""))
		requireNoWrite(t, l, stored, ExtractUnstructured, NewServiceMonitor(l))
	})
	t.Run("Route", func(t *testing.T) {
		l := newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
			e := exposed
			e.Type = v1alpha2.ExposeRoute
			l.Spec.Networking = &v1alpha2.NetworkingSpec{TLS: &v1alpha2.TLSSpec{Enabled: true, SecretName: "app-cert"}, Expose: &e}
		})
		stored := unstructuredFrom(t, metadata("app-route", "route.openshift.io/v1", "Route",
			`{"host": "app.example.com", "port": {"targetPort": "https"},
			  "tls": {"destinationCACertificate": "CA", "insecureEdgeTerminationPolicy": "Redirect", "termination": "reencrypt"},
			  "to": {"kind": "Service", "name": "app-service", "weight": 100}}`,
			`"f:spec": {"f:host": {}, "f:port": {"f:targetPort": {}}, "f:tls": {"f:destinationCACertificate": {}, "f:insecureEdgeTerminationPolicy": {},
			  "f:termination": {}}, "f:to": {"f:kind": {}, "f:name": {}, "f:weight": {}}}`, annotations))
		requireNoWrite(t, l, stored, ExtractUnstructured, NewRoute(l, Listening{Port: 8321, HTTPS: true}, []byte("CA")))
	})
	t.Run("HTTPRoute", func(t *testing.T) {
		l := newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
			e := exposed
			e.Type = v1alpha2.ExposeHTTPRoute
			e.HTTPRoute = &v1alpha2.HTTPRouteSpec{ParentRefs: []v1alpha2.GatewayParentRef{{Name: "gw", SectionName: "web"}}, Path: "/v1"}
			l.Spec.Networking = &v1alpha2.NetworkingSpec{Expose: &e}
		})
		stored := typedFrom[gatewayv1.HTTPRoute](t, metadata("app-route", "gateway.networking.k8s.io/v1", "HTTPRoute",
			`{"hostnames": ["app.example.com"],
			  "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw", "sectionName": "web"}],
			  "rules": [{"backendRefs": [{"group": "", "kind": "Service", "name": "app-service", "port": 8321, "weight": 1}],
			    "matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}]}]}`,
			`"f:spec": {"f:hostnames": {}, "f:parentRefs": {}, "f:rules": {}}`, annotations))
		requireNoWrite(t, l, stored, gatewayac.ExtractHTTPRoute, NewHTTPRoute(l))
	})
	t.Run("BackendTLSPolicy", func(t *testing.T) {
		l := newLLSD("app")
		stored := typedFrom[gatewayv1.BackendTLSPolicy](t, metadata("app-backend-tls", "gateway.networking.k8s.io/v1", "BackendTLSPolicy",
			`{"targetRefs": [{"group": "", "kind": "Service", "name": "app-service", "sectionName": "https"}],
			  "validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "app-backend-ca"}], "hostname": "app-service.demo.svc"}}`,
			`"f:spec": {"f:targetRefs": {}, "f:validation": {"f:caCertificateRefs": {}, "f:hostname": {}}}`, ""))
		requireNoWrite(t, l, stored, gatewayac.ExtractBackendTLSPolicy, NewBackendTLSPolicy(l, true))
	})
}

// annotationFields is the managed fields of the annotations in extraMeta (the expose
// annotation, ours), or nothing.
func annotationFields(extraMeta string) string {
	if !strings.Contains(extraMeta, "annotations") {
		return ""
	}
	return `"f:annotations": {"f:example.com/expose": {}}, `
}

func unstructuredFrom(t *testing.T, raw string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	require.NoError(t, obj.UnmarshalJSON([]byte(raw)))
	return obj
}

func typedFrom[T any](t *testing.T, raw string) *T {
	t.Helper()
	obj := new(T)
	require.NoError(t, json.Unmarshal([]byte(raw), obj))
	return obj
}

// requireNoWrite runs the ensure of desired for l with stored in the cache, and fails
// when it applies anything.
func requireNoWrite[T metav1.Object, AC any](t *testing.T, l *v1alpha2.LlamaStackDistribution, stored T,
	extract func(T, string) (*AC, error), desired metav1.Object) {
	t.Helper()
	var sent *AC
	k := &Kind[T, AC]{
		Name:     fmt.Sprintf("%T", stored),
		recorder: record.NewFakeRecorder(10),
		Cached:   func(string, string) (T, error) { return stored, nil },
		Extract:  extract,
		apply: func(_ context.Context, _ string, ac *AC, _ metav1.ApplyOptions) (T, error) {
			sent = ac
			return stored, nil
		},
	}
	_, err := k.Ensure(context.Background(), l, desired)
	require.NoError(t, err)
	if sent != nil {
		owned, err := extract(stored, llsd.FieldManager)
		require.NoError(t, err)
		t.Fatalf("an unchanged child was applied again; what our manager owns (-) and what was sent (+):\n%s", cmp.Diff(owned, sent))
	}
}

// ExtractUnstructured reads what the managed fields name, whatever the schema: a keyed
// item (ours of two ownerReferences), an item of a set, an item by index, a granular map
// field by field, an atomic one whole; nothing of another manager's.
func TestExtractUnstructuredFollowsTheManagedFields(t *testing.T) {
	obj := unstructuredFrom(t, `{
  "apiVersion": "example.com/v1", "kind": "Thing",
  "metadata": {"name": "thing", "namespace": "demo",
    "labels": {"ours": "1", "theirs": "2"},
    "ownerReferences": [{"apiVersion": "v1", "kind": "A", "name": "a", "uid": "theirs"}, {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "ours"}],
    "managedFields": [{"manager": "llama-stack-controller", "operation": "Apply", "apiVersion": "example.com/v1", "fieldsType": "FieldsV1",
      "fieldsV1": {"f:metadata": {"f:labels": {"f:ours": {}}, "f:ownerReferences": {"k:{\"uid\":\"ours\"}": {}}},
        "f:spec": {"f:selector": {}, "f:tags": {"v:\"x\"": {}}, "f:items": {"i:1": {"f:a": {}}}, "f:gone": {}}}}]},
  "spec": {"selector": {"matchLabels": {"k": "v"}}, "tags": ["x", "y"], "items": [{"a": 1, "b": 2}, {"a": 3, "b": 4}], "other": true}
}`)
	got, err := ExtractUnstructured(obj, llsd.FieldManager)
	require.NoError(t, err)
	want := unstructuredFrom(t, `{
  "apiVersion": "example.com/v1", "kind": "Thing",
  "metadata": {"name": "thing", "namespace": "demo", "labels": {"ours": "1"},
    "ownerReferences": [{"apiVersion": "v1", "kind": "B", "name": "b", "uid": "ours"}]},
  "spec": {"selector": {"matchLabels": {"k": "v"}}, "tags": ["x"], "items": [{"a": 3}]}
}`)
	if diff := cmp.Diff(want.Object, got.Object); diff != "" {
		t.Errorf("extracted (-want +got):\n%s", diff)
	}
	none, err := ExtractUnstructured(obj, "someone-else")
	require.NoError(t, err)
	require.Empty(t, none.Object, "a manager without an apply entry owns nothing")
}
