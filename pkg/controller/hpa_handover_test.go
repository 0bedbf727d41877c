package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// hpaManager is the field manager of the HPA's writes to a Deployment's replicas.
const hpaManager = "kube-controller-manager"

func (f *fixture) replicas(name string) int32 {
	f.t.Helper()
	r := f.deployment(name).Spec.Replicas
	require.NotNil(f.t, r, "Deployment %s has no spec.replicas", name)
	return *r
}

// scaleAsHPA sets the Deployment's replicas as the HPA would.
func (f *fixture) scaleAsHPA(name string, replicas int32) {
	f.t.Helper()
	f.updateDeployment(name, hpaManager, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(replicas) })
}

func TestReplicasWrittenByTheHPAAreLeftAlone(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 5}
	}))
	f.converge("app")
	assert.Equal(t, int32(1), f.replicas("app"), "a new Deployment starts at the HPA's minimum")

	f.scaleAsHPA("app", 4)
	require.Empty(t, childWrites(f.sync("app")), "the HPA's replica count is no reason to apply")
	assert.Equal(t, int32(4), f.replicas("app"))
	require.Empty(t, describe(f.sync("app")), "the status follows once, then nothing")
	assert.Equal(t, int32(4), f.replicas("app"))

	// A spec change rolls the Deployment without touching the HPA's count.
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "X", Value: "1"}}
	})
	actions := f.sync("app")
	assert.Equal(t, []string{"patch deployments app"}, writesTo(actions, "deployments", "app"))
	assert.Equal(t, int32(4), f.replicas("app"))
	f.converge("app")
	assert.Equal(t, int32(4), f.replicas("app"))
	require.Empty(t, describe(f.sync("app")))
}

func TestEnablingAutoscalingNeverLowersReplicas(t *testing.T) {
	tests := map[string]func(*v1alpha1.LlamaStackDistribution){
		"replicas kept at 3": func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 10}
		},
		"replicas lowered to 1 in the same edit": func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Replicas = 1
			l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 10}
		},
	}
	for name, enable := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 3 }))
			f.converge("app")
			require.Equal(t, int32(3), f.replicas("app"))

			f.updateLLSD("app", enable)
			for i := range 5 {
				actions := f.sync("app")
				assert.GreaterOrEqual(t, f.replicas("app"), int32(3), "sync %d lowered the running replicas", i+1)
				if len(actions) == 0 {
					break
				}
			}
			require.Empty(t, describe(f.sync("app")))
			assert.NotNil(t, f.stored(kindHPA, "app-hpa"))

			// The HPA takes over, up or down; the controller follows.
			f.scaleAsHPA("app", 6)
			require.Empty(t, childWrites(f.sync("app")))
			assert.Equal(t, int32(6), f.replicas("app"))
			f.scaleAsHPA("app", 2)
			require.Empty(t, childWrites(f.sync("app")))
			assert.Equal(t, int32(2), f.replicas("app"))
		})
	}
}

func TestDisablingAutoscalingReturnsToSpecReplicas(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Replicas = 2
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 8}
	}))
	f.converge("app")
	f.scaleAsHPA("app", 7)
	require.Empty(t, childWrites(f.sync("app")))

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Autoscaling = nil })
	actions := f.sync("app")
	assert.Equal(t, []string{"patch deployments app"}, writesTo(actions, "deployments", "app"))
	assert.Equal(t, []string{"delete horizontalpodautoscalers app-hpa"}, writesTo(actions, "horizontalpodautoscalers", "app-hpa"))
	assert.Equal(t, int32(2), f.replicas("app"))
	f.converge("app")
	assert.Equal(t, int32(2), f.replicas("app"))

	// spec.replicas is ours again: a later edit of it is applied.
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 3 })
	f.converge("app")
	assert.Equal(t, int32(3), f.replicas("app"))
}

// A Deployment missing from the filtered cache (its managed-by label removed by hand)
// is read live before replicas are chosen: the HPA's count is never lowered.
func TestHPACountKeptOnACacheMiss(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 5}
	}))
	f.converge("app")
	f.scaleAsHPA("app", 4)
	f.converge("app")
	f.updateDeployment("app", "kubectl-label", func(d *appsv1.Deployment) { delete(d.Labels, llsd.LabelManagedBy) })
	_, err := f.c.deployments.Cached(testNamespace, "app")
	require.Error(t, err, "the Deployment left the filtered cache")

	actions := f.sync("app")
	assert.Equal(t, int32(4), f.replicas("app"), "replicas went from the HPA's 4 down")
	assert.Equal(t, []string{"patch deployments app"}, writesTo(actions, "deployments", "app"), "the label is put back")
	assert.Equal(t, ManagedByValue, f.deployment("app").Labels[llsd.LabelManagedBy])
	f.converge("app")
	assert.Equal(t, int32(4), f.replicas("app"))
}

// The live read that chooses replicas for a new autoscaled Deployment is the one read:
// the write that follows does not look the Deployment up again.
func TestNewAutoscaledDeploymentReadOnce(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 5}
	}))
	var reads []string
	for _, line := range describe(f.sync("app")) {
		if line == "get deployments app" {
			reads = append(reads, line)
		}
	}
	assert.Equal(t, []string{"get deployments app"}, reads)
	assert.Equal(t, int32(1), f.replicas("app"), "a new Deployment starts at the HPA's minimum")
	f.converge("app")
}
