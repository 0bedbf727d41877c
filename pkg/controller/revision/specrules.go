package revision

import (
	"fmt"
	"strings"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
)

// specRulesProblem is the first rule of v1alpha2's CRD that the spec breaks among those
// a llamastack.io/v1alpha1 write could get around: the API server checks such a write
// against v1alpha1's schema only, which has no rule across a field of both versions
// (server.userConfig, network.ingress) and one only v1alpha2 has (providers, expose's
// type). The admission policy of artifacts/policy judges them since; an object stored
// before it, or while it was absent, is told here which field to remove, and what runs
// is kept until then. nil when the spec keeps them all. Each case mirrors one rule of
// LlamaStackDistributionSpec or ExposeSpec, with its message.
func specRulesProblem(l *v1alpha2.LlamaStackDistribution) *fault.Problem {
	s := &l.Spec
	problem := func(fields, rule, remedy string) *fault.Problem {
		return &fault.Problem{Reason: v1alpha2.ReasonSpecInvalid, Message: fmt.Sprintf(
			"%s: %s (a write in llamastack.io/v1alpha1 let this through): %s", fields, rule, remedy)}
	}
	if oc := s.OverrideConfig; oc != nil {
		var with []string
		for _, f := range []struct {
			name string
			set  bool
		}{{"spec.providers", s.Providers != nil}, {"spec.resources", s.Resources != nil}, {"spec.storage", s.Storage != nil}, {"spec.disabled", s.Disabled != nil}} {
			if f.set {
				with = append(with, f.name)
			}
		}
		if len(with) > 0 {
			return problem("spec.overrideConfig and "+strings.Join(with, ", "),
				"overrideConfig is the whole config.yaml as given: it cannot be combined with providers, resources, storage or disabled",
				fmt.Sprintf("remove spec.overrideConfig (server.userConfig in v1alpha1) to have the config generated from %s, or remove %s to run ConfigMap %s as given",
					strings.Join(with, ", "), strings.Join(with, ", "), oc.ConfigMapName))
		}
		if s.BaseConfig != nil {
			return problem("spec.overrideConfig and spec.baseConfig",
				"overrideConfig is the whole config.yaml as given: it cannot be combined with baseConfig",
				fmt.Sprintf("remove spec.overrideConfig (server.userConfig in v1alpha1) to have the config generated from ConfigMap %s, or remove spec.baseConfig to run ConfigMap %s as given",
					s.BaseConfig.ConfigMapName, oc.ConfigMapName))
		}
	}
	if s.Networking == nil || s.Networking.Expose == nil {
		return nil
	}
	e := s.Networking.Expose
	var ingressOnly []string
	if e.ClassName != nil {
		ingressOnly = append(ingressOnly, "spec.networking.expose.className (network.ingress.className in v1alpha1)")
	}
	if e.TLSSecretName != "" {
		ingressOnly = append(ingressOnly, "spec.networking.expose.tlsSecretName (network.ingress.tlsSecretName in v1alpha1)")
	}
	switch {
	case e.Type == v1alpha2.ExposeHTTPRoute && len(ingressOnly) > 0:
		return problem("spec.networking.expose.type HTTPRoute",
			"className and tlsSecretName are Ingress settings: an HTTPRoute takes its class and TLS from the Gateway listener it attaches to",
			"remove "+strings.Join(ingressOnly, " and "))
	case e.Type == v1alpha2.ExposeRoute && len(ingressOnly) > 0:
		return problem("spec.networking.expose.type Route",
			"className and tlsSecretName are Ingress settings: a Route is served by the OpenShift router with its certificate",
			"remove "+strings.Join(ingressOnly, " and "))
	case e.Type == v1alpha2.ExposeRoute && strings.HasPrefix(e.Hostname, "*"):
		return problem("spec.networking.expose.type Route and hostname "+e.Hostname,
			"a Route serves one host name: a wildcard hostname is for an Ingress or HTTPRoute",
			"remove spec.networking.expose.hostname (network.ingress.host in v1alpha1), or set it to one host name")
	}
	return nil
}
