package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
)

// A rollback to a template whose config is gone would leave pods waiting for ever (with
// storage, nothing serving): it is not made, and Progressing names what is gone.
func TestNoRollbackToATemplateWhoseConfigMapIsGone(t *testing.T) {
	f := newRollbackFixture(t, newGenLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Workload.Storage = &v1alpha2.PVCStorageSpec{}
	}))
	served := f.llsd("app").Status.Rollback.ServedReplicaSet
	servedConfig, _ := rollout.ConfigVolume(&f.deployment("app").Spec.Template)
	require.NotEmpty(t, servedConfig)

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Providers.Inference[0].Endpoint = "http://vllm-next:8000/v1"
	})
	f.converge("app")
	newConfig, _ := rollout.ConfigVolume(&f.deployment("app").Spec.Template)
	require.NotEqual(t, servedConfig, newConfig)
	require.Contains(t, f.configMapNames(), servedConfig, "kept while a ReplicaSet mounts it")
	require.NoError(t, f.kubeclient.CoreV1().ConfigMaps(testNamespace).Delete(f.ctx, servedConfig, metav1.DeleteOptions{}))
	failed := f.rollOut()
	f.setDeploymentStatus("app", newPodFailing(false))
	f.crashLooping(failed+"-x1", failed, rollout.RollbackAfterRestarts)
	tmpl := f.deployment("app").Spec.Template
	f.converge("app")

	assert.Equal(t, tmpl, f.deployment("app").Spec.Template, "not rolled back")
	assert.NotContains(t, f.deployment("app").Annotations, rollout.AnnotationRolledBack)
	p := cond(t, f.llsd("app"), v1alpha2.ConditionProgressing)
	assert.Equal(t, v1alpha2.ReasonCrashLoopBackOff, p.Reason)
	assert.Contains(t, p.Message, "not rolled back: ConfigMap "+servedConfig+", which ReplicaSet "+served+" needs, no longer exists")
	assert.Equal(t, 0, countEvents(f.events(), "Warning RolledBack"))
	assert.NotContains(t, f.configMapNames(), servedConfig, "not made again by the controller")
}

// The same for a Secret the served pods read their env from: read live, once the
// rollback is about to be made.
func TestNoRollbackToATemplateWhoseSecretIsGone(t *testing.T) {
	f := newRollbackFixture(t, newGenLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{Env: []corev1.EnvVar{{Name: "API_KEY", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "api-keys"}, Key: "key"}}}}}
	}))
	served := f.llsd("app").Status.Rollback.ServedReplicaSet
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Overrides.Env = nil })
	f.converge("app")
	require.NoError(t, f.kubeclient.CoreV1().Secrets(testNamespace).Delete(f.ctx, "api-keys", metav1.DeleteOptions{}))
	failed := f.rollOut()
	f.setDeploymentStatus("app", newPodFailing(true))
	f.crashLooping(failed+"-x1", failed, rollout.RollbackAfterRestarts)
	tmpl := f.deployment("app").Spec.Template
	for range 2 {
		assert.Empty(t, writesTo(f.sync("app"), "deployments", "app"))
	}
	assert.Equal(t, tmpl, f.deployment("app").Spec.Template, "not rolled back")
	p := cond(t, f.llsd("app"), v1alpha2.ConditionProgressing)
	assert.Contains(t, p.Message, "not rolled back: Secret api-keys, which ReplicaSet "+served+" needs, no longer exists")
	assert.Equal(t, 0, countEvents(f.events(), "Warning RolledBack"))
}
