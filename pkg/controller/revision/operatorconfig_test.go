package revision

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The operator ConfigMap's content, as the controller's tests write it.
const (
	overrideImage   = "quay.io/test/llama-stack:override-test"
	invalidYAML     = "starter: [unclosed\n  - : :"
	sha256Zeros     = "0000000000000000000000000000000000000000000000000000000000000000"
	featureFlagsOn  = "enableNetworkPolicy:\n  enabled: true\n"
	featureFlagsOff = "enableNetworkPolicy:\n  enabled: false\n"
)

func operatorConfigMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "llama-ops", Name: OperatorConfigMapName},
		Data:       data,
	}
}

func TestParseOperatorConfigSkipsOneBadImageReference(t *testing.T) {
	cfg := ParseOperatorConfig(operatorConfigMap(map[string]string{
		"featureFlags": featureFlagsOff,
		"image-overrides": "starter: " + overrideImage + "\n" +
			"remote-vllm: 'Not An Image!'\n" +
			"postgres-demo: registry.example.com:5000/team/server@sha256:" + sha256Zeros + "\n",
	}), BuiltinDistributions())
	assert.False(t, cfg.KeepAllImages)
	assert.Equal(t, map[string]string{
		"starter":       overrideImage,
		"postgres-demo": "registry.example.com:5000/team/server@sha256:" + sha256Zeros,
	}, cfg.ImageOverrides)
	assert.Equal(t, map[string]bool{"remote-vllm": true}, cfg.KeepImages)
	assert.True(t, cfg.keepsImage("remote-vllm"))
	assert.False(t, cfg.keepsImage("starter"))
	assert.False(t, cfg.keepsImage("ollama"), "a distribution without an entry gets its built-in image")
	require.Len(t, cfg.Problems, 1)
	assert.Contains(t, cfg.Problems[0], "remote-vllm")
	assert.Contains(t, cfg.Problems[0], "Not An Image!")

	invalid := ParseOperatorConfig(operatorConfigMap(map[string]string{"featureFlags": featureFlagsOff, "image-overrides": invalidYAML}), BuiltinDistributions())
	assert.True(t, invalid.KeepAllImages)
	assert.Empty(t, invalid.ImageOverrides)
	assert.Len(t, invalid.Problems, 1)

	valid := ParseOperatorConfig(operatorConfigMap(map[string]string{"featureFlags": featureFlagsOff}), BuiltinDistributions())
	assert.True(t, valid.NetworkPolicyKnown)
	assert.False(t, valid.EnableNetworkPolicy)
	assert.False(t, valid.keepsImage("starter"))
	assert.Empty(t, valid.Problems)

	none := ParseOperatorConfig(nil, BuiltinDistributions())
	assert.True(t, none.Missing)
	assert.False(t, none.NetworkPolicyKnown, "without the ConfigMap NetworkPolicies are left as they are")
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
		// A value of enabled that is not a boolean makes that flag alone not said.
		{name: "enabled a string", data: map[string]string{"featureFlags": "enableNetworkPolicy:\n  enabled: \"true\"\n"},
			problemHas: []string{"enableNetworkPolicy.enabled must be true or false", "a string"}},
		{name: "enabled empty", data: map[string]string{"featureFlags": "enableNetworkPolicy:\n  enabled:\n"},
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
		{name: "service monitor enabled a string", npKnown: true, npEnabled: true, smUnknown: true, data: map[string]string{"featureFlags": featureFlagsOn + "enableServiceMonitor: {enabled: \"no\"}\n"},
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
			cfg := ParseOperatorConfig(operatorConfigMap(tc.data), BuiltinDistributions())
			assert.Equal(t, tc.npKnown, cfg.NetworkPolicyKnown, "networkPolicyKnown")
			assert.Equal(t, tc.npEnabled, cfg.EnableNetworkPolicy, "enableNetworkPolicy")
			assert.Equal(t, !tc.smUnknown, cfg.ServiceMonitorKnown, "serviceMonitorKnown")
			assert.Equal(t, !tc.smUnknown && !tc.smOff, cfg.EnableServiceMonitor, "enableServiceMonitor")
			assert.Equal(t, tc.keepAll, cfg.KeepAllImages, "keepAllImages")
			for _, d := range tc.keep {
				assert.True(t, cfg.keepsImage(d), "keeps the running image of %s", d)
			}
			if len(tc.problemHas) == 0 {
				assert.Empty(t, cfg.Problems)
				return
			}
			require.Len(t, cfg.Problems, 1, "%q", cfg.Problems)
			for _, s := range tc.problemHas {
				assert.Contains(t, cfg.Problems[0], s)
			}
		})
	}
}

