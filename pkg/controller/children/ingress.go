package children

import (
	"maps"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// WantsIngress tells whether the server is exposed outside the cluster through an
// Ingress (the default type).
func WantsIngress(l *v1alpha2.LlamaStackDistribution) bool {
	e := llsd.Networking(l).Expose
	return e != nil && ptr.Deref(e.Enabled, true) && (e.Type == "" || e.Type == v1alpha2.ExposeIngress)
}

// NewIngress builds the Ingress routing every path to the server Service. Without
// networking.expose options it sets no class, host, TLS or annotations, as upstream, so the
// cluster's defaults apply; fields it does not set are left to whoever sets them.
func NewIngress(l *v1alpha2.LlamaStackDistribution) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "Ingress"},
		ObjectMeta: llsd.ChildObjectMeta(l, llsd.IngressName(l)),
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{
				IngressRuleValue: networkingv1.IngressRuleValue{
					HTTP: &networkingv1.HTTPIngressRuleValue{
						Paths: []networkingv1.HTTPIngressPath{{
							Path:     "/",
							PathType: ptr.To(networkingv1.PathTypePrefix),
							Backend: networkingv1.IngressBackend{
								Service: &networkingv1.IngressServiceBackend{
									Name: llsd.ServiceName(l),
									Port: networkingv1.ServiceBackendPort{Number: llsd.Port(l)},
								},
							},
						}},
					},
				},
			}},
		},
	}
	opts := llsd.Networking(l).Expose
	if opts == nil {
		return ing
	}
	if opts.ClassName != nil {
		ing.Spec.IngressClassName = ptr.To(*opts.ClassName)
	}
	ing.Spec.Rules[0].Host = opts.Hostname
	if opts.TLSSecretName != "" {
		tls := networkingv1.IngressTLS{SecretName: opts.TLSSecretName}
		if opts.Hostname != "" {
			tls.Hosts = []string{opts.Hostname}
		}
		ing.Spec.TLS = []networkingv1.IngressTLS{tls}
	}
	if len(opts.Annotations) > 0 {
		ing.Annotations = maps.Clone(opts.Annotations)
	}
	return ing
}

// IngressURL is the external URL of an Ingress, as reported in status.routeURL: its
// host when one is set (and not a wildcard), else the first load balancer's hostname or
// IP; https when the Ingress terminates TLS; "" while there is no address.
func IngressURL(ing *networkingv1.Ingress) string {
	if ing == nil {
		return ""
	}
	var addr string
	if len(ing.Spec.Rules) > 0 && !strings.HasPrefix(ing.Spec.Rules[0].Host, "*") {
		addr = ing.Spec.Rules[0].Host
	}
	if lbs := ing.Status.LoadBalancer.Ingress; addr == "" && len(lbs) > 0 {
		addr = lbs[0].Hostname
		if addr == "" {
			addr = lbs[0].IP
		}
	}
	if addr == "" {
		return ""
	}
	if len(ing.Spec.TLS) > 0 {
		return "https://" + addr
	}
	return "http://" + addr
}
