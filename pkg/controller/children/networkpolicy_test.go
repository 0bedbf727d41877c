package children

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

const testOperatorNamespace = "llama-ops"

var (
	peerSameNamespace = networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}
	peerAllNamespaces = networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}
	peerRouters       = networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"network.openshift.io/policy-group": "ingress"},
	}}
)

func peerNamespace(name string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": name},
	}}
}

func peerLabelKey(key string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpExists}},
	}}
}

func TestNewNetworkPolicy(t *testing.T) {
	tests := map[string]struct {
		port     int32
		network  *v1alpha1.NetworkSpec
		wantPort int32
		wantFrom []networkingv1.NetworkPolicyPeer
	}{
		"no network: own and operator namespace only": {
			network:  nil,
			wantPort: 8321,
			wantFrom: []networkingv1.NetworkPolicyPeer{peerSameNamespace, peerNamespace(testOperatorNamespace)},
		},
		"empty network adds the routers": {
			network:  &v1alpha1.NetworkSpec{},
			wantPort: 8321,
			wantFrom: []networkingv1.NetworkPolicyPeer{peerSameNamespace, peerNamespace(testOperatorNamespace), peerRouters},
		},
		"exposeRoute adds the routers, custom port": {
			port:     9000,
			network:  &v1alpha1.NetworkSpec{ExposeRoute: true},
			wantPort: 9000,
			wantFrom: []networkingv1.NetworkPolicyPeer{peerSameNamespace, peerNamespace(testOperatorNamespace), peerRouters},
		},
		"namespaces by name, in order": {
			network: &v1alpha1.NetworkSpec{AllowedFrom: &v1alpha1.AllowedFromSpec{
				Namespaces: []string{"frontend", "batch"},
			}},
			wantPort: 8321,
			wantFrom: []networkingv1.NetworkPolicyPeer{
				peerSameNamespace, peerNamespace(testOperatorNamespace),
				peerNamespace("frontend"), peerNamespace("batch"),
				peerRouters,
			},
		},
		"label keys as Exists expressions": {
			network: &v1alpha1.NetworkSpec{AllowedFrom: &v1alpha1.AllowedFromSpec{
				Labels: []v1alpha1.LabelKey{"lls-allowed", "myproject.io/team"},
			}},
			wantPort: 8321,
			wantFrom: []networkingv1.NetworkPolicyPeer{
				peerSameNamespace, peerNamespace(testOperatorNamespace),
				peerLabelKey("lls-allowed"), peerLabelKey("myproject.io/team"),
				peerRouters,
			},
		},
		"names before label keys": {
			network: &v1alpha1.NetworkSpec{ExposeRoute: true, AllowedFrom: &v1alpha1.AllowedFromSpec{
				Labels:     []v1alpha1.LabelKey{"team/ok"},
				Namespaces: []string{"frontend"},
			}},
			wantPort: 8321,
			wantFrom: []networkingv1.NetworkPolicyPeer{
				peerSameNamespace, peerNamespace(testOperatorNamespace),
				peerNamespace("frontend"), peerLabelKey("team/ok"),
				peerRouters,
			},
		},
		"star alone admits all namespaces only": {
			network:  &v1alpha1.NetworkSpec{AllowedFrom: &v1alpha1.AllowedFromSpec{Namespaces: []string{"*"}}},
			wantPort: 8321,
			wantFrom: []networkingv1.NetworkPolicyPeer{peerAllNamespaces},
		},
		"star anywhere overrides names, label keys and routers": {
			network: &v1alpha1.NetworkSpec{ExposeRoute: true, AllowedFrom: &v1alpha1.AllowedFromSpec{
				Namespaces: []string{"frontend", "*"},
				Labels:     []v1alpha1.LabelKey{"team/ok"},
			}},
			wantPort: 8321,
			wantFrom: []networkingv1.NetworkPolicyPeer{peerAllNamespaces},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := childTestCR(func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.Port = tc.port
				l.Spec.Network = tc.network
			})
			before := l.DeepCopy()

			got := NewNetworkPolicy(hub(l), testOperatorNamespace, AskedListening(hub(l), ""))

			want := &networkingv1.NetworkPolicy{
				TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
				ObjectMeta: wantChildMeta("demo-network-policy"),
				Spec: networkingv1.NetworkPolicySpec{
					PodSelector: metav1.LabelSelector{MatchLabels: childTestSelector()},
					PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
					Ingress: []networkingv1.NetworkPolicyIngressRule{{
						Ports: []networkingv1.NetworkPolicyPort{{
							Protocol: ptr.To(corev1.ProtocolTCP),
							Port:     ptr.To(intstr.FromInt32(tc.wantPort)),
						}},
						From: tc.wantFrom,
					}},
				},
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("newNetworkPolicy() mismatch (-want +got):\n%s", d)
			}

			// Spelled out: empty selectors are present (they select everything), and only the
			// first peer has a pod selector (host-network routers have no matching pods).
			from := got.Spec.Ingress[0].From
			require.NotEmpty(t, from)
			if len(from) == 1 {
				require.NotNil(t, from[0].NamespaceSelector)
				assert.Empty(t, from[0].NamespaceSelector.MatchLabels)
				assert.Empty(t, from[0].NamespaceSelector.MatchExpressions)
				assert.Nil(t, from[0].PodSelector)
			} else {
				require.NotNil(t, from[0].PodSelector)
				assert.Equal(t, metav1.LabelSelector{}, *from[0].PodSelector)
				assert.Nil(t, from[0].NamespaceSelector)
			}
			for i, p := range from[1:] {
				assert.Nil(t, p.PodSelector, "peer %d", i+1)
				assert.NotNil(t, p.NamespaceSelector, "peer %d", i+1)
				assert.Nil(t, p.IPBlock, "peer %d", i+1)
			}
			assert.Equal(t, before, l, "the CR must not be mutated")
		})
	}
}