func TestKeepsRunningImage(t *testing.T) {
	const latest = "docker.io/llamastack/distribution-starter:latest"
	missing := MissingOperatorConfig()
	unreadable := ParseOperatorConfig(operatorConfigMap(map[string]string{KeyImageOverrides: invalidYAML}), BuiltinDistributions())
	valid := ParseOperatorConfig(operatorConfigMap(map[string]string{KeyImageOverrides: ""}), BuiltinDistributions())
	for _, tc := range []struct {
		name  string
		cfg   OperatorConfig
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

// TestFeatureFlagBooleans: enabled takes YAML 1.2's booleans only (true, false, and
// their True/TRUE, False/FALSE spellings). YAML 1.1's yes/no/on/off/y/n, a quoted
// "false" and a number are invalid input: that flag is not said (its children are
// neither made nor deleted), and the problem names the key, the value and the valid
// values; the other flag is still read.
func TestFeatureFlagBooleans(t *testing.T) {
	for _, tc := range []struct {
		value    string
		known    bool
		enabled  bool
		valueHas string
	}{
		{value: "true", known: true, enabled: true},
		{value: "True", known: true, enabled: true},
		{value: "TRUE", known: true, enabled: true},
		{value: "false", known: true},
		{value: "False", known: true},
		{value: "FALSE", known: true},
		{value: "no", valueHas: `"no" (a string)`},
		{value: "n", valueHas: `"n" (a string)`},
		{value: "off", valueHas: `"off" (a string)`},
		{value: "yes", valueHas: `"yes" (a string)`},
		{value: "y", valueHas: `"y" (a string)`},
		{value: "on", valueHas: `"on" (a string)`},
		{value: "ON", valueHas: `"ON" (a string)`},
		{value: "tRue", valueHas: `"tRue" (a string)`},
		{value: `"false"`, valueHas: `"false" (a string)`},
		{value: `'true'`, valueHas: `"true" (a string)`},
		{value: "0", valueHas: "0 (a number)"},
		{value: "1", valueHas: "1 (a number)"},
		{value: "~", valueHas: "empty"},
	} {
		t.Run("serviceMonitor "+tc.value, func(t *testing.T) {
			cfg := ParseOperatorConfig(operatorConfigMap(map[string]string{
				KeyFeatureFlags: featureFlagsOn + "enableServiceMonitor: {enabled: " + tc.value + "}\n"}), BuiltinDistributions())
			assert.Equal(t, tc.known, cfg.ServiceMonitorKnown, "serviceMonitorKnown")
			assert.Equal(t, tc.enabled, cfg.EnableServiceMonitor, "enableServiceMonitor")
			assert.True(t, cfg.NetworkPolicyKnown && cfg.EnableNetworkPolicy, "the other flag is read")
			if tc.known {
				assert.Empty(t, cfg.Problems)
				return
			}
			require.Len(t, cfg.Problems, 1, "%q", cfg.Problems)
			for _, s := range []string{"featureFlags", "enableServiceMonitor.enabled", tc.valueHas, "valid values: true, false",
				"ServiceMonitors are left as they are"} {
				assert.Contains(t, cfg.Problems[0], s)
			}
		})
		t.Run("networkPolicy "+tc.value, func(t *testing.T) {
			cfg := ParseOperatorConfig(operatorConfigMap(map[string]string{
				KeyFeatureFlags: "enableNetworkPolicy:\n  enabled: " + tc.value + "\nenableServiceMonitor: {enabled: false}\n"}), BuiltinDistributions())
			assert.Equal(t, tc.known, cfg.NetworkPolicyKnown, "networkPolicyKnown")
			assert.Equal(t, tc.enabled, cfg.EnableNetworkPolicy, "enableNetworkPolicy")
			assert.True(t, cfg.ServiceMonitorKnown && !cfg.EnableServiceMonitor, "the other flag is read")
			if tc.known {
				assert.Empty(t, cfg.Problems)
				return
			}
			require.Len(t, cfg.Problems, 1, "%q", cfg.Problems)
			for _, s := range []string{"featureFlags", "enableNetworkPolicy.enabled", tc.valueHas, "valid values: true, false",
				"NetworkPolicies are left as they are"} {
				assert.Contains(t, cfg.Problems[0], s)
			}
		})
	}
}
