package children

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coreac "k8s.io/client-go/applyconfigurations/core/v1"
	metaac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

const testNamespace = "demo"

// testCR is a CR of the test namespace, as a lister gives it.
func testCR(name string) *v1alpha2.LlamaStackDistribution {
	return &v1alpha2.LlamaStackDistribution{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha2.SchemeGroupVersion.String(), Kind: "LlamaStackDistribution"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name), Generation: 1},
		Spec:       v1alpha2.LlamaStackDistributionSpec{Distribution: v1alpha2.DistributionSpec{Name: "starter"}},
	}
}

func configMap(ns, name string, data map[string]string, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Data:       data,
	}
}

// takeOverPatch gives our manager what upstream's two managers own (its apply manager,
// named after the CR, and the manager that created the object) and nothing of anyone
// else's.
func TestTakeOverPatch(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	later := metav1.NewTime(created.Add(time.Minute))
	fields := func(path string) *metav1.FieldsV1 {
		return &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:` + path + `":{}}}`)}
	}
	entry := func(manager string, op metav1.ManagedFieldsOperationType, at metav1.Time, path, sub string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "apps/v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: fields(path), Subresource: sub}
	}
	obj := &metav1.ObjectMeta{
		Name: "demo", ResourceVersion: "42", CreationTimestamp: created,
		ManagedFields: []metav1.ManagedFieldsEntry{
			entry("manager", metav1.ManagedFieldsOperationUpdate, created, "template", ""),
			entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, created, "revisionHistoryLimit", ""),
			entry("demo", metav1.ManagedFieldsOperationApply, created, "replicas", ""),
			entry("kubectl-edit", metav1.ManagedFieldsOperationUpdate, later, "paused", ""),
			entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, later, "status", "status"),
		},
	}
	patch, from, err := takeOverPatch(obj, "demo")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"demo", "manager"}, from)
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	require.NoError(t, json.Unmarshal(patch, &ops))
	require.Len(t, ops, 2)
	assert.Equal(t, "/metadata/resourceVersion", ops[1].Path)
	assert.JSONEq(t, `"42"`, string(ops[1].Value), "the patch fails if the object changed meanwhile")
	var entries []metav1.ManagedFieldsEntry
	require.NoError(t, json.Unmarshal(ops[0].Value, &entries))
	owners := map[string]string{}
	for _, e := range entries {
		owners[e.Manager+"/"+string(e.Operation)+"/"+e.Subresource] = string(e.FieldsV1.Raw)
	}
	assert.Len(t, owners, 4, "upstream's two entries became one of ours: %v", owners)
	ours := owners[llsd.FieldManager+"/Apply/"]
	assert.Contains(t, ours, `"f:replicas"`)
	assert.Contains(t, ours, `"f:template"`)
	assert.NotContains(t, ours, "revisionHistoryLimit", "Kubernetes' own fields stay theirs")
	assert.NotContains(t, ours, "paused", "a user's later edit stays theirs")
	assert.Contains(t, owners, "kubectl-edit/Update/")
	assert.Contains(t, owners, "kube-controller-manager/Update/status")

	// Once ours, or with nothing of upstream's, there is nothing to do.
	obj.ManagedFields = []metav1.ManagedFieldsEntry{entry(llsd.FieldManager, metav1.ManagedFieldsOperationApply, created, "replicas", "")}
	patch, _, err = takeOverPatch(obj, "demo")
	require.NoError(t, err)
	assert.Nil(t, patch)
}

