package children

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// NewHPA builds the HorizontalPodAutoscaler of the server Deployment. Call it only when
// spec.workload.autoscaling is set.
func NewHPA(l *v1alpha2.LlamaStackDistribution) *autoscalingv2.HorizontalPodAutoscaler {
	var a v1alpha2.AutoscalingSpec
	if l.Spec.Workload.Autoscaling != nil {
		a = *l.Spec.Workload.Autoscaling
	}

	var metrics []autoscalingv2.MetricSpec
	if a.TargetCPUUtilizationPercentage != nil {
		metrics = append(metrics, utilizationMetric(corev1.ResourceCPU, *a.TargetCPUUtilizationPercentage))
	}
	if a.TargetMemoryUtilizationPercentage != nil {
		metrics = append(metrics, utilizationMetric(corev1.ResourceMemory, *a.TargetMemoryUtilizationPercentage))
	}
	if len(metrics) == 0 {
		metrics = append(metrics, utilizationMetric(corev1.ResourceCPU, llsd.DefaultCPUTarget))
	}

	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: autoscalingv2.SchemeGroupVersion.String(), Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: llsd.ChildObjectMeta(l, llsd.HPAName(l)),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
				APIVersion: "apps/v1",
				Kind:       "Deployment",
				Name:       llsd.DeploymentName(l),
			},
			MinReplicas: ptr.To(HPAMinReplicas(l)),
			MaxReplicas: a.MaxReplicas,
			Metrics:     metrics,
		},
	}
}

// HPAMinReplicas is the HPA's lower bound: the largest of 1, workload.replicas and
// autoscaling.minReplicas, lowered to autoscaling.maxReplicas if it is above it, so that the
// HPA is always valid.
func HPAMinReplicas(l *v1alpha2.LlamaStackDistribution) int32 {
	m := max(1, llsd.SpecReplicas(l))
	a := l.Spec.Workload.Autoscaling
	if a == nil {
		return m
	}
	if a.MinReplicas != nil {
		m = max(m, *a.MinReplicas)
	}
	if a.MaxReplicas >= 1 {
		m = min(m, a.MaxReplicas)
	}
	return m
}

// utilizationMetric targets an average utilization, in percent of the requests, of a resource.
func utilizationMetric(name corev1.ResourceName, percent int32) autoscalingv2.MetricSpec {
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
