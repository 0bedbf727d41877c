package controller

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

const (
	overrideImage  = "quay.io/test/llama-stack:override-test"
	overrideImage2 = "quay.io/test/llama-stack:override-two"
	invalidYAML    = "starter: [unclosed\n  - : :"
)

func TestImageOverridesChangeTheImage(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	assert.Equal(t, testImage, f.image("app"))

	// The override's tag names no server version: the Service loses the metrics port
	// of the pinned server (servermetrics.go), which it gets back with the pin.
	f.setOperatorConfig(map[string]string{"image-overrides": "starter: " + overrideImage + "\n"})
	actions := f.sync("app")
	assert.Equal(t, []string{"patch deployments app", "patch services app-service"}, childWrites(actions))
	assert.Equal(t, overrideImage, f.image("app"))
	f.converge("app")

	f.setOperatorConfig(map[string]string{"image-overrides": "starter: " + overrideImage2 + "\n"})
	assert.Equal(t, []string{"patch deployments app"}, childWrites(f.sync("app")))
	assert.Equal(t, overrideImage2, f.image("app"))

	// An override of another distribution does not touch this one; removing ours restores the default.
	f.setOperatorConfig(map[string]string{"image-overrides": "remote-vllm: " + overrideImage + "\n"})
	assert.Equal(t, []string{"patch deployments app", "patch services app-service"}, childWrites(f.sync("app")))
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
	assert.NotEqual(t, v1alpha2.PhaseFailed, f.llsd("app").Status.Phase, "an operator problem is not the CR's")

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
	f.createLLSD(newLLSDv1("fresh"))
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
		"featureFlags": featureFlagsOff,
		"image-overrides": "starter: " + overrideImage + "\n" +
			"remote-vllm: 'Not An Image!'\n" +
			"postgres-demo: registry.example.com:5000/team/server@sha256:" + sha256Zeros + "\n",
	}), builtinDistributions())
	assert.False(t, cfg.keepAllImages)
	assert.Equal(t, map[string]string{
		"starter":       overrideImage,
		"postgres-demo": "registry.example.com:5000/team/server@sha256:" + sha256Zeros,
	}, cfg.imageOverrides)
	assert.Equal(t, map[string]bool{"remote-vllm": true}, cfg.keepImages)
	assert.True(t, cfg.keepsImage("remote-vllm"))
	assert.False(t, cfg.keepsImage("starter"))
	assert.False(t, cfg.keepsImage("ollama"), "a distribution without an entry gets its built-in image")
	require.Len(t, cfg.problems, 1)
	assert.Contains(t, cfg.problems[0], "remote-vllm")
	assert.Contains(t, cfg.problems[0], "Not An Image!")

	invalid := parseOperatorConfig(operatorConfigMap(map[string]string{"featureFlags": featureFlagsOff, "image-overrides": invalidYAML}), builtinDistributions())
	assert.True(t, invalid.keepAllImages)
	assert.Empty(t, invalid.imageOverrides)
	assert.Len(t, invalid.problems, 1)

	valid := parseOperatorConfig(operatorConfigMap(map[string]string{"featureFlags": featureFlagsOff}), builtinDistributions())
	assert.True(t, valid.networkPolicyKnown)
	assert.False(t, valid.enableNetworkPolicy)
	assert.False(t, valid.keepsImage("starter"))
	assert.Empty(t, valid.problems)

	none := parseOperatorConfig(nil, builtinDistributions())
	assert.True(t, none.missing)
	assert.False(t, none.networkPolicyKnown, "without the ConfigMap NetworkPolicies are left as they are")
	assert.True(t, none.keepsImage("starter"), "without the ConfigMap running images are kept")
}

