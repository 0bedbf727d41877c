// Package podtest makes the pod statuses the kubelet and the scheduler write, for the
// tests of the controller's packages.
package podtest

import corev1 "k8s.io/api/core/v1"

// Kubelet and scheduler messages, as Kubernetes 1.37 writes them.
const (
	SecretMissing    = `secret "vllm-key" not found`
	KeyMissing       = `couldn't find key token in Secret demo/vllm-key`
	PullErrMsg       = `rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/llamastack/nope:1": not found`
	UnschedulableMsg = `0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.`
)

// Waiting is a container status waiting for reason.
func Waiting(name, reason, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
}

// CrashLooping is the server container crash-looping, in its back-off.
func CrashLooping(backoff string) corev1.ContainerStatus {
	s := Waiting("llama-stack", "CrashLoopBackOff", "back-off "+backoff+" restarting failed container=llama-stack pod=app-1_demo(uid)")
	s.RestartCount = 3
	s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "ModuleNotFoundError: no module named llama_stack\n"}
	return s
}

// Unschedulable makes p one the scheduler cannot place.
func Unschedulable(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: UnschedulableMsg}}
}

// WithContainers gives a pod these container statuses.
func WithContainers(statuses ...corev1.ContainerStatus) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.ContainerStatuses = statuses }
}

// WithInitContainers gives a pod these init container statuses.
func WithInitContainers(statuses ...corev1.ContainerStatus) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.InitContainerStatuses = statuses }
}
