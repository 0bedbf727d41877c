//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// TestStuckPodsAreReported: why a server pod does not start reaches the CR, in the
// pod's own words. (a) The real scheduler finds no node for a pod asking for more CPU
// than any node has (kwok's nodes have 32): Unschedulable, with the scheduler's
// message. (b) A pod whose env refers to a Secret that does not exist: kwok runs no
// containers, so the test plays the kubelet, writing the pod's status as the kubelet
// does (Running, not ready, the container waiting with CreateContainerConfigError):
// the CR reports it with one Warning Event, and is Ready again once the pod is. (c) A
// rollout of that CR whose new pod is unschedulable: Ready stays, Progressing names it.
func TestStuckPodsAreReported(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)

	// (a) Unschedulable, for real.
	create(t, llsd(ns, "big", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}}
	}))
	l := waitCondition(t, ns, "big", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable)
	assert.Equal(t, v1alpha1.PhaseFailed, l.Status.Phase)
	dr := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionDeploymentReady)
	require.NotNil(t, dr)
	assert.Equal(t, v1alpha1.ReasonUnschedulable, dr.Reason)
	assert.Regexp(t, `^pod big-[a-z0-9]+-[a-z0-9]+: 0/\d+ nodes are available: .*Insufficient cpu`, dr.Message)
	eventually(t, 30*time.Second, "a Warning Event Unschedulable on the CR", func(ctx context.Context) (bool, error) {
		return countCREvents(ctx, ns, "big", corev1.EventTypeWarning, v1alpha1.ReasonUnschedulable) >= 1, nil
	})

	// (b) A missing Secret, told by the kubelet (played here).
	const secretMsg = `secret "vllm-key" not found`
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "VLLM_API_TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "vllm-key"}, Key: "token"}}}}
	}))
	waitReady(t, ns, "app")
	pod := serverPod(t, ns, "app")
	setPodStatus(t, ns, pod, func(p *corev1.Pod) {
		// Running (kwok's pod-ready stage takes back a Pending pod), not ready.
		p.Status.Phase = corev1.PodRunning
		setPodCondition(p, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady")
		setPodCondition(p, corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady")
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Ready = false
			p.Status.ContainerStatuses[i].Started = nil
			p.Status.ContainerStatuses[i].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "CreateContainerConfigError", Message: secretMsg}}
		}
	})
	l = waitCondition(t, ns, "app", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonCreateContainerConfigError)
	assert.Equal(t, v1alpha1.PhaseFailed, l.Status.Phase)
	dr = meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionDeploymentReady)
	require.NotNil(t, dr)
	assert.Equal(t, v1alpha1.ReasonCreateContainerConfigError, dr.Reason)
	assert.Equal(t, "pod "+pod+": container llama-stack: "+secretMsg, dr.Message)
	eventually(t, 30*time.Second, "a Warning Event CreateContainerConfigError on the CR", func(ctx context.Context) (bool, error) {
		return countCREvents(ctx, ns, "app", corev1.EventTypeWarning, v1alpha1.ReasonCreateContainerConfigError) >= 1, nil
	})

	// The Secret made, the kubelet starts the container.
	setPodStatus(t, ns, pod, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		setPodCondition(p, corev1.PodReady, corev1.ConditionTrue, "")
		setPodCondition(p, corev1.ContainersReady, corev1.ConditionTrue, "")
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Ready = true
			p.Status.ContainerStatuses[i].Started = ptr.To(true)
			p.Status.ContainerStatuses[i].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
		}
	})
	l = waitReady(t, ns, "app")
	assert.Equal(t, v1alpha1.ReasonReady, meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionReady).Reason)
	settle(t)
	assert.Equal(t, int32(1), countCREvents(ctx, ns, "app", corev1.EventTypeWarning, v1alpha1.ReasonCreateContainerConfigError), "one Warning for the one problem")
	assert.Equal(t, int32(1), countCREvents(ctx, ns, "big", corev1.EventTypeWarning, v1alpha1.ReasonUnschedulable), "one Warning for the one problem")

	// (c) A rollout whose new pod does not start while the old one serves, for real: the
	// serving CR edited to ask for more CPU than any node has. It stays Ready; Progressing
	// names the new pod's problem, with one Warning. (A missing Secret would be the same
	// path, but kwok makes the new pod ready before the test could play the kubelet.)
	edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}}
	})
	l = waitCondition(t, ns, "app", v1alpha1.ConditionProgressing, metav1.ConditionTrue, v1alpha1.ReasonUnschedulable)
	assert.Regexp(t, `^pod app-[a-z0-9]+-[a-z0-9]+: 0/\d+ nodes are available: .*Insufficient cpu.*; Deployment is rolling out: `,
		meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionProgressing).Message)
	assert.Equal(t, v1alpha1.PhaseReady, l.Status.Phase, "the old pod serves")
	assert.Equal(t, metav1.ConditionTrue, meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionReady).Status)
	assert.Equal(t, metav1.ConditionTrue, meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionDeploymentReady).Status)
	eventually(t, 30*time.Second, "a Warning Event Unschedulable on the rolling CR", func(ctx context.Context) (bool, error) {
		return countCREvents(ctx, ns, "app", corev1.EventTypeWarning, v1alpha1.ReasonUnschedulable) >= 1, nil
	})
	settle(t)
	assert.Equal(t, int32(1), countCREvents(ctx, ns, "app", corev1.EventTypeWarning, v1alpha1.ReasonUnschedulable), "one Warning for the one problem")
	assert.Equal(t, v1alpha1.PhaseReady, get(t, ns, "app").Status.Phase)
}

// serverPod returns the name of the CR's one pod that is not terminating.
func serverPod(t *testing.T, ns, name string) string {
	t.Helper()
	var pod string
	eventually(t, 30*time.Second, "one server pod of "+name, func(ctx context.Context) (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + name})
		if err != nil {
			return false, err
		}
		var names []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		if len(names) != 1 {
			return false, nil
		}
		pod = names[0]
		return true, nil
	})
	require.True(t, strings.HasPrefix(pod, name+"-"))
	return pod
}

// setPodStatus writes the pod's status as the kubelet would, retrying on conflicts.
func setPodStatus(t *testing.T, ns, name string, edit func(*corev1.Pod)) {
	t.Helper()
	eventually(t, 10*time.Second, "the status of pod "+name+" is written", func(ctx context.Context) (bool, error) {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		edit(p)
		_, err = env.kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

func setPodCondition(p *corev1.Pod, t corev1.PodConditionType, status corev1.ConditionStatus, reason string) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason = status, reason
			p.Status.Conditions[i].LastTransitionTime = metav1.Now()
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: metav1.Now()})
}
