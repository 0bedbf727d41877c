package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
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
	assert.Equal(t, []TemplateRef{{"ConfigMap", "config"}, {"Secret", "tls"}, {"ConfigMap", "bundle"}, {"Secret", "init-env"}, {"Secret", "api-keys"}},
		TemplateRefs(&tmpl), "each once, optional ones left out")
}
