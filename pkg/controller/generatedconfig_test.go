package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// newGenLLSD is a v1alpha2 CR of distribution starter with one vLLM provider whose API
// key comes from a Secret: one that asks for a generated config.
func newGenLLSD(name string, mods ...func(*v1alpha2.LlamaStackDistribution)) *v1alpha2.LlamaStackDistribution {
	return newLLSD(name, append([]func(*v1alpha2.LlamaStackDistribution){func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Providers = &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{
			Provider: "vllm", Endpoint: "http://vllm:8000/v1",
			APIKey: &v1alpha2.SecretValue{SecretKeyRef: v1alpha2.SecretKeyRef{Name: "vllm-creds", Key: "api-key"}},
		}}}
	}}, mods...)...)
}

// expectedGeneration is what configgen makes of l for the starter distribution.
func expectedGeneration(t *testing.T, l *v1alpha2.LlamaStackDistribution) *configgen.Output {
	t.Helper()
	d, ok := configgen.LookupDistribution("starter")
	require.True(t, ok)
	base, err := d.Base()
	require.NoError(t, err)
	out, err := configgen.Generate(configgen.Input{Name: l.Name, Spec: l.Spec, ServerVersion: d.ServerVersion, Base: base, BaseField: "spec.distribution.name"})
	require.NoError(t, err)
	return out
}

func mountedConfig(d *appsv1.Deployment) string {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == llsd.VolumeUserConfig && v.ConfigMap != nil {
			return v.ConfigMap.Name
		}
	}
	return ""
}

func TestGeneratedConfigIsCreatedAndMounted(t *testing.T) {
	l := newGenLLSD("app")
	want := expectedGeneration(t, l)
	name := "app-config-" + want.Hash
	f := newFixture(t, l)

	actions := f.sync("app")
	assert.Equal(t, []string{"patch configmaps " + name}, writesTo(actions, "configmaps", name), "the ConfigMap is applied once")
	assert.Equal(t, []string{"patch deployments app"}, writesTo(actions, "deployments", "app"))

	cm, err := f.kubeclient.CoreV1().ConfigMaps(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(want.Config), cm.Data["config.yaml"])
	assert.True(t, ptr.Deref(cm.Immutable, false), "immutable")
	assert.True(t, llsd.IsControlledBy(cm, l), "owned by the CR")
	assert.Equal(t, generatedConfigComponent, cm.Labels[llsd.LabelComponent])
	assert.Equal(t, ManagedByValue, cm.Labels[llsd.LabelManagedBy])
	var parsed map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &parsed))
	assert.Contains(t, cm.Data["config.yaml"], "${env.LLSD_VLLM_API_KEY}", "the key is a variable in the file")
	assert.NotContains(t, cm.Data["config.yaml"], "vllm-creds", "the Secret is not named in the file")

	d := f.deployment("app")
	assert.Equal(t, name, mountedConfig(d), "the generated ConfigMap is mounted where a user config is")
	ctr := serverContainerOf(t, d)
	assert.Equal(t, "docker.io/ogxai/distribution-starter:1.3.0", ctr.Image, "the pinned image of the distribution")
	// An OGX server: its image's entrypoint starts `ogx stack run $RUN_CONFIG_PATH`, and
	// the server keeps its data on the storage volume, where 0.7 kept starter's.
	assert.Empty(t, ctr.Command, "the image's own entrypoint")
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, revision.UserConfigPath, env[children.EnvRunConfigPath])
	assert.Equal(t, revision.UserConfigPath, env[children.EnvOGXConfig])
	assert.Equal(t, "8321", env[children.EnvOGXPort])
	assert.Equal(t, llsd.DefaultMountPath, env[children.EnvOGXConfigDir])
	assert.Equal(t, llsd.DefaultMountPath+"/distributions/starter", env[children.EnvSQLiteDir])
	assert.NotContains(t, env, revision.EnvLlamaStackConfig, "an OGX server reads no LLAMA_STACK_* variable")
	assert.Contains(t, cm.Data["config.yaml"], "insecure: true", "told explicitly that it runs without TLS")
	assert.Contains(t, ctr.VolumeMounts, corev1.VolumeMount{Name: llsd.VolumeUserConfig, MountPath: llsd.UserConfigMountPath, ReadOnly: true})
	require.Len(t, want.Env, 1)
	i := slices.IndexFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.Name == want.Env[0].Name })
	require.GreaterOrEqual(t, i, 0, "the API key variable is set")
	assert.Equal(t, "LLSD_VLLM_API_KEY", ctr.Env[i].Name)
	assert.Empty(t, ctr.Env[i].Value)
	assert.Equal(t, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "vllm-creds"}, Key: "api-key"}, ctr.Env[i].ValueFrom.SecretKeyRef)

	f.converge("app")
	st := f.llsd("app").Status
	cond := meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionConfigGenerated)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Equal(t, v1alpha2.ReasonConfigGenerated, cond.Reason)
	assert.Equal(t, &v1alpha2.ResolvedDistributionStatus{
		Image: "docker.io/ogxai/distribution-starter:1.3.0", ServerVersion: "1.3.0",
		ConfigSource: "distribution:starter", ConfigHash: want.Hash,
	}, st.ResolvedDistribution)
}

