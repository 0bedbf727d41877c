package controller

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

const (
	// allNamespaces in allowedFrom.namespaces opens the server to every namespace.
	allNamespaces = "*"

	// labelPolicyGroup and policyGroupIngress select the OpenShift router namespaces.
	labelPolicyGroup   = "network.openshift.io/policy-group"
	policyGroupIngress = "ingress"
)

// newNetworkPolicy builds the NetworkPolicy that admits traffic to the server port only from
// the CR's namespace, the controller's namespace, the namespaces named or labelled in
// spec.networking.allowedFrom and, once networking.expose or allowedFrom is written (in
// v1alpha1: once spec.network is), the OpenShift routers. A "*" namespace admits every
// namespace instead.
func newNetworkPolicy(l *v1alpha2.LlamaStackDistribution, operatorNamespace string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: childObjectMeta(l, networkPolicyName(l)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selectorLabels(l)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{
					Protocol: ptr.To(corev1.ProtocolTCP),
					Port:     ptr.To(intstr.FromInt32(port(l))),
				}},
				From: networkPolicyPeers(l, operatorNamespace),
			}},
		},
	}
}

// networkPolicyPeers lists the sources admitted to the server, in upstream's order.
func networkPolicyPeers(l *v1alpha2.LlamaStackDistribution, operatorNamespace string) []networkingv1.NetworkPolicyPeer {
	var allowed v1alpha2.AllowedFromSpec
	net := networking(l)
	if net.AllowedFrom != nil {
		allowed = *net.AllowedFrom
	}

	for _, ns := range allowed.Namespaces {
		if ns == allNamespaces {
			return []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}
		}
	}

	peers := []networkingv1.NetworkPolicyPeer{
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
	if net.Expose != nil || net.AllowedFrom != nil {
		peers = append(peers, networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{labelPolicyGroup: policyGroupIngress},
			},
		})
	}
	return peers
}

// namespaceNamePeer admits every pod of the namespace with the given name.
func namespaceNamePeer(namespace string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{corev1.LabelMetadataName: namespace},
		},
	}
}