// TestParseOperatorConfigStrict: unknown keys and values of the wrong type are invalid
// input that keeps what runs, reported with the key's name; never read as a default.
func TestParseOperatorConfigStrict(t *testing.T) {
	for _, tc := range []struct {
		name       string
		data       map[string]string
		npKnown    bool
		npEnabled  bool
		smOff      bool // enableServiceMonitor read as false (default: true)
		smUnknown  bool // ServiceMonitors left as they are
		keepAll    bool
		keep       []string
		problemHas []string
	}{
		{name: "enabled", data: map[string]string{"featureFlags": featureFlagsOn}, npKnown: true, npEnabled: true},
		{name: "flow style", data: map[string]string{"featureFlags": "enableNetworkPolicy: {enabled: true}"}, npKnown: true, npEnabled: true},
		{name: "disabled", data: map[string]string{"featureFlags": featureFlagsOff}, npKnown: true},
		{name: "empty flag mapping says nothing", data: map[string]string{"featureFlags": "enableNetworkPolicy: {}"},
			problemHas: []string{"does not set enableNetworkPolicy.enabled", "left as they are"}},
		{name: "empty mapping says nothing", data: map[string]string{"featureFlags": "{}"},
			problemHas: []string{"does not set enableNetworkPolicy.enabled"}},
		{name: "empty featureFlags says nothing", data: map[string]string{"featureFlags": ""},
			problemHas: []string{"does not set enableNetworkPolicy.enabled"}},
		{name: "no featureFlags says nothing", data: map[string]string{"image-overrides": "starter: " + overrideImage},
			problemHas: []string{"does not set enableNetworkPolicy.enabled"}},
		{name: "no data says nothing", data: map[string]string{},
			keepAll: false, problemHas: []string{"does not set enableNetworkPolicy.enabled"}},
		{name: "enable for enabled", smUnknown: true, data: map[string]string{"featureFlags": "enableNetworkPolicy: {enable: true}"},
			problemHas: []string{"featureFlags", `"enable"`, "enableNetworkPolicy", "left as they are"}},
		{name: "enabeld typo", smUnknown: true, data: map[string]string{"featureFlags": "enableNetworkPolicy:\n  enabeld: true\n"},
			problemHas: []string{"featureFlags", `"enabeld"`}},
		{name: "unknown flag", smUnknown: true, data: map[string]string{"featureFlags": "enableNetworkPolicies:\n  enabled: true\n"},
			problemHas: []string{"featureFlags", `"enableNetworkPolicies"`}},
		{name: "flag not a mapping", smUnknown: true, data: map[string]string{"featureFlags": "enableNetworkPolicy: true"},
			problemHas: []string{"enableNetworkPolicy must be a mapping", "a boolean"}},
		{name: "enabled a string", smUnknown: true, data: map[string]string{"featureFlags": "enableNetworkPolicy:\n  enabled: \"true\"\n"},
			problemHas: []string{"enableNetworkPolicy.enabled must be true or false", "a string"}},
		{name: "enabled empty", smUnknown: true, data: map[string]string{"featureFlags": "enableNetworkPolicy:\n  enabled:\n"},
			problemHas: []string{"enableNetworkPolicy.enabled must be true or false", "empty"}},
		{name: "featureFlags a list", smUnknown: true, data: map[string]string{"featureFlags": "- enableNetworkPolicy\n"},
			problemHas: []string{"featureFlags must be a mapping", "a list"}},
		{name: "featureFlags not YAML", smUnknown: true, data: map[string]string{"featureFlags": "enableNetworkPolicy: [oops"},
			problemHas: []string{"featureFlags is not valid YAML"}},
		{name: "service monitors off", data: map[string]string{"featureFlags": featureFlagsOn + "enableServiceMonitor: {enabled: false}\n"},
			npKnown: true, npEnabled: true, smOff: true},
		{name: "service monitors on", data: map[string]string{"featureFlags": featureFlagsOff + "enableServiceMonitor:\n  enabled: true\n"}, npKnown: true},
		{name: "service monitors alone", data: map[string]string{"featureFlags": "enableServiceMonitor: {enabled: false}"}, smOff: true,
			problemHas: []string{"does not set enableNetworkPolicy.enabled"}},
		{name: "service monitor flag not a mapping", smUnknown: true, data: map[string]string{"featureFlags": featureFlagsOn + "enableServiceMonitor: false\n"},
			problemHas: []string{"enableServiceMonitor must be a mapping", "a boolean", "ServiceMonitors are left as they are until it is fixed"}},
		{name: "service monitor enabled a string", smUnknown: true, data: map[string]string{"featureFlags": featureFlagsOn + "enableServiceMonitor: {enabled: \"no\"}\n"},
			problemHas: []string{"enableServiceMonitor.enabled must be true or false", "a string"}},
		{name: "misspelt data key", smUnknown: true, data: map[string]string{"featureflags": featureFlagsOff},
			keepAll: true, problemHas: []string{`unknown key "featureflags"`, "NetworkPolicies, ServiceMonitors and running images are left as they are"}},
		{name: "unknown data key beside both", data: map[string]string{"featureFlags": featureFlagsOn, "image-overrides": "", "extra": "x"},
			npKnown: true, npEnabled: true, problemHas: []string{`unknown key "extra"`, "ignored"}},
		{name: "override for no distribution", data: map[string]string{"featureFlags": featureFlagsOff, "image-overrides": "startr: " + overrideImage},
			npKnown: true, keepAll: true, problemHas: []string{`"startr" is not a distribution`, "starter"}},
		{name: "override of the wrong type", data: map[string]string{"featureFlags": featureFlagsOff, "image-overrides": "starter:\n  image: " + overrideImage},
			npKnown: true, keep: []string{"starter"}, problemHas: []string{`distribution "starter" must be an image reference`, "a mapping"}},
		{name: "overrides a list", data: map[string]string{"featureFlags": featureFlagsOff, "image-overrides": "- starter"},
			npKnown: true, keepAll: true, problemHas: []string{"image-overrides must be a mapping", "a list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseOperatorConfig(operatorConfigMap(tc.data), builtinDistributions())
			assert.Equal(t, tc.npKnown, cfg.networkPolicyKnown, "networkPolicyKnown")
			assert.Equal(t, tc.npEnabled, cfg.enableNetworkPolicy, "enableNetworkPolicy")
			assert.Equal(t, !tc.smUnknown, cfg.serviceMonitorKnown, "serviceMonitorKnown")
			assert.Equal(t, !tc.smUnknown && !tc.smOff, cfg.enableServiceMonitor, "enableServiceMonitor")
			assert.Equal(t, tc.keepAll, cfg.keepAllImages, "keepAllImages")
			for _, d := range tc.keep {
				assert.True(t, cfg.keepsImage(d), "keeps the running image of %s", d)
			}
			if len(tc.problemHas) == 0 {
				assert.Empty(t, cfg.problems)
				return
			}
			require.Len(t, cfg.problems, 1, "%q", cfg.problems)
			for _, s := range tc.problemHas {
				assert.Contains(t, cfg.problems[0], s)
			}
		})
	}
}

