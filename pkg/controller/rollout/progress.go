package rollout

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// DeploymentCondition returns the Deployment's condition of that type, or nil.
func DeploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// Progress is the Progressing condition: whether the Deployment has rolled out
// its current spec to every replica, as kubectl rollout status tells it. pod is why a
// pod of the current ReplicaSet does not start, if one is stuck: while rolling out,
// Progressing stays True but takes the pod's reason, its message first. The old pods
// may still serve (DeploymentReady stays True), and this is where the CR names what
// holds the rollout up before its progress deadline.
func Progress(d *appsv1.Deployment, pod *PodProblem) (metav1.ConditionStatus, string, string) {
	if d.Status.ObservedGeneration < d.Generation {
		// A new spec: whatever the status says is about the one before.
		return metav1.ConditionTrue, v1alpha2.ReasonRollingOut, "Deployment rollout is starting"
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == v1alpha2.ReasonProgressDeadlineExceeded {
			return metav1.ConditionFalse, v1alpha2.ReasonProgressDeadlineExceeded, "Deployment rollout stopped making progress: " + c.Message
		}
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	switch {
	case s.UpdatedReplicas < want || s.Replicas > s.UpdatedReplicas || s.AvailableReplicas < s.UpdatedReplicas:
		msg := fmt.Sprintf("Deployment is rolling out: %d of %d replicas updated and available", min(s.UpdatedReplicas, s.AvailableReplicas), want)
		for _, c := range s.Conditions {
			if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
				msg += fmt.Sprintf("; it cannot create pods (%s): %s", c.Reason, c.Message)
			}
		}
		if pod != nil {
			return metav1.ConditionTrue, pod.Reason, pod.Message + "; " + msg
		}
		return metav1.ConditionTrue, v1alpha2.ReasonRollingOut, msg
	}
	return metav1.ConditionTrue, v1alpha2.ReasonRolloutComplete, "Deployment has rolled out"
}
