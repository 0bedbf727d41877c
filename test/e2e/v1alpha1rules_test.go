//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// A v1alpha1 patch adding server.userConfig (v1alpha2's overrideConfig) to a CR with
// v1alpha2 providers is refused by the admission policy with v1alpha2's message. With
// the policy's binding removed, the same patch stores an object v1alpha2's rules
// refuse: the controller reports it (SpecInvalid, naming the field to remove, with a
// Warning Event), and the scale subresource and a v1alpha2 edit of another field still
// work on it, while a v1alpha2 edit adding to the conflict is refused. With the binding
// put back, a v1alpha1 write of replicas passes too (the policy judges a rule again
// only when its fields change, as the CRD does).
func TestV1alpha1WriteCannotBreakV1alpha2Rules(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	const (
		name    = "ruled"
		rule    = "overrideConfig is the whole config.yaml as given: it cannot be combined with providers, resources, storage or disabled"
		binding = "llamastack.io-v1alpha1-writes"
	)
	cr := vllmCR(t, ns, name, "http://vllm.example:8000/v1", "key")
	hubs := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns)
	_, err := hubs.Create(ctx, cr, metav1.CreateOptions{})
	require.NoError(t, err)
	v1 := env.dynamic.Resource(llsdResource).Namespace(ns)
	addUserConfig := []byte(`{"spec":{"server":{"userConfig":{"configMapName":"own-config"}}}}`)

	_, err = v1.Patch(ctx, name, types.MergePatchType, addUserConfig, metav1.PatchOptions{})
	require.Error(t, err, "a v1alpha1 patch of server.userConfig beside providers")
	t.Logf("refused: %v", err)
	assert.True(t, apierrors.IsInvalid(err), "refused as invalid: %v", err)
	assert.Contains(t, err.Error(), rule, "with v1alpha2's message")
	assert.Nil(t, getHub(t, ns, name).Spec.OverrideConfig, "the refused write changed nothing")

	// Nor can a v1alpha1 create set a field only v1alpha2 has, through the annotation.
	err = createWithProvidersInAnnotation(ctx, ns)
	require.Error(t, err, "a v1alpha1 create carrying providers in its conversion-data annotation")
	assert.Contains(t, err.Error(), "this llamastack.io/v1alpha1 create would set spec.providers")

	// Without the binding, as on a cluster where the policy came later.
	bindings := env.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	require.NoError(t, bindings.Delete(ctx, binding, metav1.DeleteOptions{}))
	t.Cleanup(func() { restoreBinding(t, ns) })
	eventually(t, 30*time.Second, "the v1alpha1 patch is admitted without the binding", func(ctx context.Context) (bool, error) {
		_, err := v1.Patch(ctx, name, types.MergePatchType, addUserConfig, metav1.PatchOptions{})
		return err == nil, nil
	})
	stored := getHub(t, ns, name)
	require.NotNil(t, stored.Spec.OverrideConfig)
	require.NotNil(t, stored.Spec.Providers)

	// The controller says which field to remove.
	var told metav1.Condition
	eventually(t, 30*time.Second, "the CR reports SpecInvalid", func(ctx context.Context) (bool, error) {
		l, err := hubs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, ct := range []string{v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionProgressing} {
			if c := meta.FindStatusCondition(l.Status.Conditions, ct); c != nil && c.Reason == v1alpha2.ReasonSpecInvalid && l.Status.ObservedGeneration == l.Generation {
				told = *c
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("%s: %s", told.Type, told.Message)
	assert.Equal(t, metav1.ConditionFalse, told.Status)
	assert.Contains(t, told.Message, "spec.overrideConfig and spec.providers: "+rule)
	assert.Contains(t, told.Message, "remove spec.overrideConfig (server.userConfig in v1alpha1)")
	eventually(t, 30*time.Second, "a Warning Event SpecInvalid", func(ctx context.Context) (bool, error) {
		return countCREvents(ctx, ns, name, corev1.EventTypeWarning, v1alpha2.ReasonSpecInvalid) >= 1, nil
	})

	// The scale subresource, as an HPA or kubectl scale writes it, in v1alpha2.
	scales := env.dynamic.Resource(schema.GroupVersionResource{Group: "llamastack.io", Version: "v1alpha2", Resource: "llamastackdistributions"}).Namespace(ns)
	eventually(t, 10*time.Second, "the scale subresource is written", func(ctx context.Context) (bool, error) {
		scale, err := scales.Get(ctx, name, metav1.GetOptions{}, "scale")
		if err != nil {
			return false, err
		}
		require.NoError(t, unstructured.SetNestedField(scale.Object, int64(2), "spec", "replicas"))
		_, err = scales.Update(ctx, scale, metav1.UpdateOptions{}, "scale")
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	assert.Equal(t, ptr.To[int32](2), getHub(t, ns, name).Spec.Workload.Replicas)
	// The scale reaches the Deployment that serves, whose template is kept.
	template := deployment(t, ns, name).Spec.Template
	scaled := waitDeployment(t, ns, name, "the CR's 2 replicas", func(d *appsv1.Deployment) bool {
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 2
	})
	assert.Equal(t, template, scaled.Spec.Template, "the template is kept")

	// A v1alpha2 edit of another field is admitted; one adding to the conflict is not.
	_, err = hubs.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"workload":{"workers":2}}}`), metav1.PatchOptions{})
	require.NoError(t, err, "a v1alpha2 edit leaving the pair as it is")
	_, err = hubs.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"storage":{"kv":{"type":"sqlite"}}}}`), metav1.PatchOptions{})
	require.Error(t, err, "a v1alpha2 edit adding storage beside overrideConfig")
	assert.Contains(t, err.Error(), rule)

	// With the binding back, a v1alpha1 write that leaves the pair as it is passes too,
	// as in v1alpha2.
	restoreBinding(t, ns)
	_, err = v1.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{})
	require.NoError(t, err, "a v1alpha1 write of replicas of the object as stored")
	assert.Equal(t, ptr.To[int32](3), getHub(t, ns, name).Spec.Workload.Replicas)
}

// restoreBinding puts the policy's binding back as artifacts/policy has it, and waits
// until the policy refuses a v1alpha1 create in ns again.
func restoreBinding(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	objs, err := readObjects(filepath.Join(env.root, "artifacts", "policy", "v1alpha1_writes.yaml"))
	require.NoError(t, err)
	gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
	for _, obj := range objs {
		if obj.GetKind() != "ValidatingAdmissionPolicyBinding" {
			continue
		}
		_, err := env.dynamic.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	eventually(t, 30*time.Second, "the binding is enforced again", func(ctx context.Context) (bool, error) {
		return createWithProvidersInAnnotation(ctx, ns) != nil, nil
	})
}

// createWithProvidersInAnnotation creates, in v1alpha1 with dry run, a CR whose
// conversion-data annotation carries v1alpha2 providers.
func createWithProvidersInAnnotation(ctx context.Context, ns string) error {
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON([]byte(`{"apiVersion":"llamastack.io/v1alpha1","kind":"LlamaStackDistribution",
		"metadata":{"name":"annotated","annotations":{"llamastack.io/conversion-data":"{\"spec\":{\"providers\":{\"inference\":[{\"provider\":\"vllm\"}]}}}"}},
		"spec":{"server":{"distribution":{"name":"starter"}}}}`)); err != nil {
		return err
	}
	_, err := env.dynamic.Resource(llsdResource).Namespace(ns).Create(ctx, &u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}