// Which managers takeOverPatch takes fields from, and when it finds none.
func TestTakeOverPatchManagers(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	later := metav1.NewTime(created.Add(time.Minute))
	entry := func(manager string, op metav1.ManagedFieldsOperationType, at metav1.Time, sub string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", Time: &at,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:x":{}}}`)}, Subresource: sub}
	}
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	tests := map[string]struct {
		entries  []metav1.ManagedFieldsEntry
		wantFrom []string // nil: no patch
	}{
		"no managed fields": {},
		"only ours": {
			entries: []metav1.ManagedFieldsEntry{entry(llsd.FieldManager, apply, created, "")},
		},
		"no upstream manager: a user's later edit": {
			entries: []metav1.ManagedFieldsEntry{entry("kubectl-edit", update, later, "")},
		},
		"no upstream manager: Kubernetes components at creation": {
			entries: []metav1.ManagedFieldsEntry{
				entry("kube-controller-manager", update, created, ""),
				entry("system:serviceaccount:kube-system:generic-garbage-collector", update, created, ""),
			},
		},
		"no upstream manager: an apply by another name than the CR's": {
			entries: []metav1.ManagedFieldsEntry{entry("other-cr", apply, created, "")},
		},
		"no upstream manager: the CR's name on a subresource": {
			entries: []metav1.ManagedFieldsEntry{entry("demo", apply, created, "status")},
		},
		"the CR's apply manager alone": {
			entries:  []metav1.ManagedFieldsEntry{entry("demo", apply, later, "")},
			wantFrom: []string{"demo"},
		},
		"the creator alone": {
			entries:  []metav1.ManagedFieldsEntry{entry("manager", update, created, ""), entry("kubectl-edit", update, later, "")},
			wantFrom: []string{"manager"},
		},
		"only the first creator": {
			entries:  []metav1.ManagedFieldsEntry{entry("manager", update, created, ""), entry("helm", update, created, "")},
			wantFrom: []string{"manager"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Name: "demo-service", ResourceVersion: "7", CreationTimestamp: created, ManagedFields: tc.entries}
			before := obj.DeepCopy()

			patch, from, err := takeOverPatch(obj, "demo")

			require.NoError(t, err)
			assert.Equal(t, tc.wantFrom, from)
			assert.Equal(t, tc.wantFrom == nil, patch == nil, "patch: %s", patch)
			assert.Equal(t, before, obj, "the object is not changed")
		})
	}
}

func TestHasManager(t *testing.T) {
	obj := &metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}, {Manager: llsd.FieldManager}}}
	assert.True(t, HasManager(obj, llsd.FieldManager))
	assert.True(t, HasManager(obj, "kubectl"))
	assert.False(t, HasManager(obj, "helm"))
	assert.False(t, HasManager(&metav1.ObjectMeta{}, llsd.FieldManager))
}

func TestToApplyConfiguration(t *testing.T) {
	l := testCR("app")
	withStatus := NewService(l, AskedListening(l, ""))
	withStatus.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.0.1"}}
	noKind := NewService(l, AskedListening(l, ""))
	noKind.TypeMeta = metav1.TypeMeta{}
	cm := configMap(testNamespace, "c", map[string]string{"k": "v"}, nil)
	cm.CreationTimestamp = metav1.Time{}

	t.Run("without apiVersion and kind", func(t *testing.T) {
		_, err := ToApplyConfiguration[coreac.ServiceApplyConfiguration](noKind)
		require.EqualError(t, err, "object *v1.Service has no apiVersion/kind")
	})
	tests := map[string]struct {
		obj  any
		to   func(any) (any, error)
		want any
	}{
		"status, null creationTimestamp and empty fields dropped": {
			obj: withStatus,
			to:  func(o any) (any, error) { return ToApplyConfiguration[coreac.ServiceApplyConfiguration](o) },
			want: coreac.Service("app-service", testNamespace).
				WithLabels(NewService(l, AskedListening(l, "")).Labels).
				WithOwnerReferences(metaac.OwnerReference().WithAPIVersion("llamastack.io/v1alpha1").
					WithKind("LlamaStackDistribution").WithName("app").WithUID("uid-app").
					WithController(true).WithBlockOwnerDeletion(true)).
				WithSpec(coreac.ServiceSpec().WithType(corev1.ServiceTypeClusterIP).
					WithSelector(NewService(l, AskedListening(l, "")).Spec.Selector).
					WithPorts(coreac.ServicePort().WithName("http").WithPort(8321).WithProtocol(corev1.ProtocolTCP).
						WithTargetPort(NewService(l, AskedListening(l, "")).Spec.Ports[0].TargetPort))),
		},
		"a ConfigMap's data": {
			obj:  cm,
			to:   func(o any) (any, error) { return ToApplyConfiguration[coreac.ConfigMapApplyConfiguration](o) },
			want: coreac.ConfigMap("c", testNamespace).WithData(map[string]string{"k": "v"}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.to(tc.obj)
			require.NoError(t, err)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("toApplyConfiguration() mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestPruneNulls(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"top-level null":                 {in: `{"a":null,"b":1}`, want: `{"b":1}`},
		"nested null":                    {in: `{"m":{"x":null,"y":"v"}}`, want: `{"m":{"y":"v"}}`},
		"map left empty stays":           {in: `{"m":{"x":null}}`, want: `{"m":{}}`},
		"maps in a list":                 {in: `{"l":[{"x":null,"y":1},{"z":null}]}`, want: `{"l":[{"y":1},{}]}`},
		"null list elements stay":        {in: `{"l":[null,1]}`, want: `{"l":[null,1]}`},
		"lists in lists":                 {in: `[[{"x":null}]]`, want: `[[{}]]`},
		"empty values are not null":      {in: `{"s":"","n":0,"f":false,"m":{},"l":[]}`, want: `{"s":"","n":0,"f":false,"m":{},"l":[]}`},
		"creationTimestamp as a builder": {in: `{"metadata":{"name":"a","creationTimestamp":null}}`, want: `{"metadata":{"name":"a"}}`},
		"a scalar":                       {in: `"x"`, want: `"x"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var v any
			require.NoError(t, json.Unmarshal([]byte(tc.in), &v))
			pruneNulls(v)
			got, err := json.Marshal(v)
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(got))
		})
	}
}

