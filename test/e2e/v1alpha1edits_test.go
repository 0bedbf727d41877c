//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// A v1alpha2 CR with rollback off, exposed through an HTTPRoute, written by a v1alpha1
// client three ways through the controller's conversion webhook: a merge patch of
// replicas, a merge patch of the port, and a kubectl replace of the whole object read in
// v1alpha1. Read in v1alpha2 after each write, both fields are as they were and the
// client's change is there; the HTTPRoute is never deleted (a watch from its making sees
// no deletion, and it keeps its UID) and no Ingress is made.
func TestV1alpha1WritesKeepV1alpha2Fields(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gw, err := gatewayclient.NewForConfig(env.cfg)
	require.NoError(t, err)
	kubectl(t, "apply", "--server-side", "-f", gatewayAPIFile(t, "gateway.networking.k8s.io_httproutes.yaml"))
	t.Cleanup(func() { kubectl(t, "delete", "crd", httpRouteCRDName, "--ignore-not-found", "--wait=true") })
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, env.cfg, httpRouteCRDName, 30*time.Second))

	const name = "edited"
	cr := routedCR(ns, name)
	cr.Spec.Workload.Rollback = &v1alpha2.RollbackSpec{Enabled: ptr.To(false)}
	v2s := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns)
	_, err = v2s.Create(ctx, cr, metav1.CreateOptions{})
	require.NoError(t, err)
	waitReady(t, ns, name)
	var route *gatewayv1.HTTPRoute
	appears(t, "the controller makes the HTTPRoute", func(ctx context.Context) (err error) {
		route, err = gw.GatewayV1().HTTPRoutes(ns).Get(ctx, name+"-route", metav1.GetOptions{})
		return err
	})
	origExpose := getHub(t, ns, name).Spec.Networking.Expose

	// Everything that happens to routes and Ingresses from here on.
	var mu sync.Mutex
	var seen []string
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	routes, err := gw.GatewayV1().HTTPRoutes(ns).Watch(watchCtx, metav1.ListOptions{ResourceVersion: route.ResourceVersion})
	require.NoError(t, err)
	ingresses, err := env.kube.NetworkingV1().Ingresses(ns).Watch(watchCtx, metav1.ListOptions{})
	require.NoError(t, err)
	for kind, w := range map[string]watch.Interface{"HTTPRoute": routes, "Ingress": ingresses} {
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Deleted || kind == "Ingress" {
					mu.Lock()
					seen = append(seen, string(ev.Type)+" "+kind)
					mu.Unlock()
				}
			}
		}()
	}

	// after waits until the controller has acted on the write, then reads the CR in
	// v1alpha2: the fields only v1alpha2 has are as they were, and the route is the one
	// made at the start.
	after := func(write string, want func(*v1alpha2.LlamaStackDistribution)) {
		t.Helper()
		waitReady(t, ns, name)
		l := getHub(t, ns, name)
		require.NotNil(t, l.Spec.Workload.Rollback, "%s: workload.rollback", write)
		assert.Equal(t, ptr.To(false), l.Spec.Workload.Rollback.Enabled, "%s: workload.rollback.enabled", write)
		require.NotNil(t, l.Spec.Networking)
		assert.Equal(t, origExpose, l.Spec.Networking.Expose, "%s: networking.expose", write)
		want(l)
		r, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, name+"-route", metav1.GetOptions{})
		require.NoError(t, err, "%s: the HTTPRoute", write)
		assert.Equal(t, route.UID, r.UID, "%s: the HTTPRoute is the one made at the start", write)
		_, err = env.kube.NetworkingV1().Ingresses(ns).Get(ctx, name+"-ingress", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%s: no Ingress: %v", write, err)
	}

	v1 := env.dynamic.Resource(llsdResource).Namespace(ns)
	_, err = v1.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	after("a v1alpha1 patch of replicas", func(l *v1alpha2.LlamaStackDistribution) {
		assert.Equal(t, ptr.To[int32](2), l.Spec.Workload.Replicas)
	})

	_, err = v1.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"server":{"containerSpec":{"port":8322}}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	after("a v1alpha1 patch of the port", func(l *v1alpha2.LlamaStackDistribution) {
		assert.Equal(t, int32(8322), l.Spec.Networking.Port)
		assert.Equal(t, ptr.To[int32](2), l.Spec.Workload.Replicas)
	})

	// kubectl replace of the whole object as read in v1alpha1, with replicas back at 1.
	var read map[string]any
	require.NoError(t, json.Unmarshal([]byte(kubectl(t, "get", "llamastackdistributions.v1alpha1.llamastack.io", name, "-n", ns, "-o", "json")), &read))
	assert.Equal(t, "llamastack.io/v1alpha1", read["apiVersion"])
	read["spec"].(map[string]any)["replicas"] = 1
	file := filepath.Join(t.TempDir(), "edited.json")
	raw, err := json.Marshal(read)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	kubectl(t, "replace", "-f", file)
	after("a kubectl replace in v1alpha1", func(l *v1alpha2.LlamaStackDistribution) {
		assert.Equal(t, ptr.To[int32](1), l.Spec.Workload.Replicas)
		assert.Equal(t, int32(8322), l.Spec.Networking.Port)
	})

	mu.Lock()
	assert.Empty(t, seen, "no HTTPRoute deleted, no Ingress made")
	mu.Unlock()

	// The upgrade docs' command lists the CR with the v1alpha1 clients that wrote it.
	var listed string
	for _, line := range strings.Split(kubectl(t, documentedCommand(t)...), "\n") {
		if who, ok := strings.CutPrefix(line, ns+"/"+name+"\t"); ok {
			listed = who
		}
	}
	assert.NotEmpty(t, listed, "docs/install.md's command names the v1alpha1 writers of %s/%s", ns, name)
}

