package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

func TestTemplateRefs(t *testing.T) {
	optional := ptr.To(true)
	cmRef := func(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: cmRef("config")}}},
			{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "maybe", Optional: optional}}},
			{Name: "d", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: cmRef("bundle")}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: cmRef("tls")}},
			}}}},
			{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
		InitContainers: []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: cmRef("init-env")}}}}},
		Containers: []corev1.Container{{
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: cmRef("env"), Optional: optional}}},
			Env: []corev1.EnvVar{
				{Name: "A", Value: "plain"},
				{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: cmRef("api-keys"), Key: "k"}}},
				{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef("config"), Key: "k"}}},
				{Name: "D", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
		}},
	}}
	assert.Equal(t, []templateRef{{"ConfigMap", "config"}, {"Secret", "tls"}, {"ConfigMap", "bundle"}, {"Secret", "init-env"}, {"Secret", "api-keys"}},
		templateRefs(&tmpl), "each once, optional ones left out")
}

// A rollback to a template whose config is gone would leave pods waiting for ever (with
// storage, nothing serving): it is not made, and Progressing names what is gone.
func TestNoRollbackToATemplateWhoseConfigMapIsGone(t *testing.T) {
	f := newRollbackFixture(t, newGenLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Workload.Storage = &v1alpha2.PVCStorageSpec{}
	}))
	served := f.llsd("app").Status.Rollback.ServedReplicaSet
	servedConfig, _ := configVolume(&f.deployment("app").Spec.Template)
	require.NotEmpty(t, servedConfig)

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Providers.Inference[0].Endpoint = "http://vllm-next:8000/v1"
	})
	f.converge("app")
	newConfig, _ := configVolume(&f.deployment("app").Spec.Template)
	require.NotEqual(t, servedConfig, newConfig)
	require.Contains(t, f.configMapNames(), servedConfig, "kept while a ReplicaSet mounts it")
	require.NoError(t, f.kubeclient.CoreV1().ConfigMaps(testNamespace).Delete(f.ctx, servedConfig, metav1.DeleteOptions{}))
	failed := f.rollOut()
	f.setDeploymentStatus("app", newPodFailing(false))
	f.crashLooping(failed+"-x1", failed, rollbackAfterRestarts)
	tmpl := f.deployment("app").Spec.Template
	f.converge("app")

	assert.Equal(t, tmpl, f.deployment("app").Spec.Template, "not rolled back")
	assert.NotContains(t, f.deployment("app").Annotations, annotationRolledBack)
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
	f.crashLooping(failed+"-x1", failed, rollbackAfterRestarts)
	tmpl := f.deployment("app").Spec.Template
	for range 2 {
		assert.Empty(t, writesTo(f.sync("app"), "deployments", "app"))
	}
	assert.Equal(t, tmpl, f.deployment("app").Spec.Template, "not rolled back")
	p := cond(t, f.llsd("app"), v1alpha2.ConditionProgressing)
	assert.Contains(t, p.Message, "not rolled back: Secret api-keys, which ReplicaSet "+served+" needs, no longer exists")
	assert.Equal(t, 0, countEvents(f.events(), "Warning RolledBack"))
}