const sha256Zeros = "0000000000000000000000000000000000000000000000000000000000000000"

func TestOneBadImageReferenceLeavesTheOthersApplied(t *testing.T) {
	f := newFixture(t, newLLSD("app"), newLLSDv1("vllm", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Distribution.Name = "postgres-demo"
	}), operatorConfigMap(map[string]string{
		"image-overrides": "starter: " + overrideImage + "\npostgres-demo: 'Not An Image!'\n",
	}))
	f.converge("app")
	f.converge("vllm")
	assert.Equal(t, overrideImage, f.image("app"))
	assert.Equal(t, builtinDistributions()["postgres-demo"], f.image("vllm"), "nothing ran before: the built-in image")
}

// TestOneBadOverrideKeepsTheRunningImage: an entry that turns invalid (or is replaced by
// one for a misspelt distribution) leaves the Deployments that run its distribution as
// they are; the other entries still apply and new CRs get the built-in image.
func TestOneBadOverrideKeepsTheRunningImage(t *testing.T) {
	vllm := func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = "postgres-demo" }
	f := newFixture(t, newLLSD("app"), newLLSDv1("vllm", vllm), operatorConfigMap(map[string]string{
		"image-overrides": "starter: " + overrideImage + "\npostgres-demo: " + overrideImage + "\n",
	}))
	f.converge("app")
	f.converge("vllm")
	require.Equal(t, overrideImage, f.image("vllm"))

	for _, bad := range []string{
		"postgres-demo: 'Not An Image!'\n",
		"postgres-demo:\n  image: " + overrideImage2 + "\n",
		"postgres-dem: " + overrideImage2 + "\n",
	} {
		f.setOperatorConfig(map[string]string{"image-overrides": "starter: " + overrideImage2 + "\n" + bad})
		f.sync("app")
		assert.Empty(t, childWrites(f.sync("vllm")), "no rollout for the bad entry %q", bad)
		assert.Equal(t, overrideImage, f.image("vllm"))
		assert.Equal(t, overrideImage2, f.image("app"))
		f.converge("app")
		f.converge("vllm")

		// Also after a restart, with nothing in memory from before.
		f.restartController()
		assert.Empty(t, childWrites(f.sync("vllm")))
		assert.Equal(t, overrideImage, f.image("vllm"))
	}

	// A new CR of that distribution gets the built-in image.
	f.createLLSD(newLLSDv1("vllm2", vllm))
	f.converge("vllm2")
	assert.Equal(t, builtinDistributions()["postgres-demo"], f.image("vllm2"))

	// Fixed: the entry applies again.
	f.setOperatorConfig(map[string]string{"image-overrides": "postgres-demo: " + overrideImage2 + "\n"})
	f.converge("vllm")
	assert.Equal(t, overrideImage2, f.image("vllm"))
}

