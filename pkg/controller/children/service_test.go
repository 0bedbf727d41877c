package children

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

func TestNewService(t *testing.T) {
	tests := map[string]struct {
		mod      func(*v1alpha1.LlamaStackDistribution)
		wantPort int32
	}{
		"default port": {
			mod:      func(*v1alpha1.LlamaStackDistribution) {},
			wantPort: 8321,
		},
		"custom port": {
			mod:      func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Port = 9000 },
			wantPort: 9000,
		},
		"container name and replicas do not matter": {
			mod: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.Name = "server"
				l.Spec.Replicas = 4
			},
			wantPort: 8321,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := childTestCR(tc.mod)
			before := l.DeepCopy()

			got := NewService(hub(l), AskedListening(hub(l), ""))

			want := &corev1.Service{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
				ObjectMeta: wantChildMeta("demo-service"),
				Spec: corev1.ServiceSpec{
					Type:     corev1.ServiceTypeClusterIP,
					Selector: childTestSelector(),
					Ports: []corev1.ServicePort{{
						Name:       "http",
						Port:       tc.wantPort,
						TargetPort: intstr.FromInt32(tc.wantPort),
						Protocol:   corev1.ProtocolTCP,
					}},
				},
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("newService() mismatch (-want +got):\n%s", d)
			}
			assert.Equal(t, before, l, "the CR must not be mutated")
		})
	}
}

func TestServiceURL(t *testing.T) {
	tests := map[string]struct {
		mod  func(*v1alpha1.LlamaStackDistribution)
		want string
	}{
		"default port": {
			mod:  func(*v1alpha1.LlamaStackDistribution) {},
			want: "http://demo-service.team-a.svc.cluster.local:8321",
		},
		"custom port, name and namespace": {
			mod: func(l *v1alpha1.LlamaStackDistribution) {
				l.Name, l.Namespace = "llsd", "prod"
				l.Spec.Server.ContainerSpec.Port = 443
			},
			want: "http://llsd-service.prod.svc.cluster.local:443",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, ServiceURL(hub(childTestCR(tc.mod)), false))
			assert.Equal(t, "https"+strings.TrimPrefix(tc.want, "http"), ServiceURL(hub(childTestCR(tc.mod)), true))
		})
	}
}
