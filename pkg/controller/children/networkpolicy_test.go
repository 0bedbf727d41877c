package children

import (
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
