package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// testImage is starter's pinned image.
const testImage = "docker.io/ogxai/distribution-starter:1.3.0"

func serverOf(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	return d.Spec.Template.Spec.Containers[0]
}

func envNames(env []corev1.EnvVar) []string {
	names := make([]string, 0, len(env))
	for _, e := range env {
		names = append(names, e.Name)
	}
	return names
}

func envValue(t *testing.T, env []corev1.EnvVar, name string) string {
	t.Helper()
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	t.Fatalf("env %s not set", name)
	return ""
}

func volumeNames(vs []corev1.Volume) []string {
	names := make([]string, 0, len(vs))
	for _, v := range vs {
		names = append(names, v.Name)
	}
	return names
}

func mountNames(ms []corev1.VolumeMount) []string {
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, m.Name)
	}
	return names
}

func envMap(env []corev1.EnvVar) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return m
}

// Scaling never changes the pod template, so it never rolls the pods: 1 -> 3 -> 1 by
// spec.replicas, with and without storage (whose Recreate strategy would make a roll an
// outage), changes spec.replicas alone.
func TestScalingKeepsThePodTemplate(t *testing.T) {
	for name, mutate := range map[string]func(*v1alpha1.LlamaStackDistribution){
		"without storage": nil,
		"with storage":    func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = &v1alpha1.StorageSpec{} },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
				if mutate != nil {
					mutate(l)
				}
			}))
			f.converge("app")
			template := f.deployment("app").Spec.Template
			for _, n := range []int32{3, 1} {
				f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = n })
				f.converge("app")
				d := f.deployment("app")
				assert.Equal(t, n, ptr.Deref(d.Spec.Replicas, 0))
				assert.Equal(t, template, d.Spec.Template, "scaling to %d changes the pod template", n)
			}
		})
	}
}

// A Deployment an earlier release made at one replica has no default spreading: the
// upgraded controller does not roll it for that alone, nor when it is scaled, and adds
// the spreading with the next change that rolls the pods anyway.
func TestUpgradeDoesNotRollForTheSpreading(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	// As the earlier release applied it: no affinity, no spread constraints.
	f.updateDeployment("app", FieldManager, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Affinity = nil
		d.Spec.Template.Spec.TopologySpreadConstraints = nil
	})
	before := f.deployment("app").Spec.Template
	require.Nil(t, before.Spec.Affinity)
	assert.Empty(t, writesTo(f.sync("app"), "deployments", "app"), "no roll for the spreading alone")
	assert.Equal(t, before, f.deployment("app").Spec.Template)

	// Scaling never rolls the pods: up to two, and back to one, the template stays.
	for _, n := range []int32{2, 1} {
		f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Replicas = ptr.To(n) })
		f.converge("app")
		d := f.deployment("app")
		assert.Equal(t, n, ptr.Deref(d.Spec.Replicas, 0))
		assert.Equal(t, before, d.Spec.Template, "scaling to %d rolls no pod", n)
	}

	// A change that rolls the pods anyway brings it.
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}
	})
	f.converge("app")
	after := f.deployment("app").Spec.Template.Spec
	assert.NotNil(t, after.Affinity)
	assert.Len(t, after.TopologySpreadConstraints, 3)
}