// documentedCommand is the arguments of the kubectl command in docs/install.md that
// lists the CRs a v1alpha1 client has written (its one single-quoted argument unquoted).
func documentedCommand(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.root, "docs", "install.md"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "kubectl get llsd -A --show-managed-fields -o jsonpath="); ok {
			quoted, ok := strings.CutPrefix(rest, "'")
			require.True(t, ok && strings.HasSuffix(quoted, "'"), "the template is one single-quoted argument: %s", rest)
			return []string{"get", "llsd", "-A", "--show-managed-fields", "-o", "jsonpath=" + strings.TrimSuffix(quoted, "'")}
		}
	}
	t.Fatal("docs/install.md has no command listing the CRs v1alpha1 clients wrote")
	return nil
}

// getHub reads a CR in v1alpha2.
func getHub(t *testing.T, ns, name string) *v1alpha2.LlamaStackDistribution {
	t.Helper()
	l, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return l
}

// The admission policy of artifacts/policy refuses the v1alpha1 writes the conversion
// cannot merge: a body without the llamastack.io/conversion-data annotation (a replace
// from a file of one's own), and a patch that sets the annotation of an earlier read
// (a manifest that kept it, applied again after a v1alpha2 edit). Each is refused naming
// the fields, and changes nothing; a v1alpha1 write of a CR with no v1alpha2-only field
// passes without the annotation.
func TestV1alpha1WritesThatWouldDropV1alpha2FieldsAreRefused(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	vap, err := env.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "llamastack.io-v1alpha1-writes", metav1.GetOptions{})
	require.NoError(t, err, "the policy is installed with the CRD")
	if tc := vap.Status.TypeChecking; tc != nil {
		assert.Empty(t, tc.ExpressionWarnings, "the policy's expressions check against the CRD's schema")
	}

	const name = "guarded"
	cr := routedCR(ns, name)
	cr.Spec.Workload.Rollback = &v1alpha2.RollbackSpec{Enabled: ptr.To(false)}
	_, err = env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, cr, metav1.CreateOptions{})
	require.NoError(t, err)
	v1s := env.client.LlamastackV1alpha1().LlamaStackDistributions(ns)

	// A replace without the annotation, with a change of replicas (made again if the
	// controller's status write got in first).
	var refused error
	var want v1alpha2.LlamaStackDistributionSpec
	eventually(t, 10*time.Second, "the replace without the annotation is answered", func(ctx context.Context) (bool, error) {
		read, err := v1s.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		require.Contains(t, read.Annotations, "llamastack.io/conversion-data")
		want = getHub(t, ns, name).Spec
		delete(read.Annotations, "llamastack.io/conversion-data")
		read.Spec.Replicas = 3
		_, refused = v1s.Update(ctx, read, metav1.UpdateOptions{})
		return !apierrors.IsConflict(refused), nil
	})
	require.Error(t, refused, "a v1alpha1 write that would drop v1alpha2 fields")
	t.Logf("refused: %v", refused)
	assert.True(t, apierrors.IsInvalid(refused), "refused as invalid: %v", refused)
	for _, field := range []string{"spec.networking.expose.type", "spec.networking.expose.httpRoute", "spec.workload.rollback"} {
		assert.Contains(t, refused.Error(), field)
	}
	assert.Contains(t, refused.Error(), "llamastack.io/v1alpha2")
	assert.Equal(t, want, getHub(t, ns, name).Spec, "the refused write changed nothing")

	// The same write of the object as read, annotation and all, is merged and admitted.
	old, err := v1s.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	edit(t, ns, name, func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 3 })
	got := getHub(t, ns, name).Spec
	assert.Equal(t, ptr.To[int32](3), got.Workload.Replicas)
	assert.Equal(t, want.Networking.Expose, got.Networking.Expose)
	assert.Equal(t, want.Workload.Rollback, got.Workload.Rollback)

	// Rollback turned on in v1alpha2; then a patch carrying the annotation read before.
	eventually(t, 10*time.Second, "rollback is turned on in v1alpha2", func(ctx context.Context) (bool, error) {
		l, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		l.Spec.Workload.Rollback.Enabled = ptr.To(true)
		_, err = env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Update(ctx, l, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	want = getHub(t, ns, name).Spec
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"llamastack.io/conversion-data": old.Annotations["llamastack.io/conversion-data"]}},
		"spec":     map[string]any{"replicas": 4},
	})
	require.NoError(t, err)
	_, err = v1s.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.Error(t, err, "a v1alpha1 patch that would undo a v1alpha2 edit")
	assert.Contains(t, err.Error(), "spec.workload.rollback")
	assert.NotContains(t, err.Error(), "spec.networking.expose", "only what differs is named")
	assert.Equal(t, want, getHub(t, ns, name).Spec, "the refused write changed nothing")

	// A CR with no field only v1alpha2 has: no annotation to keep, nothing refused.
	plain := create(t, llsd(ns, "plain"))
	require.NotContains(t, plain.Annotations, "llamastack.io/conversion-data")
	edit(t, ns, "plain", func(l *v1alpha1.LlamaStackDistribution) {
		delete(l.Annotations, "llamastack.io/conversion-data")
		l.Spec.Replicas = 2
	})
}

