package configgen

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// starterBase is the built-in starter base for server version sv, with edit applied:
// top-level keys replaced (overlay), and shields, when given, set under
// registered_resources.
func starterBase(t *testing.T, sv, edit string, shields []any) []byte {
	t.Helper()
	d, ok := LookupDistribution("starter")
	require.True(t, ok)
	base, ok := d.BaseFor(sv)
	require.True(t, ok, "starter has a base for %s", sv)
	out := overlay(t, string(base), edit)
	if shields == nil {
		return out
	}
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(out, &cfg))
	rr, _ := cfg["registered_resources"].(map[string]any)
	if rr == nil {
		rr = map[string]any{}
		cfg["registered_resources"] = rr
	}
	rr["shields"] = shields
	out, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	return out
}

func generateFromBase(sv string, base []byte) (*Output, error) {
	return Generate(Input{Name: "demo", ServerVersion: sv, Base: base, BaseField: "spec.baseConfig"})
}

// A base holding keys the server ignores at its version generates: they are dropped,
// not written, and each is told once in Output.Ignored.
func TestBaseIgnoredKeysDropped(t *testing.T) {
	base := starterBase(t, "1.3.0", "safety: {default_shield_id: llama-guard}\n",
		[]any{map[string]any{"shield_id": "llama-guard", "provider_id": "llama-guard"}})
	out, err := generateFromBase("1.3.0", base)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"spec.baseConfig: registered_resources.shields: server 1.3.0 ignores it (" + safetyGone + ")",
		"spec.baseConfig: safety: server 1.3.0 ignores it (" + safetyGone + ")",
	}, out.Ignored)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(out.Config, &cfg))
	assert.NotContains(t, cfg, "safety")
	assert.Nil(t, lookup(cfg, []string{"registered_resources", "shields"}))
	assert.NoError(t, Validate(out.Config, mustVersion(t, "1.3.0")))
}

// An empty ignored key is dropped without a word: it says nothing the server would do.
func TestBaseIgnoredEmptyKeySilent(t *testing.T) {
	out, err := generateFromBase("1.3.0", starterBase(t, "1.3.0", "safety: {}\n", []any{}))
	require.NoError(t, err)
	assert.Empty(t, out.Ignored)
	assert.NotContains(t, string(out.Config), "safety")
}

// A key no version reads stays refused.
func TestBaseUnknownKeyStillRefused(t *testing.T) {
	base := starterBase(t, "1.3.0", "safety: {default_shield_id: x}\nsafety_net: {on: yes}\n", nil)
	_, err := generateFromBase("1.3.0", base)
	var e *Error
	require.True(t, errors.As(err, &e), "error %v", err)
	assert.Equal(t, "spec.baseConfig", e.Field)
	assert.Contains(t, e.Message, `unknown field "safety_net"`)
}

// At 0.7 the server reads safety: the base's is kept, and nothing is told.
func TestBaseSafetyReadBefore10(t *testing.T) {
	base := starterBase(t, "0.7.1", "safety: {default_shield_id: llama-guard}\n", nil)
	out, err := generateFromBase("0.7.1", base)
	require.NoError(t, err)
	assert.Empty(t, out.Ignored)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(out.Config, &cfg))
	assert.Equal(t, "llama-guard", lookup(cfg, []string{"safety", "default_shield_id"}))
	assert.True(t, strings.Contains(string(out.Config), "shields:"), "the base's shields are kept")
}