func TestGeneratedConfigSameFileWritesNothing(t *testing.T) {
	f := newFixture(t, newGenLLSD("app"))
	f.converge("app")
	before := f.configMapNames()
	dep := f.deployment("app").ResourceVersion

	// An explicit id equal to the default, and a workload-neutral edit: the same file.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Providers.Inference[0].ID = "vllm" })
	actions := f.sync("app")
	for _, a := range describe(mutating(actions)) {
		assert.True(t, strings.HasSuffix(a, "llamastackdistributions/status app"), "only the status (observedGeneration) is written, got %q", a)
	}
	assert.Equal(t, before, f.configMapNames())
	assert.Equal(t, dep, f.deployment("app").ResourceVersion)
}

func TestGeneratedConfigFailureKeepsWhatRuns(t *testing.T) {
	f := newFixture(t, newGenLLSD("app"))
	f.converge("app")
	before := f.deployment("app").DeepCopy()
	cms := f.configMapNames()
	f.events()

	// ollama has no API key field: configgen refuses it; CEL does not.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Providers.Inference[0].Provider = "ollama" })
	actions := f.sync("app")
	assert.Equal(t, []string{"update llamastackdistributions/status app"}, describe(mutating(actions)), "nothing but the status is written")
	after := f.deployment("app")
	assert.Equal(t, before.Spec, after.Spec, "image, mount and env stay")
	assert.Equal(t, cms, f.configMapNames(), "the previous ConfigMap stays")

	l := f.llsd("app")
	cond := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionConfigGenerated)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, v1alpha2.ReasonConfigInvalid, cond.Reason)
	assert.Contains(t, cond.Message, "spec.providers.inference[0]", "the message names the field")
	assert.Equal(t, "docker.io/ogxai/distribution-starter:1.3.0", l.Status.ResolvedDistribution.Image, "resolvedDistribution still describes what runs")
	events := f.events()
	assert.Len(t, events, 1, "one Warning Event: %v", events)
	assert.True(t, hasEvent(events, "Warning ConfigInvalid"), "%v", events)

	// No retry spin, no second Event: a further sync writes nothing.
	assert.Empty(t, mutating(f.sync("app")))
	assert.Empty(t, f.events())
}

