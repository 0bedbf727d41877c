package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
)

// A v1alpha1 client edits a CR while a rollback holds: its read-edit-write goes through
// the conversion webhook, which must give the controller back the v1alpha2 spec it had
// (generated config, TLS, storage, exposure) with only the edit in it. A write that
// changes nothing v1alpha1 sees keeps the hold; scaling keeps the served template and
// the hold; a fix written in v1alpha1 rolls forward. The CR uses the features that meet
// at a rollback: a generated config, the server's TLS, storage (Recreate: a wrong
// rollout is an outage) and an Ingress.
func TestV1alpha1EditDuringAHeldRollback(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	f := newRollbackFixture(t, newGenLLSD("app", withServerTLS("serving"), func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Workload.Storage = &v1alpha2.PVCStorageSpec{}
		l.Spec.Networking.Expose = &v1alpha2.ExposeSpec{Hostname: "llama.example.com"}
	}), serving.secret("serving"))
	good := f.deployment("app").Spec.Template.DeepCopy()
	require.NotEmpty(t, good.Annotations[llsd.AnnotationTLSHash])
	served := f.llsd("app").Status.Rollback.ServedReplicaSet

	f.failChange(false)
	f.converge("app")
	require.Equal(t, v1alpha2.ReasonRolledBack, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)
	assert.Equal(t, served, f.rollOut())
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	failedInputs := f.llsd("app").Status.Rollback.FailedInputs
	require.NotEmpty(t, failedInputs)
	f.events()

	held := func(step string) {
		t.Helper()
		d := f.deployment("app")
		assert.True(t, equality.Semantic.DeepEqual(*good, d.Spec.Template), "%s: the served template holds:\n%s",
			step, cmp.Diff(*good, d.Spec.Template))
		got := f.llsd("app")
		assert.Equal(t, v1alpha2.ReasonRolledBack, cond(t, got, v1alpha2.ConditionProgressing).Reason, step)
		assert.Equal(t, failedInputs, got.Status.Rollback.FailedInputs, step)
		assert.Equal(t, 0, countEvents(f.events(), "Warning RolledBack"), "%s: no second rollback", step)
	}

	// A write that changes nothing v1alpha1 sees (kubectl apply of the same manifest):
	// the v1alpha2 spec comes back whole, so the failed inputs stay the failed inputs.
	before := f.llsd("app").Spec
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Labels = map[string]string{"team": "a"}
	})
	assert.True(t, equality.Semantic.DeepEqual(before, f.llsd("app").Spec), "the round trip keeps the spec:\n%s",
		cmp.Diff(before, f.llsd("app").Spec))
	assert.Empty(t, writesTo(f.sync("app"), "deployments", "app"), "nothing to write: the hold stands")
	f.converge("app")
	held("a v1alpha1 write of the same spec")

	// Scaling in v1alpha1 keeps the served template: the replicas change, the pods do
	// not roll, the failed change does not come back.
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 2 })
	f.converge("app")
	assert.Equal(t, ptr.To[int32](2), f.deployment("app").Spec.Replicas)
	held("scaled in v1alpha1")

	// A fix written in v1alpha1 (the env var that failed set another way) is new
	// inputs: they roll out, over the storage's Recreate, and the hold's record goes.
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		env := l.Spec.Server.ContainerSpec.Env
		for i := range env {
			if env[i].Name == "LOG_LEVEL" {
				env[i].Value = "info"
			}
		}
	})
	f.converge("app")
	d := f.deployment("app")
	v, ok := serverEnv(d, "LOG_LEVEL")
	assert.True(t, ok && v == "info", "the fix rolls out: LOG_LEVEL=%q", v)
	assert.Equal(t, appsv1.RecreateDeploymentStrategyType, d.Spec.Strategy.Type)
	assert.Equal(t, good.Annotations[llsd.AnnotationTLSHash], d.Spec.Template.Annotations[llsd.AnnotationTLSHash], "still serving TLS")
	assert.Equal(t, ptr.To[int32](2), d.Spec.Replicas)
	assert.NotContains(t, d.Annotations, rollout.AnnotationRolledBack)
	got := f.llsd("app")
	assert.NotEqual(t, v1alpha2.ReasonRolledBack, cond(t, got, v1alpha2.ConditionProgressing).Reason)
	assert.Empty(t, got.Status.Rollback.FailedInputs)
	require.NotNil(t, got.Spec.Networking)
	require.NotNil(t, got.Spec.Networking.TLS)
	assert.True(t, got.Spec.Networking.TLS.Enabled, "the v1alpha2 TLS survives the v1alpha1 edits")
	assert.NotNil(t, got.Spec.Providers, "the v1alpha2 providers survive the v1alpha1 edits")
	ing, err := f.kubeclient.NetworkingV1().Ingresses(testNamespace).Get(f.ctx, llsd.IngressName(got), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "llama.example.com", ing.Spec.Rules[0].Host)
	pvc, err := f.kubeclient.CoreV1().PersistentVolumeClaims(testNamespace).Get(f.ctx, llsd.PVCName(got), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ClaimBound, pvc.Status.Phase, "the claim is untouched")
}
