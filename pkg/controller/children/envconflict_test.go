package children

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

func TestEnvConflict(t *testing.T) {
	withEnv := func(env ...corev1.EnvVar) func(*v1alpha2.LlamaStackDistribution) {
		return func(l *v1alpha2.LlamaStackDistribution) {
			l.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{Env: env}
		}
	}
	generating := func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Providers = &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{Provider: "vllm"}}}
	}
	secretEnv := []corev1.EnvVar{{Name: "LLSD_VLLM_API_KEY", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}
	tests := map[string]struct {
		mods    []func(*v1alpha2.LlamaStackDistribution)
		in      revision.Inputs
		reason  string
		message string
	}{
		"no user variables":     {},
		"HF_HOME is the user's": {mods: hubMods(withEnv(corev1.EnvVar{Name: "HF_HOME", Value: "/models"}))},
		"the same port":         {mods: hubMods(withEnv(corev1.EnvVar{Name: "LLS_PORT", Value: "8321"}))},
		"another port": {mods: hubMods(withEnv(corev1.EnvVar{Name: "OGX_PORT", Value: "9000"})),
			reason: v1alpha2.ReasonResourceInvalid, message: "sets OGX_PORT, which the controller sets to the server's port 8321"},
		"a generated config's Secret variable": {mods: hubMods(generating, withEnv(corev1.EnvVar{Name: "LLSD_VLLM_API_KEY", Value: "plain"})),
			in: revision.Inputs{ConfigEnv: secretEnv}, reason: v1alpha2.ReasonConfigInvalid, message: "set the provider's apiKey or secretRefs"},
		"the generated config's path": {mods: hubMods(generating, withEnv(corev1.EnvVar{Name: "RUN_CONFIG_PATH", Value: "/other.yaml"})),
			reason: v1alpha2.ReasonConfigInvalid, message: "use overrideConfig to run a file of your own"},
		"a user config pointed elsewhere, as upstream allowed": {
			mods: hubMods(func(l *v1alpha2.LlamaStackDistribution) {
				l.Spec.OverrideConfig = &v1alpha2.OverrideConfigSpec{ConfigMapName: "cfg"}
			}, withEnv(corev1.EnvVar{Name: "LLAMA_STACK_CONFIG", Value: "/mine/config.yaml"}))},
		"the certificate's path": {mods: hubMods(withEnv(corev1.EnvVar{Name: "UVICORN_SSL_CERTFILE", Value: "/x"})),
			in: revision.Inputs{TLS: &revision.TLS{Hash: "h"}}, reason: v1alpha2.ReasonResourceInvalid, message: "spec.networking.tls.secretName"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := envConflict(newLLSD("app", tc.mods...), tc.in)
			if tc.reason == "" {
				assert.Nil(t, p)
				return
			}
			require.NotNil(t, p)
			assert.Equal(t, tc.reason, p.Reason)
			assert.Contains(t, p.Message, tc.message)
			assert.Contains(t, p.Message, "spec.workload.overrides.env")
		})
	}
}