func TestGeneratedConfigOldConfigMapDeletedOnlyWhenUnused(t *testing.T) {
	f := newFixture(t, newGenLLSD("app"))
	f.converge("app")
	first := f.llsd("app").Status.ResolvedDistribution.ConfigHash
	oldName := "app-config-" + first
	// The ReplicaSet of the first revision, as the Deployment controller makes it.
	d := f.deployment("app")
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "app-1", Namespace: testNamespace, UID: "rs-1",
			Labels:          llsd.SelectorLabels(f.llsd("app")),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Template: *d.Spec.Template.DeepCopy()},
	}
	// The fake API gives the Deployment no UID; the ReplicaSet points at it by UID.
	f.updateDeployment("app", "kube-controller-manager", func(d *appsv1.Deployment) { d.UID = types.UID("dep-uid") })
	rs.OwnerReferences[0].UID = "dep-uid"
	_, err := f.kubeclient.AppsV1().ReplicaSets(testNamespace).Create(f.ctx, rs, metav1.CreateOptions{})
	require.NoError(t, err)
	f.refreshCaches()

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Providers.Inference[0].Endpoint = "http://vllm-2:8000/v1"
	})
	f.sync("app")
	second := f.llsd("app").Status.ResolvedDistribution.ConfigHash
	require.NotEqual(t, first, second)
	newName := "app-config-" + second
	assert.Equal(t, newName, mountedConfig(f.deployment("app")), "image and config change in the one Deployment write")
	assert.Contains(t, f.configMapNames(), oldName, "kept while the rollout runs")

	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	assert.Contains(t, f.configMapNames(), oldName, "kept while a ReplicaSet of the Deployment mounts it (rollout undo)")

	// A ReplicaSet of another Deployment does not keep it; once the history is pruned it goes.
	require.NoError(t, f.kubeclient.AppsV1().ReplicaSets(testNamespace).Delete(f.ctx, "app-1", metav1.DeleteOptions{}))
	f.refreshCaches()
	actions := f.sync("app")
	assert.Equal(t, []string{"delete configmaps " + oldName}, writesTo(actions, "configmaps", oldName))
	assert.NotContains(t, f.configMapNames(), oldName)
	assert.Contains(t, f.configMapNames(), newName, "the mounted one stays")
}

func TestGeneratedConfigForeignConfigMapIsReported(t *testing.T) {
	l := newGenLLSD("app")
	name := "app-config-" + expectedGeneration(t, l).Hash
	foreign := configMap(testNamespace, name, map[string]string{"config.yaml": "someone else's"}, nil)
	f := newFixture(t, l, foreign)

	actions := f.sync("app")
	assert.Empty(t, writesTo(actions, "configmaps", name), "someone else's ConfigMap is never written")
	assert.Nil(t, f.stored(kindDeployment, "app"), "no Deployment mounts it")
	got, err := f.kubeclient.CoreV1().ConfigMaps(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "someone else's", got.Data["config.yaml"])

	st := f.llsd("app").Status
	ready := meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionDeploymentReady)
	require.NotNil(t, ready)
	assert.Equal(t, v1alpha2.ReasonResourceNotOwned, ready.Reason)
	assert.Contains(t, ready.Message, fmt.Sprintf("ConfigMap %s/%s", testNamespace, name))
}

