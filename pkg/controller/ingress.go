package controller

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// wantsIngress tells whether the server is exposed outside the cluster.
func wantsIngress(l *v1alpha1.LlamaStackDistribution) bool {
	return l.Spec.Network != nil && l.Spec.Network.ExposeRoute
}

// newIngress builds the Ingress routing every path to the server Service. As upstream, it
// sets no class, host, TLS or annotations, so the cluster's defaults apply.
func newIngress(l *v1alpha1.LlamaStackDistribution) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "Ingress"},
		ObjectMeta: childObjectMeta(l, ingressName(l)),
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{
				IngressRuleValue: networkingv1.IngressRuleValue{
					HTTP: &networkingv1.HTTPIngressRuleValue{
						Paths: []networkingv1.HTTPIngressPath{{
							Path:     "/",
							PathType: ptr.To(networkingv1.PathTypePrefix),
							Backend: networkingv1.IngressBackend{
								Service: &networkingv1.IngressServiceBackend{
									Name: serviceName(l),
									Port: networkingv1.ServiceBackendPort{Number: port(l)},
								},
							},
						}},
					},
				},
			}},
		},
	}
}

// ingressURL is the external URL of an Ingress, as reported in status.routeURL: the first
// load balancer's hostname, else its IP, else the first rule's host; "" while there is none.
func ingressURL(ing *networkingv1.Ingress) string {
	if ing == nil {
		return ""
	}
	var addr string
	if lbs := ing.Status.LoadBalancer.Ingress; len(lbs) > 0 {
		addr = lbs[0].Hostname
		if addr == "" {
			addr = lbs[0].IP
		}
	}
	if addr == "" && len(ing.Spec.Rules) > 0 {
		addr = ing.Spec.Rules[0].Host
	}
	if addr == "" {
		return ""
	}
	return "http://" + addr
}
