package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

const (
	overrideImage  = "quay.io/test/llama-stack:override-test"
	overrideImage2 = "quay.io/test/llama-stack:override-two"
	invalidYAML    = "starter: [unclosed\n  - : :"
)

// restartController replaces the controller by a new one over the same fakes, with empty
// informer factories filled from the fakes, as after a restart of the process.
func (f *fixture) restartController() {
	f.t.Helper()
	f.newController()
}

func (f *fixture) image(name string) string {
	f.t.Helper()
	return serverContainerOf(f.t, f.deployment(name)).Image
}

// createLLSD adds a CR to the fake API and the caches.
func (f *fixture) createLLSD(l *v1alpha1.LlamaStackDistribution) {
	f.t.Helper()
	require.NoError(f.t, f.client.Tracker().Add(l))
	f.refreshCaches()
}

func TestImageOverridesChangeTheImage(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	assert.Equal(t, testImage, f.image("app"))

	f.setOperatorConfig(map[string]string{"image-overrides": "starter: " + overrideImage + "\n"})
	actions := f.sync("app")
	assert.Equal(t, []string{"patch deployments app"}, childWrites(actions))
	assert.Equal(t, overrideImage, f.image("app"))
	f.converge("app")

	f.setOperatorConfig(map[string]string{"image-overrides": "starter: " + overrideImage2 + "\n"})
	assert.Equal(t, []string{"patch deployments app"}, childWrites(f.sync("app")))
	assert.Equal(t, overrideImage2, f.image("app"))

	// An override of another distribution does not touch this one; removing ours restores the default.
	f.setOperatorConfig(map[string]string{"image-overrides": "remote-vllm: " + overrideImage + "\n"})
	assert.Equal(t, []string{"patch deployments app"}, childWrites(f.sync("app")))
	assert.Equal(t, testImage, f.image("app"))
	f.converge("app")
	require.Empty(t, describe(f.sync("app")))
}

func TestInvalidImageOverridesKeepRunningImages(t *testing.T) {
	f := newFixture(t, newLLSD("app"), operatorConfigMap(map[string]string{"image-overrides": "starter: " + overrideImage + "\n"}))
	f.converge("app")
	require.Equal(t, overrideImage, f.image("app"))

	f.setOperatorConfig(map[string]string{"image-overrides": invalidYAML})
	assert.Empty(t, childWrites(f.sync("app")), "no rollout while image-overrides does not parse")
	assert.Equal(t, overrideImage, f.image("app"))
	assert.NotEqual(t, v1alpha1.PhaseFailed, f.llsd("app").Status.Phase, "an operator problem is not the CR's")

	// A spec change still rolls out, with the running image.
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "X", Value: "1"}}
	})
	assert.Equal(t, []string{"patch deployments app"}, childWrites(f.sync("app")))
	assert.Equal(t, overrideImage, f.image("app"))
	f.converge("app")

	// After a restart, with nothing in memory from before.
	f.restartController()
	assert.Empty(t, childWrites(f.sync("app")))
	assert.Equal(t, overrideImage, f.image("app"))

	// A new CR gets the built-in image of its distribution.
	f.createLLSD(newLLSD("fresh"))
	f.converge("fresh")
	assert.Equal(t, builtinDistributions()["starter"], f.image("fresh"))
	assert.Equal(t, testImage, f.image("fresh"))
	assert.Equal(t, overrideImage, f.image("app"))

	// Fixed again: the valid overrides apply.
	f.setOperatorConfig(map[string]string{"image-overrides": "starter: " + overrideImage2 + "\n"})
	f.converge("app")
	f.converge("fresh")
	assert.Equal(t, overrideImage2, f.image("app"))
	assert.Equal(t, overrideImage2, f.image("fresh"))
}

func TestParseOperatorConfigSkipsOneBadImageReference(t *testing.T) {
	cfg := parseOperatorConfig(operatorConfigMap(map[string]string{
		"image-overrides": "starter: " + overrideImage + "\n" +
			"remote-vllm: 'Not An Image!'\n" +
			"postgres-demo: registry.example.com:5000/team/server@sha256:" + sha256Zeros + "\n",
	}))
	assert.False(t, cfg.overridesInvalid)
	assert.Equal(t, map[string]string{
		"starter":       overrideImage,
		"postgres-demo": "registry.example.com:5000/team/server@sha256:" + sha256Zeros,
	}, cfg.imageOverrides)
	require.Len(t, cfg.problems, 1)
	assert.Contains(t, cfg.problems[0], "remote-vllm")
	assert.Contains(t, cfg.problems[0], "Not An Image!")

	invalid := parseOperatorConfig(operatorConfigMap(map[string]string{"image-overrides": invalidYAML}))
	assert.True(t, invalid.overridesInvalid)
	assert.Empty(t, invalid.imageOverrides)
	assert.Len(t, invalid.problems, 1)

	none := parseOperatorConfig(nil)
	assert.True(t, none.networkPolicyKnown)
	assert.False(t, none.enableNetworkPolicy)
	assert.False(t, none.overridesInvalid)
	assert.Empty(t, none.problems)
}

const sha256Zeros = "0000000000000000000000000000000000000000000000000000000000000000"

