package children

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// A BackendTLSPolicy goes with an HTTPRoute to a server that serves TLS, as its pods
// do (not as the CR asks): nothing for a plain server, an Ingress or a Route.
func TestWantsBackendTLSPolicy(t *testing.T) {
	routed := newLLSD("app", exposedThrough("", "", v1alpha2.GatewayParentRef{Name: "gw"}))
	ingress := newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking = &v1alpha2.NetworkingSpec{Expose: &v1alpha2.ExposeSpec{Hostname: "llama.example.com"}}
	})
	disabled := newLLSD("app", exposedThrough("", "", v1alpha2.GatewayParentRef{Name: "gw"}), func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking.Expose.Enabled = ptr.To(false)
	})
	for _, tc := range []struct {
		name  string
		l     *v1alpha2.LlamaStackDistribution
		https bool
		want  bool
	}{
		{"HTTPRoute to an HTTPS server", routed, true, true},
		{"HTTPRoute to a plain server (a rolled-back TLS change)", routed, false, false},
		{"Ingress to an HTTPS server", ingress, true, false},
		{"exposure disabled", disabled, true, false},
		{"not exposed", newLLSD("app"), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, WantsBackendTLSPolicy(tc.l, Listening{Port: 8321, HTTPS: tc.https}))
		})
	}
}

func TestNewBackendTLSPolicy(t *testing.T) {
	l := newLLSD("app", exposedThrough("", "", v1alpha2.GatewayParentRef{Name: "gw"}))
	target := []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{
		LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Group: "", Kind: "Service", Name: "app-service"},
		SectionName:                ptr.To(gatewayv1.SectionName("https")),
	}}
	for _, tc := range []struct {
		name   string
		withCA bool
		want   gatewayv1.BackendTLSPolicyValidation
	}{
		{"the CA the controller knows", true, gatewayv1.BackendTLSPolicyValidation{
			Hostname:          gatewayv1.PreciseHostname("app-service." + testNamespace + ".svc"),
			CACertificateRefs: []gatewayv1.LocalObjectReference{{Group: "", Kind: "ConfigMap", Name: "app-backend-ca"}},
		}},
		{"no CA known: the system roots", false, gatewayv1.BackendTLSPolicyValidation{
			Hostname:                gatewayv1.PreciseHostname("app-service." + testNamespace + ".svc"),
			WellKnownCACertificates: ptr.To(gatewayv1.WellKnownCACertificatesSystem),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewBackendTLSPolicy(l, tc.withCA)
			assert.Equal(t, "app-backend-tls", p.Name)
			assert.Equal(t, testNamespace, p.Namespace)
			assert.Equal(t, "gateway.networking.k8s.io/v1", p.APIVersion)
			assert.Equal(t, "BackendTLSPolicy", p.Kind)
			assert.True(t, llsd.IsControlledBy(p, l))
			assert.Equal(t, llsd.ChildLabels(l), p.Labels)
			assert.Equal(t, target, p.Spec.TargetRefs)
			assert.Equal(t, tc.want, p.Spec.Validation)
		})
	}
}

func TestNewBackendCAConfigMap(t *testing.T) {
	l := newLLSD("app")
	cm := NewBackendCAConfigMap(l, []byte("PEM"))
	assert.Equal(t, "app-backend-ca", cm.Name)
	assert.Equal(t, testNamespace, cm.Namespace)
	assert.Equal(t, map[string]string{"ca.crt": "PEM"}, cm.Data, "the key the Gateways read")
	assert.Equal(t, "backend-ca", cm.Labels[llsd.LabelComponent])
	assert.True(t, llsd.IsControlledBy(cm, l))
}
