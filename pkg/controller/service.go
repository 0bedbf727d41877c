package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// servicePortName names the one port of the server Service; servicePortNameTLS when
// the server serves HTTPS, which the port's appProtocol says too (for Ingress
// controllers and meshes that read it).
const (
	servicePortName    = "http"
	servicePortNameTLS = "https"
)

// newService builds the ClusterIP Service in front of the server pods. It always exists.
// For a server version that serves metrics (servermetrics.go) it has a second port,
// named metrics.
func newService(l *v1alpha2.LlamaStackDistribution, s listening) *corev1.Service {
	sp := corev1.ServicePort{Name: servicePortName, Port: llsd.Port(l), TargetPort: intstr.FromInt32(s.port), Protocol: corev1.ProtocolTCP}
	if s.https {
		sp.Name, sp.AppProtocol = servicePortNameTLS, ptr.To("https")
	}
	ports := []corev1.ServicePort{sp}
	if s.metrics {
		ports = append(ports, metricsServicePort())
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Service"},
		ObjectMeta: llsd.ChildObjectMeta(l, llsd.ServiceName(l)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: llsd.SelectorLabels(l),
			Ports:    ports,
		},
	}
}

// serviceURL is the in-cluster URL of the server, as reported in status.serviceURL:
// https when the server serves it.
func serviceURL(l *v1alpha2.LlamaStackDistribution, https bool) string {
	scheme := "http"
	if https {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s.%s.svc.cluster.local:%d", scheme, llsd.ServiceName(l), l.Namespace, llsd.Port(l))
}
