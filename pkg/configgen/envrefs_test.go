package configgen

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// unsetRef follows the server's replace_env_vars: what it expands with a
// variable unset, and what it skips.
func TestUnsetRef(t *testing.T) {
	fromSecret := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}
	cases := []struct {
		name, version, cfg string
		env                []corev1.EnvVar
		secret             string // a Secret-sourced variable of the config
		at, missing        string
	}{
		{name: "unset", version: "0.7.1", cfg: `{a: {b: "${env.X}"}}`, at: "a.b", missing: "X"},
		{name: "inside a string", version: "0.7.1", cfg: `{a: ["http://${env.X}/v1"]}`, at: "a[0]", missing: "X"},
		{name: "set", version: "0.7.1", cfg: `{a: "${env.X}"}`, env: []corev1.EnvVar{{Name: "X", Value: "v"}}},
		{name: "from a Secret", version: "0.7.1", cfg: `{a: "${env.X}"}`, env: []corev1.EnvVar{{Name: "X", ValueFrom: fromSecret}}},
		{name: "empty is unset", version: "0.7.1", cfg: `{a: "${env.X}"}`, env: []corev1.EnvVar{{Name: "X"}}, at: "a", missing: "X"},
		{name: "the last entry wins", version: "0.7.1", cfg: `{a: "${env.X}"}`, env: []corev1.EnvVar{{Name: "X", Value: "v"}, {Name: "X"}}, at: "a", missing: "X"},
		{name: "the config's Secret variable", version: "0.7.1", cfg: `{a: "${env.LLSD_A_KEY}"}`, secret: "LLSD_A_KEY"},
		{name: "the user's empty value replaces it", version: "0.7.1", cfg: `{a: "${env.LLSD_A_KEY}"}`, secret: "LLSD_A_KEY",
			env: []corev1.EnvVar{{Name: "LLSD_A_KEY"}}, at: "a", missing: "LLSD_A_KEY"},
		{name: "defaults and conditionals", version: "0.7.1", cfg: `{a: "${env.X:=d}", b: "${env.X:=}", c: "${env.X:+v}"}`},
		{name: "sorted keys", version: "0.7.1", cfg: `{b: "${env.B}", a: "${env.A}"}`, at: "a", missing: "A"},
		{name: "disabled provider", version: "0.3.4", cfg: `{p: [{provider_id: "${env.X:=__disabled__}", config: {u: "${env.U}"}}]}`},
		{name: "provider not disabled", version: "0.3.4", cfg: `{p: [{provider_id: "${env.X:=__disabled__}", config: {u: "${env.U}"}}]}`,
			env: []corev1.EnvVar{{Name: "X", Value: "p"}}, at: "p[0].config.u", missing: "U"},
		{name: "conditional provider is expanded", version: "0.7.1", cfg: `{p: [{provider_id: "${env.X:+p}", config: {u: "${env.U}"}}]}`,
			at: "p[0].config.u", missing: "U"},
		{name: "resource with an empty id", version: "0.7.1", cfg: `{m: [{model_id: "${env.X:+m}", provider_model_id: "${env.U}"}]}`},
		{name: "resource ids from 0.4.1", version: "0.4.0", cfg: `{m: [{model_id: "${env.X:+m}", provider_model_id: "${env.U}"}]}`,
			at: "m[0].provider_model_id", missing: "U"},
		{name: "an unset id is not an empty one", version: "0.7.1", cfg: `{m: [{model_id: "${env.U}", provider_id: p}]}`,
			at: "m[0].model_id", missing: "U"},
		{name: "either id empty", version: "0.7.1", cfg: `{m: [{model_id: "${env.U}", shield_id: "${env.X:+s}"}]}`},
		{name: "shield ids until 0.8", version: "1.3.0", cfg: `{m: [{shield_id: "${env.X:+s}", p: "${env.U}"}]}`, at: "m[0].p", missing: "U"},
		{name: "auth switched off", version: "0.7.1", cfg: `{server: {auth: {provider_config: {type: "${env.AUTH:+oauth2_token}", issuer: "${env.U}"}}}}`},
		{name: "auth before 0.6", version: "0.5.0", cfg: `{server: {auth: {provider_config: {type: "${env.AUTH:+oauth2_token}", issuer: "${env.U}"}}}}`,
			at: "server.auth.provider_config.issuer", missing: "U"},
		{name: "auth switched on", version: "0.7.1", cfg: `{server: {auth: {provider_config: {type: "${env.AUTH:+oauth2_token}", issuer: "${env.U}"}}}}`,
			env: []corev1.EnvVar{{Name: "AUTH", ValueFrom: fromSecret}}, at: "server.auth.provider_config.issuer", missing: "U"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cfg map[string]any
			if err := yaml.Unmarshal([]byte(c.cfg), &cfg); err != nil {
				t.Fatal(err)
			}
			spec := &v1alpha2.LlamaStackDistributionSpec{}
			if c.env != nil {
				spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{Env: c.env}
			}
			g := &gen{v: mustVersion(t, c.version), cfg: cfg, env: newEnvSet(), spec: spec}
			if c.secret != "" {
				if _, err := g.env.add(c.secret, "f", "s", "k"); err != nil {
					t.Fatal(err)
				}
			}
			at, missing := g.unsetRef(g.cfg, "", g.podEnv())
			if at != c.at || missing != c.missing {
				t.Errorf("got %q at %q, want %q at %q", missing, at, c.missing, c.at)
			}
		})
	}
}

// A settings key that names a credential, given as a literal, is written as given but
// warned about; one taken from the environment is not.
func TestSecretLikeSettingsAreWarnedAbout(t *testing.T) {
	d, _ := LookupDistribution("starter")
	base, err := d.Base()
	if err != nil {
		t.Fatal(err)
	}
	spec := v1alpha2.LlamaStackDistributionSpec{
		Distribution: v1alpha2.DistributionSpec{Name: "starter"},
		Providers: &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{
			Provider: "vllm", Endpoint: "http://vllm:8000/v1",
			Settings: &runtime.RawExtension{Raw: []byte(`{"api_token":"sk-123","max_tokens":4096,"network":{"headers":{"X-Secret":"s"}},"refresh_models":false,"password":"${env.FROM_POD:=}"}`)},
		}}},
	}
	out, err := Generate(Input{Name: "demo", Spec: spec, ServerVersion: d.ServerVersion, Base: base, BaseField: "spec.distribution.name"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"spec.providers.inference[0].settings.api_token looks like a credential",
		"spec.providers.inference[0].settings.network.headers.X-Secret looks like a credential",
	}
	if len(out.Warnings) != len(want) {
		t.Fatalf("warnings = %q, want %d", out.Warnings, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(out.Warnings[i], w) {
			t.Errorf("warning %d = %q, want prefix %q", i, out.Warnings[i], w)
		}
	}
}