func TestGeneratedConfigImageOverrideAndDirectImage(t *testing.T) {
	// An override tagged with a version wins, and its version shapes the config; the
	// controller has starter bases for 1.3.0 and 0.7.1, so another version needs
	// spec.baseConfig.
	f := newFixture(t, newGenLLSD("app"))
	f.setOperatorConfig(map[string]string{revision.KeyImageOverrides: "starter: quay.io/me/starter:0.6.0\n"})
	f.converge("app")
	cond := meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionConfigGenerated)
	require.NotNil(t, cond)
	assert.Equal(t, v1alpha2.ReasonBaseConfigRequired, cond.Reason)
	assert.Contains(t, cond.Message, "spec.baseConfig")
	assert.Contains(t, cond.Message, "it has them for 1.3.0, 0.7.1")

	f.setOperatorConfig(map[string]string{revision.KeyImageOverrides: "starter: quay.io/me/starter:latest\n"})
	f.converge("app")
	cond = meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionConfigGenerated)
	assert.Equal(t, v1alpha2.ReasonBaseConfigRequired, cond.Reason)
	assert.Contains(t, cond.Message, "quay.io/me/starter:latest")

	f.setOperatorConfig(map[string]string{revision.KeyImageOverrides: "starter: quay.io/me/starter:0.7.1\n"})
	f.converge("app")
	st := f.llsd("app").Status
	assert.Equal(t, "quay.io/me/starter:0.7.1", st.ResolvedDistribution.Image)
	assert.Equal(t, "quay.io/me/starter:0.7.1", serverContainerOf(t, f.deployment("app")).Image)
	assert.Equal(t, "distribution:starter@0.7.1", st.ResolvedDistribution.ConfigSource, "the base the controller has for 0.7.1")
	assert.Equal(t, []string{"/bin/sh", "-c", children.StartupScript}, serverContainerOf(t, f.deployment("app")).Command, "a 0.7.1 server starts the llama-stack way")

	// A direct image: the base comes from spec.baseConfig, the version from its tag.
	d, _ := configgen.LookupDistribution("starter")
	base, ok := d.BaseFor("0.7.1")
	require.True(t, ok)
	g := newFixture(t, configMap(testNamespace, "base", map[string]string{"run.yaml": string(base)}, nil),
		newGenLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
			l.Spec.Distribution = v1alpha2.DistributionSpec{Image: "registry.example.com/stack:v0.7.1"}
			l.Spec.BaseConfig = &v1alpha2.BaseConfigSpec{ConfigMapName: "base", Key: "run.yaml"}
		}))
	g.converge("app")
	st = g.llsd("app").Status
	require.NotNil(t, st.ResolvedDistribution)
	assert.Equal(t, "0.7.1", st.ResolvedDistribution.ServerVersion)
	assert.Equal(t, "baseConfig:base/run.yaml", st.ResolvedDistribution.ConfigSource)
	// A sync of the unchanged CR reads nothing live: the base is remembered by hash.
	assert.Empty(t, g.sync("app"))
}

func TestGeneratedConfigMapNameFitsAndIsRecognised(t *testing.T) {
	l := newGenLLSD(strings.Repeat("a", 48))
	name := llsd.GeneratedConfigMapName(l, strings.Repeat("f", 64))
	assert.LessOrEqual(t, len(name), 253)
	assert.True(t, llsd.IsGeneratedConfigMapName(l, name))
	assert.False(t, llsd.IsGeneratedConfigMapName(l, l.Name+"-config-abc"), "not a whole hash")
	copyName := llsd.UserConfigCopyName(l, strings.Repeat("f", 64))
	assert.LessOrEqual(t, len(copyName), 253)
	assert.False(t, llsd.IsGeneratedConfigMapName(l, copyName))
	assert.True(t, llsd.IsUserConfigCopyName(l, copyName))
	assert.False(t, llsd.IsUserConfigCopyName(l, name))
	assert.False(t, llsd.IsUserConfigCopyName(l, llsd.LegacyUserConfigCopyName(l)), "the copy of earlier releases")
}

// A CR that ran the built-in image starts generating: it ran the pinned image already
// (the same one a generating CR runs), so only the config is added, and the image stays.
func TestGeneratedConfigExistingCRKeepsThePinnedImage(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	assert.Equal(t, testImage, serverContainerOf(t, f.deployment("app")).Image)
	_, hasCond := findGenerated(f.llsd("app"))
	assert.False(t, hasCond, "a CR that does not generate has no ConfigGenerated condition")

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Providers = newGenLLSD("app").Spec.Providers })
	f.converge("app")
	d := f.deployment("app")
	assert.Equal(t, testImage, serverContainerOf(t, d).Image)
	assert.True(t, llsd.IsGeneratedConfigMapName(f.llsd("app"), mountedConfig(d)))

	// And back: the generated ConfigMap goes once unused, the status forgets it.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Providers = nil })
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	assert.Empty(t, mountedConfig(f.deployment("app")))
	for _, n := range f.configMapNames() {
		assert.False(t, llsd.IsGeneratedConfigMapName(f.llsd("app"), n), "%s is deleted", n)
	}
	_, hasCond = findGenerated(f.llsd("app"))
	assert.False(t, hasCond)
	assert.Nil(t, f.llsd("app").Status.ResolvedDistribution)
}