// TestFeatureFlagTyposKeepNetworkPolicies: a featureFlags value with an unknown key or a
// wrong type is not read as "disabled": the NetworkPolicy stays, with a Warning on the
// ConfigMap naming the key.
func TestFeatureFlagTyposKeepNetworkPolicies(t *testing.T) {
	for _, data := range []map[string]string{
		{"featureFlags": "enableNetworkPolicy: {enable: true}"},
		{"featureFlags": "enableNetworkPolicy:\n  enabeld: true\n"},
		{"featureFlags": "enableNetworkPolicy: true"},
		{"featureFlags": "enableNetworkPolicy:\n  enabled: \"yes please\"\n"},
		{"featureFlags": "enableNetworkPolicys:\n  enabled: true\n"},
		{"featureflags": featureFlagsOff},
	} {
		t.Run(fmt.Sprint(data), func(t *testing.T) {
			f := newFixture(t, newLLSD("app"), operatorConfigMap(map[string]string{"featureFlags": featureFlagsOn}))
			f.converge("app")
			require.NotNil(t, f.stored(kindNetworkPolicy, "app-network-policy"))
			h := f.c.operatorConfigHandler(f.ctx)
			f.events()

			f.setOperatorConfig(data)
			cm, err := f.kubeclient.CoreV1().ConfigMaps(testOperatorNamespace).Get(f.ctx, OperatorConfigMapName, metav1.GetOptions{})
			require.NoError(t, err)
			old := operatorConfigMap(nil)
			old.ResourceVersion, cm.ResourceVersion = "1", "2"
			h.OnUpdate(old, cm)
			events := f.events()
			assert.Equal(t, 1, countEvents(events, "Warning InvalidConfiguration"), "events: %v", events)
			assert.True(t, hasEvent(events, "featureFlags") || hasEvent(events, "featureflags"), "the Event names the key: %v", events)

			assert.Empty(t, childWrites(f.sync("app")))
			assert.NotNil(t, f.stored(kindNetworkPolicy, "app-network-policy"))
			f.converge("app")
			assert.NotNil(t, f.stored(kindNetworkPolicy, "app-network-policy"))
		})
	}
}

// TestDeletedOperatorConfigKeepsWhatRuns: without the ConfigMap nothing that runs changes
// (NetworkPolicies, images), new CRs get the built-in defaults, and the deletion is
// reported on the ConfigMap.
func TestDeletedOperatorConfigKeepsWhatRuns(t *testing.T) {
	f := newFixture(t, newLLSD("app"), operatorConfigMap(map[string]string{
		"featureFlags": featureFlagsOn, "image-overrides": "starter: " + overrideImage + "\n",
	}))
	f.converge("app")
	require.NotNil(t, f.stored(kindNetworkPolicy, "app-network-policy"))
	require.Equal(t, overrideImage, f.image("app"))
	h := f.c.operatorConfigHandler(f.ctx)
	f.events()

	cm, err := f.kubeclient.CoreV1().ConfigMaps(testOperatorNamespace).Get(f.ctx, OperatorConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, f.kubeclient.CoreV1().ConfigMaps(testOperatorNamespace).Delete(f.ctx, OperatorConfigMapName, metav1.DeleteOptions{}))
	f.refreshCaches()
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: testOperatorNamespace + "/" + OperatorConfigMapName, Obj: cm})
	events := f.events()
	require.Equal(t, 1, countEvents(events, "Warning OperatorConfigMissing"), "events: %v", events)
	assert.True(t, hasEvent(events, "NetworkPolicies and running server images are kept"), "events: %v", events)

	assert.Empty(t, childWrites(f.sync("app")))
	assert.NotNil(t, f.stored(kindNetworkPolicy, "app-network-policy"))
	assert.Equal(t, overrideImage, f.image("app"))
	f.restartController()
	f.converge("app")
	assert.NotNil(t, f.stored(kindNetworkPolicy, "app-network-policy"))
	assert.Equal(t, overrideImage, f.image("app"))

	f.createLLSD(newLLSDv1("fresh"))
	f.converge("fresh")
	assert.Nil(t, f.stored(kindNetworkPolicy, "fresh-network-policy"))
	assert.Equal(t, testImage, f.image("fresh"))

	// Recreated without featureFlags (kubectl create configmap --from-literal=image-overrides=...):
	// it does not say "disabled", so the NetworkPolicy stays.
	f.setOperatorConfig(map[string]string{"image-overrides": "starter: " + overrideImage + "\n"})
	assert.Empty(t, childWrites(f.sync("app")))
	assert.NotNil(t, f.stored(kindNetworkPolicy, "app-network-policy"))

	// Recreated: it says again what runs.
	f.setOperatorConfig(map[string]string{"featureFlags": featureFlagsOff})
	assert.Equal(t, []string{"delete networkpolicies app-network-policy", "patch deployments app", "patch services app-service"}, childWrites(f.sync("app")))
	assert.Equal(t, testImage, f.image("app"))
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

	oneBad := operatorConfigMap(map[string]string{"featureFlags": featureFlagsOff, "image-overrides": "starter: 'Not An Image!'\n"})
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

