package revision

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// Each rule of v1alpha2 a v1alpha1 write could get around is told, naming the fields
// to remove, with the CRD's message; a spec that keeps them is not.
func TestSpecRulesProblem(t *testing.T) {
	providers := &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{Provider: "vllm"}}}
	override := &v1alpha2.OverrideConfigSpec{ConfigMapName: "own"}
	expose := func(e v1alpha2.ExposeSpec) *v1alpha2.NetworkingSpec { return &v1alpha2.NetworkingSpec{Expose: &e} }
	cases := map[string]struct {
		spec v1alpha2.LlamaStackDistributionSpec
		want []string
	}{
		"overrideConfig alone":     {spec: v1alpha2.LlamaStackDistributionSpec{OverrideConfig: override}},
		"providers alone":          {spec: v1alpha2.LlamaStackDistributionSpec{Providers: providers}},
		"Ingress with its options": {spec: v1alpha2.LlamaStackDistributionSpec{Networking: expose(v1alpha2.ExposeSpec{ClassName: ptr.To("nginx"), TLSSecretName: "cert", Hostname: "*.example.com"})}},
		"HTTPRoute alone":          {spec: v1alpha2.LlamaStackDistributionSpec{Networking: expose(v1alpha2.ExposeSpec{Type: v1alpha2.ExposeHTTPRoute, Hostname: "*.example.com"})}},
		"Route with one host":      {spec: v1alpha2.LlamaStackDistributionSpec{Networking: expose(v1alpha2.ExposeSpec{Type: v1alpha2.ExposeRoute, Hostname: "llama.example.com"})}},
		"overrideConfig and providers": {
			spec: v1alpha2.LlamaStackDistributionSpec{OverrideConfig: override, Providers: providers},
			want: []string{
				"spec.overrideConfig and spec.providers: overrideConfig is the whole config.yaml as given: it cannot be combined with providers, resources, storage or disabled",
				"remove spec.overrideConfig (server.userConfig in v1alpha1) to have the config generated from spec.providers, or remove spec.providers to run ConfigMap own as given",
			},
		},
		"overrideConfig, storage and disabled": {
			spec: v1alpha2.LlamaStackDistributionSpec{OverrideConfig: override, Storage: &v1alpha2.StateStorageSpec{}, Disabled: []v1alpha2.APIName{"safety"}},
			want: []string{"spec.overrideConfig and spec.storage, spec.disabled:", "or remove spec.storage, spec.disabled to run"},
		},
		"overrideConfig and baseConfig": {
			spec: v1alpha2.LlamaStackDistributionSpec{OverrideConfig: override, BaseConfig: &v1alpha2.BaseConfigSpec{ConfigMapName: "base"}},
			want: []string{
				"spec.overrideConfig and spec.baseConfig: overrideConfig is the whole config.yaml as given: it cannot be combined with baseConfig",
				"generated from ConfigMap base, or remove spec.baseConfig",
			},
		},
		"HTTPRoute with a class": {
			spec: v1alpha2.LlamaStackDistributionSpec{Networking: expose(v1alpha2.ExposeSpec{Type: v1alpha2.ExposeHTTPRoute, ClassName: ptr.To("nginx")})},
			want: []string{
				"an HTTPRoute takes its class and TLS from the Gateway listener it attaches to",
				"remove spec.networking.expose.className (network.ingress.className in v1alpha1)",
			},
		},
		"Route with a TLS Secret": {
			spec: v1alpha2.LlamaStackDistributionSpec{Networking: expose(v1alpha2.ExposeSpec{Type: v1alpha2.ExposeRoute, TLSSecretName: "cert"})},
			want: []string{
				"a Route is served by the OpenShift router with its certificate",
				"remove spec.networking.expose.tlsSecretName (network.ingress.tlsSecretName in v1alpha1)",
			},
		},
		"Route with a wildcard host": {
			spec: v1alpha2.LlamaStackDistributionSpec{Networking: expose(v1alpha2.ExposeSpec{Type: v1alpha2.ExposeRoute, Hostname: "*.example.com"})},
			want: []string{
				"spec.networking.expose.type Route and hostname *.example.com: a Route serves one host name: a wildcard hostname is for an Ingress or HTTPRoute",
				"remove spec.networking.expose.hostname (network.ingress.host in v1alpha1)",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := specRulesProblem(&v1alpha2.LlamaStackDistribution{Spec: tc.spec})
			if tc.want == nil {
				assert.Nil(t, p)
				return
			}
			if assert.NotNil(t, p) {
				assert.Equal(t, v1alpha2.ReasonSpecInvalid, p.Reason)
				for _, w := range tc.want {
					assert.Contains(t, p.Message, w)
				}
			}
		})
	}
}
