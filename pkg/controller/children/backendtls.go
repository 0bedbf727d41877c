package children

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// An HTTPRoute sends what its Gateways receive to the server Service; a server that
// serves TLS answers plain HTTP with an error. A BackendTLSPolicy on the Service's
// HTTPS port tells the Gateways to speak TLS to it, verifying the server's
// certificate for the Service's cluster DNS name against the CA in the ConfigMap
// <name>-backend-ca (key ca.crt, as the API reads it), or against the Gateway's own
// well-known roots when the controller knows no CA for the server.

// BackendTLSPolicyResource is the Gateway API resource of the BackendTLSPolicy child.
var BackendTLSPolicyResource = gatewayv1.SchemeGroupVersion.WithResource("backendtlspolicies")

// BackendCAKey is the key of the backend CA ConfigMap that the Gateways read.
const BackendCAKey = "ca.crt"

// WantsBackendTLSPolicy tells whether the server, listening as given (what the pods of
// the serving revision answer on), has a BackendTLSPolicy: it is exposed through an
// HTTPRoute and serves HTTPS.
func WantsBackendTLSPolicy(l *v1alpha2.LlamaStackDistribution, listening Listening) bool {
	return WantsHTTPRoute(l) && listening.HTTPS
}

// ServiceHostname is the Service's cluster DNS name as a server certificate names it:
// <service>.<namespace>.svc.
func ServiceHostname(l *v1alpha2.LlamaStackDistribution) string {
	return fmt.Sprintf("%s.%s.svc", llsd.ServiceName(l), l.Namespace)
}

// NewBackendTLSPolicy builds the BackendTLSPolicy of the Service's HTTPS port: the
// Gateways verify the server for ServiceHostname against the backend CA ConfigMap when
// withCA, else against the well-known system roots.
func NewBackendTLSPolicy(l *v1alpha2.LlamaStackDistribution, withCA bool) *gatewayv1.BackendTLSPolicy {
	validation := gatewayv1.BackendTLSPolicyValidation{Hostname: gatewayv1.PreciseHostname(ServiceHostname(l))}
	if withCA {
		validation.CACertificateRefs = []gatewayv1.LocalObjectReference{{
			Group: "", Kind: "ConfigMap", Name: gatewayv1.ObjectName(llsd.BackendCAConfigMapName(l)),
		}}
	} else {
		validation.WellKnownCACertificates = ptr.To(gatewayv1.WellKnownCACertificatesSystem)
	}
	return &gatewayv1.BackendTLSPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.SchemeGroupVersion.String(), Kind: "BackendTLSPolicy"},
		ObjectMeta: llsd.ChildObjectMeta(l, llsd.BackendTLSPolicyName(l)),
		Spec: gatewayv1.BackendTLSPolicySpec{
			TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{
				LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{
					Group: "", Kind: "Service", Name: gatewayv1.ObjectName(llsd.ServiceName(l)),
				},
				SectionName: ptr.To(gatewayv1.SectionName(ServicePortNameTLS)),
			}},
			Validation: validation,
		},
	}
}

// NewBackendCAConfigMap builds the ConfigMap holding ca, the PEM certificates the
// Gateways verify the server with, under BackendCAKey.
func NewBackendCAConfigMap(l *v1alpha2.LlamaStackDistribution, ca []byte) *corev1.ConfigMap {
	m := llsd.ChildObjectMeta(l, llsd.BackendCAConfigMapName(l))
	m.Labels[llsd.LabelComponent] = "backend-ca"
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: m,
		Data:       map[string]string{BackendCAKey: string(ca)},
	}
}