// TestKeptImageIsTheControllersChoice: while the ConfigMap does not say which image runs
// (missing, or image-overrides unreadable), the image kept is the one the controller
// last chose, recorded on the Deployment: a hand edit of the pod template is repaired,
// not adopted.
func TestKeptImageIsTheControllersChoice(t *testing.T) {
	for name, cm := range map[string]*corev1.ConfigMap{
		"missing":    nil,
		"unreadable": operatorConfigMap(map[string]string{"image-overrides": invalidYAML}),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, newLLSD("app"), operatorConfigMap(map[string]string{"image-overrides": "starter: " + overrideImage + "\n"}))
			f.converge("app")
			require.Equal(t, overrideImage, f.deployment("app").Annotations[llsd.AnnotationImage])
			if cm == nil {
				require.NoError(t, f.kubeclient.CoreV1().ConfigMaps(testOperatorNamespace).Delete(f.ctx, OperatorConfigMapName, metav1.DeleteOptions{}))
				f.refreshCaches()
			} else {
				f.putConfigMap(cm)
			}
			f.updateDeployment("app", "kubectl-edit", func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].Image = "example.com/hand-edited:1"
			})
			f.converge("app")
			assert.Equal(t, overrideImage, f.image("app"), "the hand edit is repaired to the controller's choice")

			// A hand edit of the annotation itself is not adopted either.
			f.updateDeployment("app", "kubectl-annotate", func(d *appsv1.Deployment) {
				d.Annotations[llsd.AnnotationImage] = "example.com/hand-annotated:1"
			})
			f.converge("app")
			assert.NotEqual(t, "example.com/hand-annotated:1", f.image("app"))
			assert.Equal(t, overrideImage, f.image("app"), "the container image the controller still owns is kept")
		})
	}
}

// TestBuiltinImagesArePinned: the controller's distribution → image map is configgen's
// table, every name pinned (no :latest), for CRs that generate a config and those that
// do not alike.
func TestBuiltinImagesArePinned(t *testing.T) {
	want := map[string]string{
		"starter":            "docker.io/ogxai/distribution-starter:1.3.0",
		"postgres-demo":      "docker.io/ogxai/distribution-postgres-demo:1.3.0",
		"meta-reference-gpu": "", // no published image: reported (TestUnpublishedDistributionIsReportedAndKeepsWhatRuns)
		"remote-vllm":        "",
	}
	published := map[string]string{"starter": want["starter"], "postgres-demo": want["postgres-demo"]}
	assert.Equal(t, want, builtinDistributions())
	for _, d := range configgen.Distributions() {
		assert.Equal(t, d.Image, want[d.Name], d.Name)
		assert.NotContains(t, d.Image, ":latest", d.Name)
		assert.NotContains(t, d.Image, "docker.io/llamastack/", d.Name)
	}
	// image-overrides may name each of them.
	var overrides strings.Builder
	for name := range want {
		overrides.WriteString(name + ": " + overrideImage + "\n")
	}
	cfg := parseOperatorConfig(operatorConfigMap(map[string]string{keyFeatureFlags: featureFlagsOff, keyImageOverrides: overrides.String()}), builtinDistributions())
	assert.Empty(t, cfg.problems)
	assert.Len(t, cfg.imageOverrides, len(want))

	for name, image := range published {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = name }))
			f.converge("app")
			assert.Equal(t, image, f.image("app"))
			assert.Equal(t, published, f.llsd("app").Status.DistributionConfig.AvailableDistributions)
		})
	}
}

