package rollout

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// ReplicaSetSelector selects the ReplicaSets of server Deployments: their pod template
// carries the selector labels, of which app=llama-stack is common to every CR.
func ReplicaSetSelector() string {
	return labels.SelectorFromSet(labels.Set{llsd.LabelApp: llsd.LabelAppValue}).String()
}

// TransformReplicaSet is the informer transform of the ReplicaSet cache: it keeps of a
// ReplicaSet its identity, labels, owner references, its revision, and the ConfigMap
// volumes and config hash of its pod template, the only things the controller reads
// (which generated ConfigMaps are still in use, which ReplicaSet is the current one:
// PodProblemFor, and whether going back to one restores its config: unrestorable).
func TransformReplicaSet(obj any) (any, error) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return children.TransformStripManagedFields(obj)
	}
	out := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Name: rs.Name, Namespace: rs.Namespace, UID: rs.UID, ResourceVersion: rs.ResourceVersion,
		Labels: rs.Labels, OwnerReferences: rs.OwnerReferences, DeletionTimestamp: rs.DeletionTimestamp,
	}}
	if rev, ok := rs.Annotations[RevisionAnnotation]; ok {
		out.Annotations = map[string]string{RevisionAnnotation: rev}
	}
	if h, ok := rs.Spec.Template.Annotations[llsd.AnnotationUserConfigHash]; ok {
		out.Spec.Template.Annotations = map[string]string{llsd.AnnotationUserConfigHash: h}
	}
	for _, v := range rs.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil || v.Projected != nil {
			out.Spec.Template.Spec.Volumes = append(out.Spec.Template.Spec.Volumes, v)
		}
	}
	return out, nil
}

// PodSelector selects the server pods: the label their template carries and the
// ReplicaSets' selector selects (app=llama-stack, common to every CR).
func PodSelector() string {
	return ReplicaSetSelector()
}

// TransformPod is the informer transform of the Pod cache: it keeps of a pod its
// identity, the CR's instance label, its controller reference, its creation and
// deletion times, its phase, its PodScheduled condition, and of each (init) container
// its name, readiness, restart count and the reasons and messages of its waiting and terminated
// states: the only things ProblemOf reads. The spec is dropped whole.
func TransformPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return children.TransformStripManagedFields(obj)
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, ResourceVersion: p.ResourceVersion,
		CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
	}}
	if v, ok := p.Labels[llsd.LabelInstance]; ok {
		out.Labels = map[string]string{llsd.LabelInstance: v}
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	out.Status.Phase = p.Status.Phase
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}}
		}
	}
	out.Status.InitContainerStatuses = slimContainerStatuses(p.Status.InitContainerStatuses)
	out.Status.ContainerStatuses = slimContainerStatuses(p.Status.ContainerStatuses)
	return out, nil
}

func slimContainerStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, s := range in {
		out[i] = corev1.ContainerStatus{Name: s.Name, Ready: s.Ready, RestartCount: s.RestartCount}
		if w := s.State.Waiting; w != nil {
			out[i].State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		}
		if s.State.Running != nil {
			out[i].State.Running = &corev1.ContainerStateRunning{}
		}
		out[i].State.Terminated = slimTerminated(s.State.Terminated)
		out[i].LastTerminationState.Terminated = slimTerminated(s.LastTerminationState.Terminated)
	}
	return out
}

func slimTerminated(t *corev1.ContainerStateTerminated) *corev1.ContainerStateTerminated {
	if t == nil {
		return nil
	}
	return &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason, Message: t.Message}
}
