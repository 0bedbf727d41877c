package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/podtest"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/truncate"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestPodProblemOf(t *testing.T) {
	ready := corev1.ContainerStatus{Name: "llama-stack", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	prefix := "pod app-1: container llama-stack: "
	for name, tc := range map[string]struct {
		mods   []func(*corev1.Pod)
		reason string // "" for no problem
		msg    string
	}{
		"scheduled and starting":   {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "ContainerCreating", ""))}},
		"running and ready":        {mods: []func(*corev1.Pod){podtest.WithContainers(ready)}},
		"not yet scheduled":        {},
		"unschedulable":            {mods: []func(*corev1.Pod){podtest.Unschedulable}, reason: "Unschedulable", msg: "pod app-1: " + podtest.UnschedulableMsg},
		"missing secret":           {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "CreateContainerConfigError", podtest.SecretMissing))}, reason: "CreateContainerConfigError", msg: prefix + podtest.SecretMissing},
		"missing key":              {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "CreateContainerConfigError", podtest.KeyMissing))}, reason: "CreateContainerConfigError", msg: prefix + podtest.KeyMissing},
		"pull attempt":             {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "ErrImagePull", podtest.PullErrMsg))}, reason: "ImagePullBackOff", msg: prefix + "ErrImagePull: " + podtest.PullErrMsg},
		"pull back-off, same text": {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "ImagePullBackOff", `Back-off pulling image "docker.io/llamastack/nope:1": ErrImagePull: `+podtest.PullErrMsg))}, reason: "ImagePullBackOff", msg: prefix + "ErrImagePull: " + podtest.PullErrMsg},
		"pull back-off, no cause":  {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "ImagePullBackOff", `Back-off pulling image "x"`))}, reason: "ImagePullBackOff", msg: prefix + `Back-off pulling image "x"`},
		"registry unavailable":     {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "RegistryUnavailable", "image pull failed for x because the registry is unavailable"))}, reason: "ImagePullBackOff", msg: prefix + "RegistryUnavailable: image pull failed for x because the registry is unavailable"},
		"invalid image name":       {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "InvalidImageName", `Failed to apply default image tag "a b": couldn't parse image name`))}, reason: "InvalidImageName", msg: prefix + `Failed to apply default image tag "a b": couldn't parse image name`},
		"create error":             {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "CreateContainerError", "context deadline exceeded"))}, reason: "CreateContainerError", msg: prefix + "context deadline exceeded"},
		"run error":                {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "RunContainerError", `exec: "llama": executable file not found in $PATH`))}, reason: "RunContainerError", msg: prefix + `exec: "llama": executable file not found in $PATH`},
		"crash loop":               {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.CrashLooping("40s"))}, reason: "CrashLoopBackOff", msg: prefix + "restarting after it exited with code 1 (Error): ModuleNotFoundError: no module named llama_stack"},
		"crash loop, running again between back-offs": {mods: []func(*corev1.Pod){func(p *corev1.Pod) {
			s := podtest.CrashLooping("40s")
			s.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{s}
		}}, reason: "CrashLoopBackOff", msg: prefix + "restarting after it exited with code 1 (Error): ModuleNotFoundError: no module named llama_stack"},
		"crash loop, just exited": {mods: []func(*corev1.Pod){podtest.WithContainers(corev1.ContainerStatus{Name: "llama-stack", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}})}, reason: "CrashLoopBackOff", msg: prefix + "restarting after it exited with code 137 (OOMKilled)"},
		"restarted once, ready again": {mods: []func(*corev1.Pod){func(p *corev1.Pod) {
			s := ready
			s.LastTerminationState = podtest.CrashLooping("10s").LastTerminationState
			p.Status.ContainerStatuses = []corev1.ContainerStatus{s}
		}}},
		"unknown kubelet reason": {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "PreStartHookError", "hook failed"))}, reason: "PreStartHookError", msg: prefix + "hook failed"},
		"reason no condition can hold": {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "Some Reason!", ""))},
			reason: v1alpha2.ReasonPodNotStarting, msg: prefix + "Some Reason!"},
		"init container missing secret": {mods: []func(*corev1.Pod){
			podtest.WithInitContainers(podtest.Waiting("setup", "CreateContainerConfigError", podtest.SecretMissing)),
			podtest.WithContainers(podtest.Waiting("llama-stack", "PodInitializing", "")),
		}, reason: "CreateContainerConfigError", msg: "pod app-1: init container setup: " + podtest.SecretMissing},
		"init container crash loop": {mods: []func(*corev1.Pod){
			podtest.WithInitContainers(func() corev1.ContainerStatus { s := podtest.CrashLooping("20s"); s.Name = "setup"; return s }()),
			podtest.WithContainers(podtest.Waiting("llama-stack", "PodInitializing", "")),
		}, reason: "CrashLoopBackOff", msg: "pod app-1: init container setup: restarting after it exited with code 1 (Error): ModuleNotFoundError: no module named llama_stack"},
		"init container done, server pulling": {mods: []func(*corev1.Pod){
			podtest.WithInitContainers(corev1.ContainerStatus{Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}),
			podtest.WithContainers(podtest.Waiting("llama-stack", "ErrImagePull", podtest.PullErrMsg)),
		}, reason: "ImagePullBackOff", msg: prefix + "ErrImagePull: " + podtest.PullErrMsg},
		"terminating": {mods: []func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "CreateContainerConfigError", podtest.SecretMissing)), func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}}},
		"failed (evicted)": {mods: []func(*corev1.Pod){podtest.Unschedulable, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }}},
	} {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-1", Namespace: "demo"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
			for _, m := range tc.mods {
				m(p)
			}
			// The answer is the same before and after the informer's transform.
			slim, err := TransformPod(p.DeepCopy())
			require.NoError(t, err)
			for _, got := range []*PodProblem{ProblemOf(p), ProblemOf(slim.(*corev1.Pod))} {
				if tc.reason == "" {
					assert.Nil(t, got)
					continue
				}
				require.NotNil(t, got)
				assert.Equal(t, tc.reason, got.Reason)
				assert.Equal(t, tc.msg, got.Message)
			}
		})
	}
}