// TestEarlierBuiltinImageMovesToThePin: a Deployment on the image an earlier release ran
// by default (:latest) moves to the pinned image in one write, once, unless
// image-overrides names another image or cannot be read. Without an operator ConfigMap
// too: running images are kept then, but not an earlier release's built-in one.
func TestEarlierBuiltinImageMovesToThePin(t *testing.T) {
	// :latest (before names were pinned) and the previous release's pin.
	for _, latest := range []string{"docker.io/llamastack/distribution-starter:latest", "docker.io/llamastack/distribution-starter:0.7.1"} {
		t.Run(latest, func(t *testing.T) { earlierBuiltinImageMovesToThePin(t, latest) })
	}
}

func earlierBuiltinImageMovesToThePin(t *testing.T, latest string) {
	for _, tc := range []struct {
		name      string
		configMap map[string]string // nil: no operator ConfigMap
		want      string
	}{
		{"no override", map[string]string{keyFeatureFlags: featureFlagsOff}, testImage},
		{"empty overrides", map[string]string{keyFeatureFlags: featureFlagsOff, keyImageOverrides: ""}, testImage},
		{"no ConfigMap", nil, testImage},
		{"an override", map[string]string{keyImageOverrides: "starter: " + overrideImage + "\n"}, overrideImage},
		{"the old image as override", map[string]string{keyImageOverrides: "starter: " + latest + "\n"}, latest},
		{"unreadable overrides", map[string]string{keyImageOverrides: invalidYAML}, latest},
		{"a misspelt key", map[string]string{keyFeatureFlags: featureFlagsOff, "imageOverrides": ""}, latest},
	} {
		for _, annotated := range []bool{true, false} {
			name := tc.name
			if !annotated {
				name += ", without the image annotation"
			}
			t.Run(name, func(t *testing.T) {
				// The Deployment as an earlier release made it: the controller chose :latest.
				f := newFixture(t, newLLSD("app"), operatorConfigMap(map[string]string{keyImageOverrides: "starter: " + latest + "\n"}))
				f.converge("app")
				require.Equal(t, latest, f.image("app"))
				if !annotated {
					// Releases before the annotation recorded the image in the pod template alone.
					f.updateDeployment("app", "an-earlier-release", func(d *appsv1.Deployment) { delete(d.Annotations, llsd.AnnotationImage) })
				}
				if tc.configMap == nil {
					require.NoError(t, f.kubeclient.CoreV1().ConfigMaps(testOperatorNamespace).Delete(f.ctx, OperatorConfigMapName, metav1.DeleteOptions{}))
					f.refreshCaches()
				} else {
					f.setOperatorConfig(tc.configMap)
				}
				f.restartController()

				writes := childWrites(f.sync("app"))
				assert.Equal(t, tc.want, f.image("app"))
				d := f.deployment("app")
				if tc.want == latest && annotated {
					assert.Empty(t, writes, "the running image is kept: nothing is written")
				} else {
					want := []string{"patch deployments app"}
					if children.ServerServesMetrics(imageServerVersion(tc.want)) {
						// The move to a server with metrics names its port on the Service.
						want = append(want, "patch services app-service")
					}
					assert.Equal(t, want, writes, "one write of the Deployment")
				}
				assert.Equal(t, tc.want, d.Annotations[llsd.AnnotationImage])
				f.converge("app")
				assert.Empty(t, describe(f.sync("app")), "once")
				f.restartController()
				assert.Empty(t, describe(f.sync("app")), "once, also after a restart")
				assert.Equal(t, tc.want, f.image("app"))
			})
		}
	}
}

func TestKeepsRunningImage(t *testing.T) {
	const latest = "docker.io/llamastack/distribution-starter:latest"
	missing := missingOperatorConfig()
	unreadable := parseOperatorConfig(operatorConfigMap(map[string]string{keyImageOverrides: invalidYAML}), builtinDistributions())
	valid := parseOperatorConfig(operatorConfigMap(map[string]string{keyImageOverrides: ""}), builtinDistributions())
	for _, tc := range []struct {
		name  string
		cfg   operatorConfig
		dist  string
		image string
		keep  bool
	}{
		{"missing, an override image", missing, "starter", overrideImage, true},
		{"missing, the earlier built-in", missing, "starter", latest, false},
		{"missing, another distribution's earlier built-in", missing, "remote-vllm", latest, true},
		{"missing, nothing runs", missing, "starter", "", false},
		{"unreadable, the earlier built-in", unreadable, "starter", latest, true},
		{"unreadable, an override image", unreadable, "starter", overrideImage, true},
		{"valid", valid, "starter", overrideImage, false},
	} {
		assert.Equal(t, tc.keep, tc.cfg.keepsRunningImage(tc.dist, tc.image), tc.name)
	}
}
