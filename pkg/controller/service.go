package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// servicePortName names the one port of the server Service.
const servicePortName = "http"

// newService builds the ClusterIP Service in front of the server pods. It always exists.
func newService(l *v1alpha2.LlamaStackDistribution) *corev1.Service {
	p := port(l)
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Service"},
		ObjectMeta: childObjectMeta(l, serviceName(l)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selectorLabels(l),
			Ports: []corev1.ServicePort{{
				Name:       servicePortName,
				Port:       p,
				TargetPort: intstr.FromInt32(p),
				Protocol:   corev1.ProtocolTCP,
			}},
		},
	}
}

// serviceURL is the in-cluster URL of the server, as reported in status.serviceURL.
func serviceURL(l *v1alpha2.LlamaStackDistribution) string {
	return fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", serviceName(l), l.Namespace, port(l))
}
