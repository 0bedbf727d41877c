package children

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// childTestCR is a CR for the child builder tests. It carries labels and annotations of its
// own, which must not reach the
func childTestCR(mods ...func(*v1alpha1.LlamaStackDistribution)) *v1alpha1.LlamaStackDistribution {
	// No TypeMeta, as objects from a lister: the owner reference must not depend on it.
	l := &v1alpha1.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "demo",
			Namespace:   "team-a",
			UID:         types.UID("0b0c6f3e-uid"),
			Generation:  4,
			Labels:      map[string]string{"owner": "alice"},
			Annotations: map[string]string{"note": "cr only"},
		},
		Spec: v1alpha1.LlamaStackDistributionSpec{
			Replicas: 1,
			Server: v1alpha1.ServerSpec{
				Distribution: v1alpha1.DistributionType{Name: "starter"},
			},
		},
	}
	for _, mod := range mods {
		mod(l)
	}
	return l
}

// childTestSelector is the pod selector of childTestCR, spelled out.
func childTestSelector() map[string]string {
	return map[string]string{"app": "llama-stack", "app.kubernetes.io/instance": "demo"}
}

// wantChildMeta is the metadata every child of childTestCR must carry, spelled out rather
// than computed with the helpers under test.
func wantChildMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: "team-a",
		Labels: map[string]string{
			"app":                          "llama-stack",
			"app.kubernetes.io/instance":   "demo",
			"app.kubernetes.io/managed-by": "llama-stack-operator",
			"app.kubernetes.io/part-of":    "llama-stack",
		},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion:         "llamastack.io/v1alpha1",
			Kind:               "LlamaStackDistribution",
			Name:               "demo",
			UID:                types.UID("0b0c6f3e-uid"),
			Controller:         ptr.To(true),
			BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

// everything sets every optional field a builder reads, so the common rules are checked
// on the fullest objects.
func everything(l *v1alpha1.LlamaStackDistribution) {
	l.Spec.Replicas = 3
	l.Spec.Server.ContainerSpec.Port = 9000
	l.Spec.Server.Storage = &v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("20Gi"))}
	l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{
		MinReplicas:                       ptr.To(int32(2)),
		MaxReplicas:                       6,
		TargetCPUUtilizationPercentage:    ptr.To(int32(60)),
		TargetMemoryUtilizationPercentage: ptr.To(int32(70)),
	}
	l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))}
	l.Spec.Network = &v1alpha1.NetworkSpec{
		ExposeRoute: true,
		AllowedFrom: &v1alpha1.AllowedFromSpec{Namespaces: []string{"other"}, Labels: []v1alpha1.LabelKey{"team/ok"}},
	}
}

func TestChildObjectMetadata(t *testing.T) {
	type built struct {
		typeMeta   metav1.TypeMeta
		objectMeta metav1.ObjectMeta
		status     any
	}
	tests := map[string]struct {
		build          func(*v1alpha1.LlamaStackDistribution) built
		wantAPIVersion string
		wantKind       string
		wantName       string
	}{
		"service": {
			build: func(l *v1alpha1.LlamaStackDistribution) built {
				o := NewService(hub(l), AskedListening(hub(l), ""))
				return built{o.TypeMeta, o.ObjectMeta, o.Status}
			},
			wantAPIVersion: "v1", wantKind: "Service", wantName: "demo-service",
		},
		"pvc": {
			build: func(l *v1alpha1.LlamaStackDistribution) built {
				o := NewPVC(hub(l))
				return built{o.TypeMeta, o.ObjectMeta, o.Status}
			},
			wantAPIVersion: "v1", wantKind: "PersistentVolumeClaim", wantName: "demo-pvc",
		},
		"hpa": {
			build: func(l *v1alpha1.LlamaStackDistribution) built {
				o := NewHPA(hub(l))
				return built{o.TypeMeta, o.ObjectMeta, o.Status}
			},
			wantAPIVersion: "autoscaling/v2", wantKind: "HorizontalPodAutoscaler", wantName: "demo-hpa",
		},
		"pdb": {
			build: func(l *v1alpha1.LlamaStackDistribution) built {
				o := NewPDB(hub(l))
				return built{o.TypeMeta, o.ObjectMeta, o.Status}
			},
			wantAPIVersion: "policy/v1", wantKind: "PodDisruptionBudget", wantName: "demo-pdb",
		},
		"ingress": {
			build: func(l *v1alpha1.LlamaStackDistribution) built {
				o := NewIngress(hub(l))
				return built{o.TypeMeta, o.ObjectMeta, o.Status}
			},
			wantAPIVersion: "networking.k8s.io/v1", wantKind: "Ingress", wantName: "demo-ingress",
		},
		"network policy": {
			build: func(l *v1alpha1.LlamaStackDistribution) built {
				o := NewNetworkPolicy(hub(l), "llama-stack-controller-system", AskedListening(hub(l), ""))
				return built{o.TypeMeta, o.ObjectMeta, nil}
			},
			wantAPIVersion: "networking.k8s.io/v1", wantKind: "NetworkPolicy", wantName: "demo-network-policy",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := childTestCR(everything)
			before := l.DeepCopy()

			got := tc.build(l)

			assert.Equal(t, metav1.TypeMeta{APIVersion: tc.wantAPIVersion, Kind: tc.wantKind}, got.typeMeta)
			// Whole-struct equality: no annotations, no CR labels, nothing server-assigned.
			assert.Equal(t, wantChildMeta(tc.wantName), got.objectMeta)
			if got.status != nil {
				assert.Zero(t, got.status)
			}
			assert.Equal(t, before, l, "the CR must not be mutated")

			// The labels are the builder's own: changing them leaves a second build untouched.
			got.objectMeta.Labels["app"] = "changed"
			assert.Equal(t, wantChildMeta(tc.wantName), tc.build(l).objectMeta)
			assert.Equal(t, before, l, "the CR must not share maps with its children")
		})
	}
}

func TestChildObjectMetaHelper(t *testing.T) {
	tests := map[string]struct {
		cr       *v1alpha1.LlamaStackDistribution
		name     string
		wantMeta metav1.ObjectMeta
	}{
		"test CR": {
			cr:       childTestCR(),
			name:     "demo-x",
			wantMeta: wantChildMeta("demo-x"),
		},
		"other name and namespace": {
			cr: childTestCR(func(l *v1alpha1.LlamaStackDistribution) {
				l.Name, l.Namespace, l.UID = "other", "ns-b", "uid-2"
			}),
			name: "other-service",
			wantMeta: metav1.ObjectMeta{
				Name:      "other-service",
				Namespace: "ns-b",
				Labels: map[string]string{
					"app":                          "llama-stack",
					"app.kubernetes.io/instance":   "other",
					"app.kubernetes.io/managed-by": "llama-stack-operator",
					"app.kubernetes.io/part-of":    "llama-stack",
				},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion:         "llamastack.io/v1alpha1",
					Kind:               "LlamaStackDistribution",
					Name:               "other",
					UID:                "uid-2",
					Controller:         ptr.To(true),
					BlockOwnerDeletion: ptr.To(true),
				}},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := llsd.ChildObjectMeta(hub(tc.cr), tc.name)
			assert.Equal(t, tc.wantMeta, got)
			require.Len(t, got.OwnerReferences, 1)
			assert.True(t, metav1.IsControlledBy(&corev1.ConfigMap{ObjectMeta: got}, tc.cr))
		})
	}
}
