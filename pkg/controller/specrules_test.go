package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// A CR stored with overrideConfig beside providers (a v1alpha1 write of
// server.userConfig before the admission policy judged it) is reported, naming the
// field to remove, with one Warning Event; the template that runs is kept until the field is
// removed, and a change of replicas (the scale subresource) reaches it.
func TestSpecBreakingAV1alpha2RuleIsReported(t *testing.T) {
	f := newFixture(t, newGenLLSD("app"))
	f.converge("app")
	before := f.deployment("app").DeepCopy()
	f.events()

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.OverrideConfig = &v1alpha2.OverrideConfigSpec{ConfigMapName: "own"}
	})
	actions := f.sync("app")
	assert.Equal(t, []string{"update llamastackdistributions/status app"}, describe(mutating(actions)), "nothing but the status is written")
	assert.Equal(t, before.Spec, f.deployment("app").Spec, "the Deployment is kept as it runs")
	l := f.llsd("app")
	var told *metav1.Condition
	for _, c := range []string{v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionProgressing} {
		if c := meta.FindStatusCondition(l.Status.Conditions, c); c != nil && c.Reason == v1alpha2.ReasonSpecInvalid {
			told = c
		}
	}
	require.NotNil(t, told, "a condition says SpecInvalid: %v", l.Status.Conditions)
	assert.Equal(t, metav1.ConditionFalse, told.Status)
	assert.Contains(t, told.Message, "spec.overrideConfig and spec.providers: overrideConfig is the whole config.yaml as given")
	assert.Contains(t, told.Message, "remove spec.overrideConfig (server.userConfig in v1alpha1)")
	events := f.events()
	assert.Equal(t, 1, countEvents(events, "Warning SpecInvalid"), "%v", events)

	f.sync("app")
	assert.Zero(t, countEvents(f.events(), "Warning"), "the same problem is told once")

	// A scale (what the scale subresource writes) reaches the Deployment that serves,
	// whose template is kept; the problem says so.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Replicas = ptr.To[int32](3) })
	f.sync("app")
	scaled := before.Spec.DeepCopy()
	scaled.Replicas = ptr.To[int32](3)
	assert.Equal(t, *scaled, f.deployment("app").Spec, "the template is kept, the replica count applied")
	assert.Contains(t, cond(t, f.llsd("app"), told.Type).Message, "; the Deployment keeps its template, its replica count follows the CR", "the condition says what is held")
	assert.Zero(t, countEvents(f.events(), "Warning"), "a scale does not tell the problem again")

	// Removed: the CR converges, replicas included.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.OverrideConfig = nil })
	f.converge("app")
	assert.Equal(t, ptr.To[int32](3), f.deployment("app").Spec.Replicas)
	for _, c := range f.llsd("app").Status.Conditions {
		assert.NotEqual(t, v1alpha2.ReasonSpecInvalid, c.Reason, "%s", c.Type)
	}
}
