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
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
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
	assert.Equal(t, revision.BuiltinDistributions()["starter"], f.image("fresh"))
	assert.Equal(t, testImage, f.image("fresh"))
	assert.Equal(t, overrideImage, f.image("app"))

	// Fixed again: the valid overrides apply.
	f.setOperatorConfig(map[string]string{"image-overrides": "starter: " + overrideImage2 + "\n"})
	f.converge("app")
	f.converge("fresh")
	assert.Equal(t, overrideImage2, f.image("app"))
	assert.Equal(t, overrideImage2, f.image("fresh"))
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
	assert.Equal(t, revision.BuiltinDistributions()["postgres-demo"], f.image("vllm"), "nothing ran before: the built-in image")
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
	assert.Equal(t, revision.BuiltinDistributions()["postgres-demo"], f.image("vllm2"))

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
	assert.Equal(t, want, revision.BuiltinDistributions())
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
	cfg := revision.ParseOperatorConfig(operatorConfigMap(map[string]string{revision.KeyFeatureFlags: featureFlagsOff, revision.KeyImageOverrides: overrides.String()}), revision.BuiltinDistributions())
	assert.Empty(t, cfg.Problems)
	assert.Len(t, cfg.ImageOverrides, len(want))

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
		{"no override", map[string]string{revision.KeyFeatureFlags: featureFlagsOff}, testImage},
		{"empty overrides", map[string]string{revision.KeyFeatureFlags: featureFlagsOff, revision.KeyImageOverrides: ""}, testImage},
		{"no ConfigMap", nil, testImage},
		{"an override", map[string]string{revision.KeyImageOverrides: "starter: " + overrideImage + "\n"}, overrideImage},
		{"the old image as override", map[string]string{revision.KeyImageOverrides: "starter: " + latest + "\n"}, latest},
		{"unreadable overrides", map[string]string{revision.KeyImageOverrides: invalidYAML}, latest},
		{"a misspelt key", map[string]string{revision.KeyFeatureFlags: featureFlagsOff, "imageOverrides": ""}, latest},
	} {
		for _, annotated := range []bool{true, false} {
			name := tc.name
			if !annotated {
				name += ", without the image annotation"
			}
			t.Run(name, func(t *testing.T) {
				// The Deployment as an earlier release made it: the controller chose :latest.
				f := newFixture(t, newLLSD("app"), operatorConfigMap(map[string]string{revision.KeyImageOverrides: "starter: " + latest + "\n"}))
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
					if children.ServerServesMetrics(revision.ImageServerVersion(tc.want)) {
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