// An object in the way is told apart: someone else's (delete or rename it), or left by
// an earlier CR of the same name (the garbage collector deletes it).
func TestNewNotOwnedError(t *testing.T) {
	l := testCR("app")
	ref := func(kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "llamastack.io/v1alpha1", Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
	}
	tests := map[string]struct {
		owners   []metav1.OwnerReference
		orphaned bool
	}{
		"no owner":                       {nil, false},
		"another CR":                     {ref("LlamaStackDistribution", "other", "uid-other"), false},
		"another kind of the same name":  {ref("Something", "app", "uid-x"), false},
		"an earlier CR of the same name": {ref("LlamaStackDistribution", "app", "uid-of-an-earlier-app"), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "app-service", OwnerReferences: tc.owners}}
			err := NewNotOwnedError("Service", obj, l)
			assert.Equal(t, tc.orphaned, err.Orphaned)
			if tc.orphaned {
				assert.Contains(t, err.Error(), "garbage collector")
			} else {
				assert.Contains(t, err.Error(), "delete or rename it")
			}
			assert.Contains(t, err.Error(), "Service demo/app-service")
		})
	}
}

// A kind bound without delete (the Deployment, the Service, the claim) never sends one:
// asked to delete a child of the CR, it says so.
func TestDeleteIfOwnedOfAKindNeverDeleted(t *testing.T) {
	l := testCR("app")
	svc := &corev1.Service{ObjectMeta: llsd.ChildObjectMeta(l, llsd.ServiceName(l))}
	k := &Kind[*corev1.Service, coreac.ServiceApplyConfiguration]{Name: "Service",
		Cached: func(string, string) (*corev1.Service, error) { return svc, nil }}
	err := k.DeleteIfOwned(t.Context(), l, llsd.ServiceName(l))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the controller never deletes a Service")

	// Someone else's is left alone without a word, as with any kind.
	svc.OwnerReferences = nil
	assert.NoError(t, k.DeleteIfOwned(t.Context(), l, llsd.ServiceName(l)))
}
