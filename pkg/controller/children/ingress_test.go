package children

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// wantIngress is the Ingress of childTestCR exposed without ingress options: one
// catch-all rule to the Service's port.
func wantIngress(port int32) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: wantChildMeta("demo-ingress"),
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{
				IngressRuleValue: networkingv1.IngressRuleValue{
					HTTP: &networkingv1.HTTPIngressRuleValue{
						Paths: []networkingv1.HTTPIngressPath{{
							Path:     "/",
							PathType: ptr.To(networkingv1.PathTypePrefix),
							Backend: networkingv1.IngressBackend{
								Service: &networkingv1.IngressServiceBackend{
									Name: "demo-service",
									Port: networkingv1.ServiceBackendPort{Number: port},
								},
							},
						}},
					},
				},
			}},
		},
	}
}

func TestNewIngress(t *testing.T) {
	tests := map[string]struct {
		mod      func(*v1alpha1.LlamaStackDistribution)
		wantPort int32
	}{
		"default port": {
			mod:      func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true} },
			wantPort: 8321,
		},
		"custom port": {
			mod: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true}
				l.Spec.Server.ContainerSpec.Port = 9000
			},
			wantPort: 9000,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := childTestCR(tc.mod)
			before := l.DeepCopy()

			got := NewIngress(hub(l))

			// No class, default backend, host or TLS: exactly one catch-all rule.
			want := wantIngress(tc.wantPort)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("newIngress() mismatch (-want +got):\n%s", d)
			}
			assert.Equal(t, before, l, "the CR must not be mutated")
		})
	}
}

func TestWantsIngress(t *testing.T) {
	tests := map[string]struct {
		network *v1alpha1.NetworkSpec
		want    bool
	}{
		"no network":          {network: nil, want: false},
		"empty network":       {network: &v1alpha1.NetworkSpec{}, want: false},
		"allowedFrom only":    {network: &v1alpha1.NetworkSpec{AllowedFrom: &v1alpha1.AllowedFromSpec{Namespaces: []string{"a"}}}, want: false},
		"exposeRoute is true": {network: &v1alpha1.NetworkSpec{ExposeRoute: true}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := childTestCR(func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Network = tc.network })
			assert.Equal(t, tc.want, WantsIngress(hub(l)))
		})
	}
}

func TestIngressURL(t *testing.T) {
	withRuleHost := func(host string) networkingv1.IngressSpec {
		return networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host}}}
	}
	withLB := func(lbs ...networkingv1.IngressLoadBalancerIngress) networkingv1.IngressStatus {
		return networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: lbs}}
	}
	tests := map[string]struct {
		ing  *networkingv1.Ingress
		want string
	}{
		"nil ingress": {
			ing:  nil,
			want: "",
		},
		"no address yet": {
			ing:  NewIngress(hub(childTestCR())),
			want: "",
		},
		"rule host only": {
			ing:  &networkingv1.Ingress{Spec: withRuleHost("llama.example.com")},
			want: "http://llama.example.com",
		},
		"empty rule host": {
			ing:  &networkingv1.Ingress{Spec: withRuleHost("")},
			want: "",
		},
		"load balancer IP only": {
			ing:  &networkingv1.Ingress{Status: withLB(networkingv1.IngressLoadBalancerIngress{IP: "10.0.0.7"})},
			want: "http://10.0.0.7",
		},
		"load balancer hostname before its IP": {
			ing:  &networkingv1.Ingress{Status: withLB(networkingv1.IngressLoadBalancerIngress{Hostname: "lb.example.com", IP: "10.0.0.7"})},
			want: "http://lb.example.com",
		},
		"rule host before the load balancer": {
			ing: &networkingv1.Ingress{
				Spec:   withRuleHost("llama.example.com"),
				Status: withLB(networkingv1.IngressLoadBalancerIngress{IP: "10.0.0.7"}),
			},
			want: "http://llama.example.com",
		},
		"wildcard host falls back to the load balancer": {
			ing: &networkingv1.Ingress{
				Spec:   withRuleHost("*.example.com"),
				Status: withLB(networkingv1.IngressLoadBalancerIngress{IP: "10.0.0.7"}),
			},
			want: "http://10.0.0.7",
		},
		"https with TLS": {
			ing: &networkingv1.Ingress{Spec: networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{{Host: "llama.example.com"}},
				TLS:   []networkingv1.IngressTLS{{Hosts: []string{"llama.example.com"}, SecretName: "tls"}},
			}},
			want: "https://llama.example.com",
		},
		"only the first load balancer counts": {
			ing: &networkingv1.Ingress{Status: withLB(
				networkingv1.IngressLoadBalancerIngress{IP: "10.0.0.7"},
				networkingv1.IngressLoadBalancerIngress{Hostname: "second.example.com"},
			)},
			want: "http://10.0.0.7",
		},
		"empty first load balancer falls back to rule host": {
			ing: &networkingv1.Ingress{
				Spec: withRuleHost("llama.example.com"),
				Status: withLB(
					networkingv1.IngressLoadBalancerIngress{},
					networkingv1.IngressLoadBalancerIngress{Hostname: "second.example.com"},
				),
			},
			want: "http://llama.example.com",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, IngressURL(tc.ing))
		})
	}
}

func TestNewIngressOptions(t *testing.T) {
	l := childTestCR()
	l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true, Ingress: &v1alpha1.IngressSpec{
		ClassName:     ptr.To("nginx"),
		Host:          "llama.example.com",
		TLSSecretName: "llama-tls",
		Annotations:   map[string]string{"cert-manager.io/cluster-issuer": "letsencrypt"},
	}}
	before := l.DeepCopy()
	ing := NewIngress(hub(l))
	want := wantIngress(8321)
	want.Annotations = map[string]string{"cert-manager.io/cluster-issuer": "letsencrypt"}
	want.Spec.IngressClassName = ptr.To("nginx")
	want.Spec.Rules[0].Host = "llama.example.com"
	want.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"llama.example.com"}, SecretName: "llama-tls"}}
	if d := cmp.Diff(want, ing); d != "" {
		t.Errorf("newIngress() mismatch (-want +got):\n%s", d)
	}
	assert.Equal(t, "https://llama.example.com", IngressURL(ing))
	ing.Annotations["x"] = "y"
	*ing.Spec.IngressClassName = "other"
	assert.Equal(t, before, l, "the CR is not aliased")

	// TLS without a host covers every host; exposeRoute alone stays as upstream.
	l.Spec.Network.Ingress = &v1alpha1.IngressSpec{TLSSecretName: "wild"}
	want = wantIngress(8321)
	want.Spec.TLS = []networkingv1.IngressTLS{{SecretName: "wild"}}
	if d := cmp.Diff(want, NewIngress(hub(l))); d != "" {
		t.Errorf("newIngress() with TLS and no host mismatch (-want +got):\n%s", d)
	}
	l.Spec.Network.Ingress = nil
	if d := cmp.Diff(wantIngress(8321), NewIngress(hub(l))); d != "" {
		t.Errorf("newIngress() without options mismatch (-want +got):\n%s", d)
	}
}