// The back-off the kubelet waits grows at each restart; the problem stays the same, so
// neither the status nor the queue hears of it.
func TestCrashLoopProblemIgnoresTheBackOff(t *testing.T) {
	p := func(backoff string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{podtest.CrashLooping(backoff)}}}
	}
	assert.Equal(t, ProblemOf(p("10s")), ProblemOf(p("5m0s")))
}

func TestPodProblemMessageIsCut(t *testing.T) {
	long := strings.Repeat("x", 5000)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-1"}, Status: corev1.PodStatus{
		ContainerStatuses: []corev1.ContainerStatus{podtest.Waiting("llama-stack", "CreateContainerError", long)}}}
	got := ProblemOf(p)
	require.NotNil(t, got)
	assert.LessOrEqual(t, len(got.Message), len("pod app-1: container llama-stack: ")+maxPodDetail)
	assert.True(t, strings.HasSuffix(got.Message, truncate.Ellipsis))
}

func TestTransformPod(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	deleted := metav1.NewTime(created.Add(time.Minute))
	started := metav1.NewTime(created.Add(time.Second))
	in := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "app-5d8c-x2x", Namespace: "demo", UID: "pod-uid", ResourceVersion: "42",
			CreationTimestamp: created, DeletionTimestamp: &deleted, GenerateName: "app-5d8c-",
			Labels:      map[string]string{llsd.LabelApp: llsd.LabelAppValue, llsd.LabelInstance: "app", "pod-template-hash": "5d8c"},
			Annotations: map[string]string{"configmap.hash/user-config": "abc"},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "Node", Name: "other", UID: "n"},
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app-5d8c", UID: "rs-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.PodSpec{NodeName: "kwok-node-0", Containers: []corev1.Container{{Name: "llama-stack", Image: "img",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.1", HostIP: "10.1.0.1", StartTime: &started, QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: started},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "setup", Ready: true, RestartCount: 0, Image: "init", ImageID: "sha", ContainerID: "c1",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: started, ContainerID: "c1"}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "llama-stack", RestartCount: 4, Image: "img", ImageID: "sha", ContainerID: "c2", Started: ptr.To(false),
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 1m20s"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "boom", Signal: 0, StartedAt: started, FinishedAt: started, ContainerID: "c2"}},
			}},
		},
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "app-5d8c-x2x", Namespace: "demo", ResourceVersion: "42", CreationTimestamp: created, DeletionTimestamp: &deleted,
			Labels:          map[string]string{llsd.LabelInstance: "app"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app-5d8c", UID: "rs-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "setup", Ready: true,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "llama-stack", RestartCount: 4,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 1m20s"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "boom"}},
			}},
		},
	}
	orig := in.DeepCopy()
	got, err := TransformPod(in)
	require.NoError(t, err)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("TransformPod (-want +got):\n%s", d)
	}
	assert.Equal(t, orig, in, "the input is not changed")

	// Not a pod (a tombstone's object is transformed already): passed on stripped.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "x"}}
	cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	out, err := TransformPod(cm)
	require.NoError(t, err)
	assert.Empty(t, out.(*corev1.ConfigMap).ManagedFields)
}

func TestStableNetError(t *testing.T) {
	for in, want := range map[string]string{
		"read tcp 10.2.0.49:42728->23.20.95.219:443: read: connection reset by peer": "read tcp 23.20.95.219:443: read: connection reset by peer",
		"write tcp6 [fd00::1]:4000->[2001:db8::1]:443: broken pipe":                  "write tcp6 [2001:db8::1]:443: broken pipe",
		"dial tcp 23.20.95.219:443: i/o timeout":                                     "dial tcp 23.20.95.219:443: i/o timeout",
		"image x->y not found":                                                       "image x->y not found",
	} {
		assert.Equal(t, want, stableNetError(in), in)
	}
}