// A v1alpha2 CR scaled to zero that does not name its container, labelled by a v1alpha1
// client (a merge patch, which the API server defaults with v1alpha1's schema before
// the webhook converts it back): the v1alpha2 spec is exactly what it was, so the
// Deployment stays at zero replicas and nothing rolls. Before, the patch read replicas
// as missing and got the default 1 (the pods started), and named the container.
func TestV1alpha1LabelLeavesAScaledToZeroCRAsItWas(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	const name = "idle"
	cr := &v1alpha2.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha2.LlamaStackDistributionSpec{
			Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Workload:     v1alpha2.WorkloadSpec{Replicas: ptr.To[int32](0)},
		},
	}
	_, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, cr, metav1.CreateOptions{})
	require.NoError(t, err)
	d := waitDeployment(t, ns, name, "the Deployment at zero", func(d *appsv1.Deployment) bool {
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 0
	})
	before := getHub(t, ns, name)

	v1 := env.dynamic.Resource(llsdResource).Namespace(ns)
	read, err := v1.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	replicas, found, err := unstructured.NestedInt64(read.Object, "spec", "replicas")
	require.NoError(t, err)
	assert.True(t, found && replicas == 0, "read in v1alpha1: replicas %d (found %v)", replicas, found)
	_, err = v1.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	after := getHub(t, ns, name)
	assert.Equal(t, "a", after.Labels["team"])
	assert.True(t, equality.Semantic.DeepEqual(before.Spec, after.Spec), "the spec is as it was:\n%s", cmp.Diff(before.Spec, after.Spec))
	assert.Equal(t, before.Generation, after.Generation, "no spec change, no new generation")
	settle(t)
	now := deployment(t, ns, name)
	assert.Equal(t, ptr.To[int32](0), now.Spec.Replicas, "still at zero")
	assert.Equal(t, d.Generation, now.Generation, "the Deployment is not written")
}
