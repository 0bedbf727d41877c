package children

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// ServicePortName names the one port of the server Service; ServicePortNameTLS when
// the server serves HTTPS, which the port's appProtocol says too (for Ingress
// controllers and meshes that read it).
const (
	ServicePortName    = "http"
	ServicePortNameTLS = "https"
)

// NewService builds the ClusterIP Service in front of the server pods. It always exists.
// For a server version that serves metrics (servermetrics.go) it has a second port,
// named metrics.
func NewService(l *v1alpha2.LlamaStackDistribution, s Listening) *corev1.Service {
	sp := corev1.ServicePort{Name: ServicePortName, Port: llsd.Port(l), TargetPort: intstr.FromInt32(s.Port), Protocol: corev1.ProtocolTCP}
	if s.HTTPS {
		sp.Name, sp.AppProtocol = ServicePortNameTLS, ptr.To("https")
	}
	ports := []corev1.ServicePort{sp}
	if s.Metrics {
		ports = append(ports, MetricsServicePort())
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

// ServiceURL is the in-cluster URL of the server, as reported in status.serviceURL:
// https when the server serves it.
func ServiceURL(l *v1alpha2.LlamaStackDistribution, https bool) string {
	scheme := "http"
	if https {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s.%s.svc.cluster.local:%d", scheme, llsd.ServiceName(l), l.Namespace, llsd.Port(l))
}
