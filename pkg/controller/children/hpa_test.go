package children

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

func wantUtilization(name corev1.ResourceName, percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name: name,
			Target: autoscalingv2.MetricTarget{
				Type:               autoscalingv2.UtilizationMetricType,
				AverageUtilization: ptr.To(percent),
			},
		},
	}
}

func TestNewHPA(t *testing.T) {
	tests := map[string]struct {
		replicas    int32
		autoscaling v1alpha1.AutoscalingSpec
		wantMin     int32
		wantMax     int32
		wantMetrics []autoscalingv2.MetricSpec
	}{
		"no target defaults to cpu 80": {
			replicas:    1,
			autoscaling: v1alpha1.AutoscalingSpec{MaxReplicas: 5},
			wantMin:     1,
			wantMax:     5,
			wantMetrics: []autoscalingv2.MetricSpec{wantUtilization(corev1.ResourceCPU, 80)},
		},
		"cpu only": {
			replicas:    1,
			autoscaling: v1alpha1.AutoscalingSpec{MaxReplicas: 5, TargetCPUUtilizationPercentage: ptr.To(int32(60))},
			wantMin:     1,
			wantMax:     5,
			wantMetrics: []autoscalingv2.MetricSpec{wantUtilization(corev1.ResourceCPU, 60)},
		},
		"memory only, no default cpu": {
			replicas:    1,
			autoscaling: v1alpha1.AutoscalingSpec{MaxReplicas: 5, TargetMemoryUtilizationPercentage: ptr.To(int32(70))},
			wantMin:     1,
			wantMax:     5,
			wantMetrics: []autoscalingv2.MetricSpec{wantUtilization(corev1.ResourceMemory, 70)},
		},
		"cpu and memory, cpu first": {
			replicas: 1,
			autoscaling: v1alpha1.AutoscalingSpec{
				MaxReplicas:                       5,
				TargetMemoryUtilizationPercentage: ptr.To(int32(75)),
				TargetCPUUtilizationPercentage:    ptr.To(int32(50)),
			},
			wantMin: 1,
			wantMax: 5,
			wantMetrics: []autoscalingv2.MetricSpec{
				wantUtilization(corev1.ResourceCPU, 50),
				wantUtilization(corev1.ResourceMemory, 75),
			},
		},
		"minReplicas above replicas": {
			replicas:    1,
			autoscaling: v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(3)), MaxReplicas: 8},
			wantMin:     3,
			wantMax:     8,
			wantMetrics: []autoscalingv2.MetricSpec{wantUtilization(corev1.ResourceCPU, 80)},
		},
		"replicas 3 is the floor over a lower minReplicas": {
			replicas:    3,
			autoscaling: v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(2)), MaxReplicas: 10},
			wantMin:     3,
			wantMax:     10,
			wantMetrics: []autoscalingv2.MetricSpec{wantUtilization(corev1.ResourceCPU, 80)},
		},
		"replicas 0 floors at 1": {
			replicas:    0,
			autoscaling: v1alpha1.AutoscalingSpec{MaxReplicas: 3},
			wantMin:     1,
			wantMax:     3,
			wantMetrics: []autoscalingv2.MetricSpec{wantUtilization(corev1.ResourceCPU, 80)},
		},
		"replicas above max clamp to max": {
			replicas:    6,
			autoscaling: v1alpha1.AutoscalingSpec{MaxReplicas: 4},
			wantMin:     4,
			wantMax:     4,
			wantMetrics: []autoscalingv2.MetricSpec{wantUtilization(corev1.ResourceCPU, 80)},
		},
		"minReplicas equal to max": {
			replicas:    1,
			autoscaling: v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(2)), MaxReplicas: 2},
			wantMin:     2,
			wantMax:     2,
			wantMetrics: []autoscalingv2.MetricSpec{wantUtilization(corev1.ResourceCPU, 80)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := childTestCR(func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Replicas = tc.replicas
				l.Spec.Server.Autoscaling = tc.autoscaling.DeepCopy()
			})
			before := l.DeepCopy()

			got := NewHPA(hub(l))

			// No behavior, and the instance label set (upstream left it empty).
			want := &autoscalingv2.HorizontalPodAutoscaler{
				TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
				ObjectMeta: wantChildMeta("demo-hpa"),
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
					ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "demo"},
					MinReplicas:    ptr.To(tc.wantMin),
					MaxReplicas:    tc.wantMax,
					Metrics:        tc.wantMetrics,
				},
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("newHPA() mismatch (-want +got):\n%s", d)
			}
			assert.LessOrEqual(t, *got.Spec.MinReplicas, got.Spec.MaxReplicas, "the HPA must be valid")
			assert.Equal(t, tc.wantMin, HPAMinReplicas(hub(l)))

			// Pointers in the child are its own.
			a := l.Spec.Server.Autoscaling
			if a.MinReplicas != nil {
				assert.NotSame(t, a.MinReplicas, got.Spec.MinReplicas)
			}
			for _, m := range got.Spec.Metrics {
				assert.NotSame(t, a.TargetCPUUtilizationPercentage, m.Resource.Target.AverageUtilization)
				assert.NotSame(t, a.TargetMemoryUtilizationPercentage, m.Resource.Target.AverageUtilization)
				*m.Resource.Target.AverageUtilization = 1
			}
			*got.Spec.MinReplicas = 99
			assert.Equal(t, before, l, "the CR must not be mutated")
		})
	}
}

func TestHPAMinReplicas(t *testing.T) {
	tests := map[string]struct {
		replicas    int32
		autoscaling *v1alpha1.AutoscalingSpec
		want        int32
	}{
		"no autoscaling, replicas 0":    {replicas: 0, autoscaling: nil, want: 1},
		"no autoscaling, replicas 4":    {replicas: 4, autoscaling: nil, want: 4},
		"minReplicas wins":              {replicas: 2, autoscaling: &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(5)), MaxReplicas: 9}, want: 5},
		"replicas win":                  {replicas: 7, autoscaling: &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(5)), MaxReplicas: 9}, want: 7},
		"replicas clamped to max":       {replicas: 12, autoscaling: &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(5)), MaxReplicas: 9}, want: 9},
		"floor of 1 without minimum":    {replicas: 0, autoscaling: &v1alpha1.AutoscalingSpec{MaxReplicas: 9}, want: 1},
		"unset max does not clamp to 0": {replicas: 3, autoscaling: &v1alpha1.AutoscalingSpec{}, want: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := childTestCR(func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Replicas = tc.replicas
				l.Spec.Server.Autoscaling = tc.autoscaling
			})
			before := l.DeepCopy()
			assert.Equal(t, tc.want, HPAMinReplicas(hub(l)))
			assert.Equal(t, before, l, "the CR must not be mutated")
		})
	}
}
