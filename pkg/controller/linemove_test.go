package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

const (
	previousPin = "docker.io/llamastack/distribution-starter:0.7.1"
	config07    = "version: 2\ndistro_name: starter\napis: [inference, safety]\nproviders:\n  inference: [{provider_id: vllm, provider_type: remote::vllm, config: {base_url: 'http://v'}}]\n  safety: [{provider_id: g, provider_type: inline::llama-guard}]\n"
	configBoth  = "version: 2\ndistro_name: starter\napis: [inference]\nproviders:\n  inference: [{provider_id: vllm, provider_type: remote::vllm, config: {base_url: 'http://v'}}]\n"
)

// A user-written config that names an API the new pin's server lacks is not rolled
// onto it: the CR keeps the image it runs and says why and how to hold the old line.
// One that fits moves with the pin; a fix moves it.
func TestUserConfigNotRolledOntoAVersionItDoesNotFit(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withUserConfigMap("cfg", "")),
		configMap(testNamespace, "cfg", map[string]string{"config.yaml": config07}, nil),
		operatorConfigMap(map[string]string{revision.KeyImageOverrides: "starter: " + previousPin + "\n"}))
	f.converge("app")
	require.Equal(t, previousPin, f.image("app"), "the previous release's pin runs")
	f.events()

	// This release: no override, the pin moves to OGX 1.3.0.
	f.setOperatorConfig(map[string]string{revision.KeyFeatureFlags: featureFlagsOff})
	f.converge("app")
	assert.Equal(t, previousPin, f.image("app"), "the config is not rolled onto a server that refuses it")
	c := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady)
	assert.Equal(t, v1alpha2.ReasonConfigInvalid, c.Reason)
	for _, want := range []string{
		"does not fit server 1.3.0", "providers.safety: server 1.3.0 has no safety API",
		"It keeps running " + previousPin, "image-overrides", "docker.io/ogxai/distribution-starter:0.6.1",
	} {
		assert.Contains(t, c.Message, want)
	}
	d := f.deployment("app")
	assert.Equal(t, []string{"/bin/sh", "-c", children.StartupScript}, serverContainerOf(t, d).Command, "the running pod template is untouched")
	// An unchanged CR does not read the file again.
	assert.Empty(t, f.sync("app"), "nothing read or written once the file is known")

	// The user rewrites the config for 1.x: it moves, in one rollout, the OGX way.
	f.putConfigMap(configMap(testNamespace, "cfg", map[string]string{"config.yaml": configBoth}, nil))
	f.converge("app")
	assert.Equal(t, testImage, f.image("app"))
	ctr := serverContainerOf(t, f.deployment("app"))
	assert.Empty(t, ctr.Command, "started by the OGX image's entrypoint")
	assert.NotEqual(t, v1alpha2.ReasonConfigInvalid, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason)
}

// A config that fits both lines moves with the pin at once.
func TestUserConfigThatFitsMovesWithThePin(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withUserConfigMap("cfg", "")),
		configMap(testNamespace, "cfg", map[string]string{"config.yaml": configBoth}, nil),
		operatorConfigMap(map[string]string{revision.KeyImageOverrides: "starter: " + previousPin + "\n"}))
	f.converge("app")
	require.Equal(t, previousPin, f.image("app"))
	f.setOperatorConfig(map[string]string{revision.KeyFeatureFlags: featureFlagsOff})
	f.converge("app")
	assert.Equal(t, testImage, f.image("app"))
}

// A user config the server of its image would refuse is not rolled out, for a new CR
// as for an edit; the skip annotation rolls it out unchecked, told once.
func TestUserConfigPreflight(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withUserConfigMap("cfg", "")),
		configMap(testNamespace, "cfg", map[string]string{"config.yaml": config07}, nil))
	f.converge("app")
	assert.Nil(t, f.stored(kindDeployment, "app"), "nothing is rolled out")
	c := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady)
	assert.Equal(t, v1alpha2.ReasonConfigInvalid, c.Reason)
	for _, want := range []string{"spec.overrideConfig (v1alpha1 spec.server.userConfig)", "would stop server 1.3.0", "no safety API", revision.AnnotationSkipConfigCheck} {
		assert.Contains(t, c.Message, want)
	}
	assert.Equal(t, 1, countEvents(f.events(), "Warning ConfigInvalid"))
	assert.Empty(t, f.sync("app"), "the file is not read again while unchanged")

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Annotations = map[string]string{revision.AnnotationSkipConfigCheck: "true"}
	})
	f.converge("app")
	require.NotNil(t, f.stored(kindDeployment, "app"), "rolled out unchecked")
	events := f.events()
	assert.Equal(t, 1, countEvents(events, "Warning "+revision.ReasonConfigCheckSkipped), "events: %v", events)
	f.sync("app")
	assert.Zero(t, countEvents(f.events(), "Warning "+revision.ReasonConfigCheckSkipped), "told once")

	// A file that fits needs no annotation.
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Annotations = nil })
	f.putConfigMap(configMap(testNamespace, "cfg", map[string]string{"config.yaml": configBoth}, nil))
	f.converge("app")
	assert.NotEqual(t, v1alpha2.ReasonConfigInvalid, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason)
}

// A 1.3 user config with a 0.x top-level safety key: the server ignores it, so the file
// is rolled out, with one Warning naming the key, the version and what replaced it;
// not again at the next sync.
func TestUserConfigIgnoredKeyRollsOutWithOneWarning(t *testing.T) {
	withSafety := configBoth + "safety: {default_shield_id: llama-guard}\n"
	f := newFixture(t, newLLSDv1("app", withUserConfigMap("cfg", "")),
		configMap(testNamespace, "cfg", map[string]string{"config.yaml": withSafety}, nil))
	f.converge("app")
	assert.Equal(t, testImage, f.image("app"), "rolled out")
	assert.NotEqual(t, v1alpha2.ReasonConfigInvalid, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason)
	events := f.events()
	assert.Equal(t, 1, countEvents(events, "Warning "+revision.ReasonConfigKeyIgnored), "events: %v", events)
	for _, want := range []string{
		"ConfigMap " + testNamespace + "/cfg", "safety: server 1.3.0 ignores it (removed in 1.0 with the safety API",
		"moderation_endpoint",
	} {
		assert.True(t, hasEvent(events, want), "no event with %q: %v", want, events)
	}
	f.sync("app")
	assert.Zero(t, countEvents(f.events(), "Warning "+revision.ReasonConfigKeyIgnored), "told once")

	// The same keys in a new file content are told again, once.
	f.putConfigMap(configMap(testNamespace, "cfg", map[string]string{"config.yaml": withSafety + "server: {cors: true}\n"}, nil))
	f.converge("app")
	events = f.events()
	assert.Equal(t, 1, countEvents(events, "Warning "+revision.ReasonConfigKeyIgnored), "events: %v", events)
	assert.True(t, hasEvent(events, "server.cors: server 1.3.0 ignores it"), "events: %v", events)
}