func findGenerated(l *v1alpha2.LlamaStackDistribution) (*metav1.Condition, bool) {
	c := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionConfigGenerated)
	return c, c != nil
}

// Rotating a Secret (README): kubectl rollout restart's pod-template annotation, set by
// another field manager, is neither removed nor a reason to write; naming another
// Secret key rolls the Deployment with the same generated file, and keeps the annotation.
func TestGeneratedConfigSecretRotation(t *testing.T) {
	f := newFixture(t, newGenLLSD("app"))
	f.converge("app")
	file := mountedConfig(f.deployment("app"))

	// What kubectl rollout restart sends: a strategic merge patch of the template.
	const restartedAt = "kubectl.kubernetes.io/restartedAt"
	patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"` + restartedAt + `":"2026-01-01T00:00:00Z"}}}}}`)
	_, err := f.kubeclient.AppsV1().Deployments(testNamespace).Patch(f.ctx, "app", types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-rollout"})
	require.NoError(t, err)
	f.refreshCaches()
	assert.Empty(t, writesTo(f.sync("app"), "deployments", "app"), "the restart is not undone")
	assert.Equal(t, "2026-01-01T00:00:00Z", f.deployment("app").Spec.Template.Annotations[restartedAt])

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Providers.Inference[0].APIKey.SecretKeyRef = v1alpha2.SecretKeyRef{Name: "vllm-creds-2", Key: "token"}
	})
	assert.Equal(t, []string{"patch deployments app"}, writesTo(f.sync("app"), "deployments", "app"), "another Secret key rolls the Deployment")
	d := f.deployment("app")
	assert.Equal(t, file, mountedConfig(d), "the file names the variable, not the Secret: it is the same")
	ctr := serverContainerOf(t, d)
	i := slices.IndexFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.Name == "LLSD_VLLM_API_KEY" })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "vllm-creds-2"}, Key: "token"}, ctr.Env[i].ValueFrom.SecretKeyRef)
	assert.Equal(t, "2026-01-01T00:00:00Z", d.Spec.Template.Annotations[restartedAt], "kubectl's annotation survives the controller's apply")
}

// A provider setting that looks like a credential is written as given, and told once in
// a Warning Event, not at every sync.
func TestSecretLikeSettingIsWarnedOnce(t *testing.T) {
	l := newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Providers = &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{
			Provider: "vllm", Endpoint: "http://vllm:8000/v1",
			Settings: &runtime.RawExtension{Raw: []byte(`{"api_token":"sk-123"}`)},
		}}}
	})
	f := newFixture(t, l)
	f.converge("app")
	events := f.events()
	assert.Equal(t, 1, countEvents(events, "Warning "+reasonSecretInSettings), "events: %v", events)
	assert.True(t, hasEvent(events, "settings.api_token looks like a credential"))
	f.sync("app")
	assert.Zero(t, countEvents(f.events(), "Warning "+reasonSecretInSettings))
}

// ConfigGenerated never names a ConfigMap the CR does not own: with someone else's
// object under the generated name nothing is applied, and the condition says so
// without naming it.
func TestConfigGeneratedDoesNotNameAForeignConfigMap(t *testing.T) {
	l := newGenLLSD("app")
	name := "app-config-" + expectedGeneration(t, l).Hash
	f := newFixture(t, l, configMap(testNamespace, name, map[string]string{"config.yaml": "theirs"}, nil))
	f.converge("app")
	got := f.llsd("app")
	c := cond(t, got, v1alpha2.ConditionConfigGenerated)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.NotContains(t, c.Message, name)
	assert.Contains(t, c.Message, "not rolled out while the CR has a problem ("+v1alpha2.ReasonResourceNotOwned+")")
	assert.Nil(t, f.stored(kindDeployment, "app"))
}

// A generation that did not finish (its inputs could not be read: retried) is not
// reported: ConfigGenerated keeps what it said, rather than "Generated" with nothing.
func TestUnfinishedGenerationIsNotReported(t *testing.T) {
	l := newGenLLSD("app")
	assert.Nil(t, generationForStatus(nil, l))
	assert.Nil(t, generationForStatus(&revision.Generation{}, l), "neither a config nor a problem")
	problem := &fault.Problem{Reason: v1alpha2.ReasonConfigInvalid, Message: "bad"}
	assert.Equal(t, &status.Generation{Problem: problem}, generationForStatus(&revision.Generation{Problem: problem}, l))
}

// disabled written for 0.7 (safety, eval) on the 1.3 pin: the APIs are absent there,
// which is what the entries ask. The CR rolls out, its generated config without them,
// with one Warning that says so, told once.
func TestDisabledAPIsTheVersionLacksRollOutWithOneWarning(t *testing.T) {
	l := newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Disabled = []v1alpha2.APIName{v1alpha2.APISafety, v1alpha2.APIEval}
	})
	want := expectedGeneration(t, l)
	f := newFixture(t, l)
	f.converge("app")
	d := f.deployment("app")
	require.NotNil(t, d, "rolled out")
	assert.Equal(t, "app-config-"+want.Hash, mountedConfig(d))
	var parsed struct {
		APIs      []string       `json:"apis"`
		Providers map[string]any `json:"providers"`
	}
	require.NoError(t, yaml.Unmarshal(want.Config, &parsed))
	for _, api := range []string{"safety", "eval"} {
		assert.NotContains(t, parsed.APIs, api)
		assert.NotContains(t, parsed.Providers, api)
	}
	cond := meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionConfigGenerated)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	events := f.events()
	assert.Equal(t, 1, countEvents(events, "Warning "+revision.ReasonConfigKeyIgnored), "events: %v", events)
	for _, want := range []string{
		"spec.disabled[0]: server 1.3.0 has no safety API (removed in 1.0", "spec.disabled[1]: server 1.3.0 has no eval API (removed in 0.8",
		"nothing to disable",
	} {
		assert.True(t, hasEvent(events, want), "no event with %q: %v", want, events)
	}
	f.sync("app")
	assert.Zero(t, countEvents(f.events(), "Warning "+revision.ReasonConfigKeyIgnored), "told once")
}

// A base written for 0.x (top-level safety, registered_resources.shields) on the 1.3
// pin: the server ignores those keys, so the CR rolls out, its generated config
// without them, with one Warning that names them, told once.
func TestBaseConfigKeysTheVersionIgnoresRollOutWithOneWarning(t *testing.T) {
	d, _ := configgen.LookupDistribution("starter")
	base, ok := d.BaseFor("1.3.0")
	require.True(t, ok)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(base, &cfg))
	cfg["safety"] = map[string]any{"default_shield_id": "llama-guard"}
	cfg["registered_resources"].(map[string]any)["shields"] = []any{map[string]any{"shield_id": "llama-guard"}}
	old, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	f := newFixture(t, configMap(testNamespace, "base", map[string]string{"run.yaml": string(old)}, nil),
		newGenLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
			l.Spec.Distribution = v1alpha2.DistributionSpec{Image: testImage}
			l.Spec.BaseConfig = &v1alpha2.BaseConfigSpec{ConfigMapName: "base", Key: "run.yaml"}
		}))
	f.converge("app")
	dep := f.deployment("app")
	require.NotNil(t, dep, "rolled out")
	cond := meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionConfigGenerated)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status, cond.Message)
	cm := f.storedConfigMap(mountedConfig(dep))
	require.NotNil(t, cm)
	assert.NotContains(t, cm.Data["config.yaml"], "safety")
	events := f.events()
	assert.Equal(t, 1, countEvents(events, "Warning "+revision.ReasonConfigKeyIgnored), "events: %v", events)
	for _, want := range []string{
		"spec.baseConfig: safety: server 1.3.0 ignores it (removed in 1.0",
		"spec.baseConfig: registered_resources.shields: server 1.3.0 ignores it",
	} {
		assert.True(t, hasEvent(events, want), "no event with %q: %v", want, events)
	}
	f.sync("app")
	assert.Zero(t, countEvents(f.events(), "Warning "+revision.ReasonConfigKeyIgnored), "told once")
}
