package children

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

const (
	// allNamespaces in allowedFrom.namespaces opens the server to every namespace.
	allNamespaces = "*"

	// labelPolicyGroup and policyGroupIngress select the OpenShift router namespaces,
	// policyGroupMonitoring its monitoring stack's.
	labelPolicyGroup      = "network.openshift.io/policy-group"
	policyGroupIngress    = "ingress"
	policyGroupMonitoring = "monitoring"
)

// NewNetworkPolicy builds the NetworkPolicy that admits traffic to the server port only from
// the CR's namespace, the controller's namespace, the namespaces named or labelled in
// spec.networking.allowedFrom and, once networking.expose or allowedFrom is written (in
// v1alpha1: once spec.network is), the OpenShift routers; for a CR exposed through an
// HTTPRoute, also the namespaces of the Gateways it attaches to. A "*" namespace admits every
// namespace instead. While the server serves its metrics (servermetrics.go), a second
// rule admits to the metrics port the same sources, but the routers, and OpenShift's
// monitoring namespaces.
func NewNetworkPolicy(l *v1alpha2.LlamaStackDistribution, operatorNamespace string, s Listening) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: llsd.ChildObjectMeta(l, llsd.NetworkPolicyName(l)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: llsd.SelectorLabels(l)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{
					Protocol: ptr.To(corev1.ProtocolTCP),
					Port:     ptr.To(intstr.FromInt32(s.Port)),
				}},
				From: networkPolicyPeers(l, operatorNamespace),
			}},
		},
	}
	if s.Metrics {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{
			Ports: []networkingv1.NetworkPolicyPort{{
				Protocol: ptr.To(corev1.ProtocolTCP),
				Port:     ptr.To(intstr.FromInt32(ServerMetricsPort)),
			}},
			From: metricsPeers(l, operatorNamespace),
		})
	}
	return np
}

// metricsPeers lists the sources admitted to the metrics port: those admitted to the
// server but the routers (a Prometheus in a namespace of allowedFrom scrapes it), and
// the namespaces of OpenShift's monitoring stack.
func metricsPeers(l *v1alpha2.LlamaStackDistribution, operatorNamespace string) []networkingv1.NetworkPolicyPeer {
	peers, everyNamespace := sourcePeers(l, operatorNamespace)
	if everyNamespace {
		return peers
	}
	return append(peers, networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{labelPolicyGroup: policyGroupMonitoring},
		},
	})
}

// networkPolicyPeers lists the sources admitted to the server, in upstream's order.
func networkPolicyPeers(l *v1alpha2.LlamaStackDistribution, operatorNamespace string) []networkingv1.NetworkPolicyPeer {
	peers, everyNamespace := sourcePeers(l, operatorNamespace)
	if everyNamespace {
		return peers
	}
	if net := llsd.Networking(l); net.Expose != nil || net.AllowedFrom != nil {
		peers = append(peers, networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{labelPolicyGroup: policyGroupIngress},
			},
		})
	}
	for _, ns := range gatewayNamespaces(l, operatorNamespace) {
		peers = append(peers, namespaceNamePeer(ns))
	}
	return peers
}

// gatewayNamespaces are the namespaces of the Gateways the CR's HTTPRoute attaches to
// (their proxies forward to the server from there), sorted, each once, but those
// sourcePeers already admits: the CR's, the operator's and those allowedFrom names.
func gatewayNamespaces(l *v1alpha2.LlamaStackDistribution, operatorNamespace string) []string {
	admitted := []string{l.Namespace, operatorNamespace}
	if net := llsd.Networking(l); net.AllowedFrom != nil {
		admitted = append(admitted, net.AllowedFrom.Namespaces...)
	}
	var out []string
	for _, g := range HTTPRouteGateways(l) {
		if !slices.Contains(admitted, g.Namespace) && !slices.Contains(out, g.Namespace) {
			out = append(out, g.Namespace)
		}
	}
	return out
}

// sourcePeers lists the pods of the CR's namespace, the operator namespace and the
// namespaces allowedFrom names or labels; or, when it names "*", every namespace
// alone (everyNamespace).
func sourcePeers(l *v1alpha2.LlamaStackDistribution, operatorNamespace string) (peers []networkingv1.NetworkPolicyPeer, everyNamespace bool) {
	var allowed v1alpha2.AllowedFromSpec
	if net := llsd.Networking(l); net.AllowedFrom != nil {
		allowed = *net.AllowedFrom
	}
	for _, ns := range allowed.Namespaces {
		if ns == allNamespaces {
			return []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}, true
		}
	}
	peers = []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{}},
		namespaceNamePeer(operatorNamespace),
	}
	for _, ns := range allowed.Namespaces {
		peers = append(peers, namespaceNamePeer(ns))
	}
	for _, key := range allowed.Labels {
		peers = append(peers, networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key:      string(key),
					Operator: metav1.LabelSelectorOpExists,
				}},
			},
		})
	}
	return peers, false
}

// namespaceNamePeer admits every pod of the namespace with the given name.
func namespaceNamePeer(namespace string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{corev1.LabelMetadataName: namespace},
		},
	}
}