func TestOneBadImageReferenceLeavesTheOthersApplied(t *testing.T) {
	f := newFixture(t, newLLSD("app"), newLLSD("vllm", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Distribution.Name = "remote-vllm"
	}), operatorConfigMap(map[string]string{
		"image-overrides": "starter: " + overrideImage + "\nremote-vllm: 'Not An Image!'\n",
	}))
	f.converge("app")
	f.converge("vllm")
	assert.Equal(t, overrideImage, f.image("app"))
	assert.Equal(t, builtinDistributions()["remote-vllm"], f.image("vllm"), "the bad entry is skipped")
}

func TestNetworkPolicyFollowsTheFeatureFlag(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	assert.Nil(t, f.stored(kindNetworkPolicy, "app-network-policy"), "off by default")

	f.setOperatorConfig(map[string]string{"featureFlags": featureFlagsOn})
	actions := f.sync("app")
	requireApplies(t, actions)
	assert.Equal(t, []string{"patch networkpolicies app-network-policy"}, childWrites(actions))
	np := f.stored(kindNetworkPolicy, "app-network-policy")
	require.NotNil(t, np)
	assertControlledChild(t, np, f.llsd("app"))
	f.converge("app")
	require.Empty(t, describe(f.sync("app")))

	// featureFlags that do not parse leave the NetworkPolicy in place.
	f.setOperatorConfig(map[string]string{"featureFlags": "enableNetworkPolicy: [oops"})
	assert.Empty(t, childWrites(f.sync("app")))
	assert.NotNil(t, f.stored(kindNetworkPolicy, "app-network-policy"))
	f.converge("app")
	assert.NotNil(t, f.stored(kindNetworkPolicy, "app-network-policy"))

	f.setOperatorConfig(map[string]string{"featureFlags": featureFlagsOff})
	assert.Equal(t, []string{"delete networkpolicies app-network-policy"}, childWrites(f.sync("app")))
	assert.Nil(t, f.stored(kindNetworkPolicy, "app-network-policy"))
	f.converge("app")
	require.Empty(t, describe(f.sync("app")))
}

func TestInvalidFeatureFlagsCreateNoNetworkPolicy(t *testing.T) {
	f := newFixture(t, newLLSD("app"), operatorConfigMap(map[string]string{"featureFlags": "enableNetworkPolicy: [oops"}))
	f.converge("app")
	assert.Nil(t, f.stored(kindNetworkPolicy, "app-network-policy"))
}

func TestOperatorConfigHandlerReportsInvalidContent(t *testing.T) {
	f := newFixture(t, newLLSD("app"), newLLSD("other"))
	h := f.c.operatorConfigHandler(f.ctx)
	drain := func() []cache.ObjectName {
		var keys []cache.ObjectName
		for f.c.queue.Len() > 0 {
			k, _ := f.c.queue.Get()
			keys = append(keys, k)
			f.c.queue.Done(k)
			f.c.queue.Forget(k)
		}
		return keys
	}

	bad := operatorConfigMap(map[string]string{"image-overrides": invalidYAML, "featureFlags": "enableNetworkPolicy: [oops"})
	bad.ResourceVersion = "1"
	h.OnAdd(bad, false)
	events := f.events()
	assert.Equal(t, 2, countEvents(events, "Warning InvalidConfiguration"), "one Event per problem: %v", events)
	assert.True(t, hasEvent(events, "image-overrides"), "events: %v", events)
	assert.True(t, hasEvent(events, "featureFlags"), "events: %v", events)
	assert.ElementsMatch(t, []cache.ObjectName{{Namespace: testNamespace, Name: "app"}, {Namespace: testNamespace, Name: "other"}}, drain(),
		"every CR is synced again")

	// A resync (same resourceVersion) reports nothing and enqueues nothing.
	h.OnUpdate(bad, bad.DeepCopy())
	assert.Empty(t, f.events())
	assert.Zero(t, f.c.queue.Len())

	oneBad := operatorConfigMap(map[string]string{"image-overrides": "starter: 'Not An Image!'\n"})
	oneBad.ResourceVersion = "2"
	h.OnUpdate(bad, oneBad)
	events = f.events()
	assert.Equal(t, 1, countEvents(events, "Warning InvalidConfiguration"), "events: %v", events)
	assert.True(t, hasEvent(events, "Not An Image!"), "events: %v", events)
	assert.Len(t, drain(), 2)

	good := operatorConfigMap(map[string]string{"image-overrides": "starter: " + overrideImage + "\n", "featureFlags": featureFlagsOn})
	good.ResourceVersion = "3"
	h.OnUpdate(oneBad, good)
	assert.Empty(t, f.events(), "a valid ConfigMap is not reported")
	assert.Len(t, drain(), 2)

	// Another ConfigMap of the same name elsewhere is not the operator's.
	elsewhere := configMap(testNamespace, OperatorConfigMapName, map[string]string{"image-overrides": invalidYAML}, nil)
	h.OnAdd(elsewhere, false)
	assert.Empty(t, f.events())
	assert.Zero(t, f.c.queue.Len())

	h.OnDelete(good)
	assert.Len(t, drain(), 2, "a deleted operator ConfigMap re-syncs every CR")
}