// While the server serves metrics, a second rule admits to the metrics port the sources
// the server admits, without the routers (nothing routes to it from outside) and with
// OpenShift's monitoring namespaces; an older server has one rule only.
func TestNetworkPolicyAdmitsScrapesToTheMetricsPort(t *testing.T) {
	peerMonitoring := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"network.openshift.io/policy-group": "monitoring"},
	}}
	tests := map[string]struct {
		network  *v1alpha1.NetworkSpec
		port     int32
		version  string
		wantFrom []networkingv1.NetworkPolicyPeer // nil: no metrics rule
	}{
		"a server without the endpoint": {version: "0.7.1"},
		"version not known":             {version: ""},
		"the API on the metrics port":   {version: starterVersion(), port: 9464},
		"own and operator namespace": {version: starterVersion(),
			wantFrom: []networkingv1.NetworkPolicyPeer{peerSameNamespace, peerNamespace(testOperatorNamespace), peerMonitoring}},
		"allowedFrom names the Prometheus namespace, not the routers": {version: starterVersion(),
			network: &v1alpha1.NetworkSpec{ExposeRoute: true, AllowedFrom: &v1alpha1.AllowedFromSpec{
				Namespaces: []string{"monitoring"}, Labels: []v1alpha1.LabelKey{"team/ok"}}},
			wantFrom: []networkingv1.NetworkPolicyPeer{peerSameNamespace, peerNamespace(testOperatorNamespace),
				peerNamespace("monitoring"), peerLabelKey("team/ok"), peerMonitoring}},
		"star admits every namespace": {version: starterVersion(),
			network:  &v1alpha1.NetworkSpec{AllowedFrom: &v1alpha1.AllowedFromSpec{Namespaces: []string{"*"}}},
			wantFrom: []networkingv1.NetworkPolicyPeer{peerAllNamespaces}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := childTestCR(func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.Port = tc.port
				l.Spec.Network = tc.network
			})
			got := NewNetworkPolicy(hub(l), testOperatorNamespace, AskedListening(hub(l), tc.version))
			apiRule := NewNetworkPolicy(hub(l), testOperatorNamespace, AskedListening(hub(l), "")).Spec.Ingress[0]
			require.NotEmpty(t, got.Spec.Ingress)
			assert.Equal(t, apiRule, got.Spec.Ingress[0], "the server's rule does not depend on the metrics")
			if tc.wantFrom == nil {
				assert.Len(t, got.Spec.Ingress, 1)
				return
			}
			require.Len(t, got.Spec.Ingress, 2)
			assert.Equal(t, networkingv1.NetworkPolicyIngressRule{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(9464))}},
				From:  tc.wantFrom,
			}, got.Spec.Ingress[1])
		})
	}
}

// A CR exposed through an HTTPRoute admits to the API port the namespaces of the
// Gateways it attaches to (a ref without a namespace names the CR's), sorted and each
// once, after the routers; namespaces already admitted are not repeated, and a Route
// or an Ingress adds none. The metrics port admits no Gateway.
func TestNetworkPolicyAdmitsTheGatewaysOfAnHTTPRoute(t *testing.T) {
	base := []networkingv1.NetworkPolicyPeer{peerSameNamespace, peerNamespace(testOperatorNamespace)}
	httpRoute := func(refs ...v1alpha2.GatewayParentRef) *v1alpha2.ExposeSpec {
		return &v1alpha2.ExposeSpec{Type: v1alpha2.ExposeHTTPRoute, HTTPRoute: &v1alpha2.HTTPRouteSpec{ParentRefs: refs}}
	}
	tests := map[string]struct {
		expose      *v1alpha2.ExposeSpec
		allowedFrom []string
		want        []networkingv1.NetworkPolicyPeer
	}{
		"a Gateway in another namespace": {
			expose: httpRoute(v1alpha2.GatewayParentRef{Name: "shared", Namespace: "infra"}),
			want:   append(slices.Clone(base), peerRouters, peerNamespace("infra")),
		},
		"Gateways sorted by namespace, each namespace once": {
			expose: httpRoute(
				v1alpha2.GatewayParentRef{Name: "b", Namespace: "zeta"},
				v1alpha2.GatewayParentRef{Name: "a", Namespace: "gw-a", SectionName: "https"},
				v1alpha2.GatewayParentRef{Name: "a", Namespace: "gw-a", SectionName: "http"},
				v1alpha2.GatewayParentRef{Name: "c", Namespace: "gw"},
				v1alpha2.GatewayParentRef{Name: "d", Namespace: "zeta"}),
			want: append(slices.Clone(base), peerRouters, peerNamespace("gw"), peerNamespace("gw-a"), peerNamespace("zeta")),
		},
		"a Gateway of the CR's namespace, unnamed or named, is admitted already": {
			expose: httpRoute(v1alpha2.GatewayParentRef{Name: "local"}, v1alpha2.GatewayParentRef{Name: "other", Namespace: "team-a"}),
			want:   append(slices.Clone(base), peerRouters),
		},
		"the operator's namespace and allowedFrom's are not repeated": {
			expose: httpRoute(v1alpha2.GatewayParentRef{Name: "a", Namespace: testOperatorNamespace},
				v1alpha2.GatewayParentRef{Name: "b", Namespace: "frontend"}, v1alpha2.GatewayParentRef{Name: "c", Namespace: "infra"}),
			allowedFrom: []string{"frontend"},
			want:        append(slices.Clone(base), peerNamespace("frontend"), peerRouters, peerNamespace("infra")),
		},
		"allowedFrom * admits every namespace alone": {
			expose:      httpRoute(v1alpha2.GatewayParentRef{Name: "a", Namespace: "infra"}),
			allowedFrom: []string{"*"},
			want:        []networkingv1.NetworkPolicyPeer{peerAllNamespaces},
		},
		"an HTTPRoute turned off admits no Gateway": {
			expose: func() *v1alpha2.ExposeSpec {
				e := httpRoute(v1alpha2.GatewayParentRef{Name: "a", Namespace: "infra"})
				e.Enabled = ptr.To(false)
				return e
			}(),
			want: append(slices.Clone(base), peerRouters),
		},
		"an OpenShift Route: the routers, no Gateway": {
			expose: &v1alpha2.ExposeSpec{Type: v1alpha2.ExposeRoute},
			want:   append(slices.Clone(base), peerRouters),
		},
		"an Ingress: the routers, no Gateway": {
			expose: &v1alpha2.ExposeSpec{},
			want:   append(slices.Clone(base), peerRouters),
		},
		"not exposed": {
			want: base,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := hub(childTestCR())
			l.Spec.Networking = &v1alpha2.NetworkingSpec{Expose: tc.expose}
			if tc.allowedFrom != nil {
				l.Spec.Networking.AllowedFrom = &v1alpha2.AllowedFromSpec{Namespaces: tc.allowedFrom}
			}
			before := l.DeepCopy()
			listening := AskedListening(l, starterVersion())
			require.True(t, listening.Metrics, "the starter serves metrics")
			got := NewNetworkPolicy(l, testOperatorNamespace, listening)
			require.Len(t, got.Spec.Ingress, 2)
			if d := cmp.Diff(tc.want, got.Spec.Ingress[0].From); d != "" {
				t.Errorf("the API port's peers (-want +got):\n%s", d)
			}
			for _, p := range got.Spec.Ingress[1].From {
				if p.NamespaceSelector != nil && p.NamespaceSelector.MatchLabels[corev1.LabelMetadataName] == "infra" {
					t.Errorf("the metrics port admits a Gateway's namespace: %v", p)
				}
			}
			assert.Equal(t, got, NewNetworkPolicy(l, testOperatorNamespace, listening), "deterministic")
			assert.Equal(t, before, l, "the CR must not be mutated")
		})
	}
}
