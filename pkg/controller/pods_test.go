package controller

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/podtest"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// podFixture is a CR "app" converged, with its Deployment's ReplicaSets and pods
// managed by the test as the Deployment and ReplicaSet controllers and the kubelet would.
type podFixture struct {
	*fixture
	dep *appsv1.Deployment
}

func newPodFixture(t *testing.T) *podFixture {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	f.events()
	// The Deployment controller's revision, and a UID the fake does not give.
	f.updateDeployment("app", "kube-controller-manager", func(d *appsv1.Deployment) {
		d.UID = "dep-uid"
		d.Annotations = map[string]string{rollout.RevisionAnnotation: "1"}
	})
	f.setDeploymentStatus("app", notAvailable)
	pf := &podFixture{fixture: f, dep: f.deployment("app")}
	pf.replicaSet("app-1111", "1", pf.dep.UID)
	return pf
}

// notAvailable is the Deployment's status while its one pod does not start.
func notAvailable(d *appsv1.Deployment) {
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}}}
}

func (f *podFixture) replicaSet(name, revision string, owner types.UID) {
	f.t.Helper()
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: testNamespace, UID: types.UID(name + "-uid"),
		Labels:      map[string]string{llsd.LabelApp: llsd.LabelAppValue, llsd.LabelInstance: "app"},
		Annotations: map[string]string{rollout.RevisionAnnotation: revision},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "app", UID: owner,
			Controller: ptr.To(true)}},
	}}
	_, err := f.kubeclient.AppsV1().ReplicaSets(testNamespace).Create(f.ctx, rs, metav1.CreateOptions{})
	require.NoError(f.t, err)
	f.refreshCaches()
}

// pod creates or replaces a pod of the ReplicaSet rs.
func (f *podFixture) pod(name, rs string, age time.Duration, mods ...func(*corev1.Pod)) {
	f.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace,
			CreationTimestamp: metav1.NewTime(time.Now().Add(-age).Truncate(time.Second)),
			Labels:            map[string]string{llsd.LabelApp: llsd.LabelAppValue, llsd.LabelInstance: "app"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID(rs + "-uid"),
				Controller: ptr.To(true)}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, m := range mods {
		m(p)
	}
	pods := f.kubeclient.CoreV1().Pods(testNamespace)
	if _, err := pods.Get(f.ctx, name, metav1.GetOptions{}); err == nil {
		_, err = pods.Update(f.ctx, p, metav1.UpdateOptions{})
		require.NoError(f.t, err)
	} else {
		_, err = pods.Create(f.ctx, p, metav1.CreateOptions{})
		require.NoError(f.t, err)
	}
	f.refreshCaches()
}

// TestStuckPodReachesTheStatus: for each cause, a pod of the current ReplicaSet that
// does not start makes the CR Failed with the pod's reason and the kubelet's or the
// scheduler's words on DeploymentReady and Ready, with one Warning Event; a sync
// without a change sends nothing; once the pod runs the CR is Ready again.
func TestStuckPodReachesTheStatus(t *testing.T) {
	for name, tc := range map[string]struct {
		mods   []func(*corev1.Pod)
		reason string
		msg    string
	}{
		"missing secret": {[]func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "CreateContainerConfigError", podtest.SecretMissing))},
			v1alpha2.ReasonCreateContainerConfigError, "pod app-1111-a: container llama-stack: " + podtest.SecretMissing},
		"missing key": {[]func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "CreateContainerConfigError", podtest.KeyMissing))},
			v1alpha2.ReasonCreateContainerConfigError, "pod app-1111-a: container llama-stack: " + podtest.KeyMissing},
		"image": {[]func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "ImagePullBackOff", `Back-off pulling image "x": ErrImagePull: `+podtest.PullErrMsg))},
			v1alpha2.ReasonImagePullBackOff, "pod app-1111-a: container llama-stack: ErrImagePull: " + podtest.PullErrMsg},
		"invalid image": {[]func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "InvalidImageName", "couldn't parse image name"))},
			v1alpha2.ReasonInvalidImageName, "pod app-1111-a: container llama-stack: couldn't parse image name"},
		"create": {[]func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "CreateContainerError", "name already in use"))},
			v1alpha2.ReasonCreateContainerError, "pod app-1111-a: container llama-stack: name already in use"},
		"run": {[]func(*corev1.Pod){podtest.WithContainers(podtest.Waiting("llama-stack", "RunContainerError", "exec failed"))},
			v1alpha2.ReasonRunContainerError, "pod app-1111-a: container llama-stack: exec failed"},
		"crash loop": {[]func(*corev1.Pod){podtest.WithContainers(podtest.CrashLooping("10s"))},
			v1alpha2.ReasonCrashLoopBackOff, "pod app-1111-a: container llama-stack: restarting after it exited with code 1 (Error): ModuleNotFoundError"},
		"unschedulable": {[]func(*corev1.Pod){podtest.Unschedulable},
			v1alpha2.ReasonUnschedulable, "pod app-1111-a: 0/3 nodes are available: 3 Insufficient cpu."},
		"init container": {[]func(*corev1.Pod){podtest.WithInitContainers(podtest.Waiting("setup", "CreateContainerConfigError", podtest.SecretMissing)), podtest.WithContainers(podtest.Waiting("llama-stack", "PodInitializing", ""))},
			v1alpha2.ReasonCreateContainerConfigError, "pod app-1111-a: init container setup: " + podtest.SecretMissing},
	} {
		t.Run(name, func(t *testing.T) {
			f := newPodFixture(t)
			f.pod("app-1111-a", "app-1111", time.Minute, tc.mods...)
			f.converge("app")
			got := f.llsd("app")
			assert.Equal(t, v1alpha2.PhaseFailed, got.Status.Phase)
			for _, ct := range []string{v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionReady} {
				c := cond(t, got, ct)
				assert.Equal(t, metav1.ConditionFalse, c.Status, ct)
				assert.Equal(t, tc.reason, c.Reason, ct)
				assert.Contains(t, c.Message, tc.msg, ct)
			}
			events := f.events()
			assert.Equal(t, 1, countEvents(events, "Warning "+tc.reason+" "+tc.msg), "events: %v", events)
			assert.Empty(t, f.sync("app"), "nothing changed: nothing sent")
			assert.Empty(t, f.events(), "no Event without a change")

			// The cause is fixed: the pod runs, the Deployment is available.
			f.pod("app-1111-a", "app-1111", time.Minute, podtest.WithContainers(corev1.ContainerStatus{Name: "llama-stack", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}))
			f.setDeploymentStatus("app", rolledOut)
			f.converge("app")
			got = f.llsd("app")
			assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
			assert.Equal(t, 1, countEvents(f.events(), "Normal Ready"))
		})
	}
}

// A crash loop whose back-off grows, or a pull that alternates between its attempt and
// its back-off, is one problem: the status is written once, with one Warning Event.
func TestStuckPodStatusDoesNotFlap(t *testing.T) {
	f := newPodFixture(t)
	f.pod("app-1111-a", "app-1111", time.Minute, podtest.WithContainers(podtest.CrashLooping("10s")))
	f.converge("app")
	require.Equal(t, 1, countEvents(f.events(), "Warning CrashLoopBackOff"))
	for _, b := range []string{"20s", "40s", "1m20s", "5m0s"} {
		f.pod("app-1111-a", "app-1111", time.Minute, podtest.WithContainers(podtest.CrashLooping(b)))
		assert.Empty(t, f.sync("app"), "back-off %s", b)
	}
	running := podtest.CrashLooping("5m0s")
	running.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	f.pod("app-1111-a", "app-1111", time.Minute, podtest.WithContainers(running))
	assert.Empty(t, f.sync("app"), "running again between two crashes")

	f.pod("app-1111-a", "app-1111", time.Minute, podtest.WithContainers(podtest.Waiting("llama-stack", "ErrImagePull", podtest.PullErrMsg)))
	f.converge("app")
	require.Equal(t, 1, countEvents(f.events(), "Warning ImagePullBackOff"))
	f.pod("app-1111-a", "app-1111", time.Minute, podtest.WithContainers(podtest.Waiting("llama-stack", "ImagePullBackOff", `Back-off pulling image "x": ErrImagePull: `+podtest.PullErrMsg)))
	assert.Empty(t, f.sync("app"), "the back-off after the attempt")
	assert.Empty(t, f.events())
}

// Which pods count: those of the current ReplicaSet, not terminating, the oldest first;
// not those of an older ReplicaSet during a rollout, nor of a ReplicaSet that is not the
// Deployment's; and none while the Deployment is available.
func TestStuckPodChoice(t *testing.T) {
	secret := podtest.WithContainers(podtest.Waiting("llama-stack", "CreateContainerConfigError", podtest.SecretMissing))
	pull := podtest.WithContainers(podtest.Waiting("llama-stack", "ErrImagePull", podtest.PullErrMsg))

	t.Run("terminating pods are ignored", func(t *testing.T) {
		f := newPodFixture(t)
		f.pod("app-1111-a", "app-1111", time.Minute, secret, func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			p.Finalizers = []string{"test"}
		})
		f.converge("app")
		c := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady)
		assert.Equal(t, v1alpha2.ReasonDeploymentScaling, c.Reason)
		assert.Equal(t, v1alpha2.PhaseInitializing, f.llsd("app").Status.Phase)
	})

	t.Run("old ReplicaSet during a rollout", func(t *testing.T) {
		f := newPodFixture(t)
		f.pod("app-1111-a", "app-1111", time.Hour, pull)
		f.converge("app")
		require.Equal(t, v1alpha2.ReasonImagePullBackOff, cond(t, f.llsd("app"), v1alpha2.ConditionReady).Reason)

		// A new revision (the image fixed, say): the old pod's problem is not the new one's.
		f.updateDeployment("app", "kube-controller-manager", func(d *appsv1.Deployment) { d.Annotations[rollout.RevisionAnnotation] = "2" })
		f.replicaSet("app-2222", "2", f.dep.UID)
		f.pod("app-2222-a", "app-2222", 0, podtest.WithContainers(podtest.Waiting("llama-stack", "ContainerCreating", "")))
		f.converge("app")
		assert.Equal(t, v1alpha2.ReasonDeploymentScaling, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason)

		// The new pod gets stuck too, for another reason: that is the one reported.
		f.pod("app-2222-a", "app-2222", 0, secret)
		f.converge("app")
		c := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady)
		assert.Equal(t, v1alpha2.ReasonCreateContainerConfigError, c.Reason)
		assert.Contains(t, c.Message, "pod app-2222-a:")
	})

	t.Run("the oldest stuck pod", func(t *testing.T) {
		f := newPodFixture(t)
		f.setDeploymentStatus("app", func(d *appsv1.Deployment) { notAvailable(d); d.Spec.Replicas = ptr.To[int32](1) })
		f.pod("app-1111-b", "app-1111", time.Minute, pull)
		f.pod("app-1111-a", "app-1111", 2*time.Minute, secret)
		f.pod("app-1111-c", "app-1111", 3*time.Minute, podtest.WithContainers(podtest.Waiting("llama-stack", "ContainerCreating", "")))
		f.converge("app")
		assert.Contains(t, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Message, "pod app-1111-a: container llama-stack: "+podtest.SecretMissing)
	})

	t.Run("not the Deployment's", func(t *testing.T) {
		f := newPodFixture(t)
		f.replicaSet("app-9999", "1", "someone-else")
		f.pod("app-9999-a", "app-9999", time.Minute, secret)
		f.converge("app")
		assert.Equal(t, v1alpha2.ReasonDeploymentScaling, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason)
	})

	t.Run("Deployment available", func(t *testing.T) {
		f := newPodFixture(t)
		f.setDeploymentStatus("app", rolledOut)
		f.pod("app-1111-a", "app-1111", time.Minute, secret)
		f.converge("app")
		assert.Equal(t, v1alpha2.PhaseReady, f.llsd("app").Status.Phase)
	})

	t.Run("pods the Deployment controller can create come after those it cannot", func(t *testing.T) {
		f := newPodFixture(t)
		f.setDeploymentStatus("app", replicaFailure)
		f.pod("app-1111-a", "app-1111", time.Minute, secret)
		f.converge("app")
		assert.Equal(t, v1alpha2.ReasonReplicaFailure, cond(t, f.llsd("app"), v1alpha2.ConditionReady).Reason)
	})

	t.Run("a stuck pod before a rollout that ran out of time", func(t *testing.T) {
		f := newPodFixture(t)
		f.setDeploymentStatus("app", func(d *appsv1.Deployment) {
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UnavailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
					Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "app-1111" has timed out progressing.`}}}
		})
		f.pod("app-1111-a", "app-1111", time.Hour, secret)
		f.converge("app")
		got := f.llsd("app")
		assert.Equal(t, v1alpha2.ReasonCreateContainerConfigError, cond(t, got, v1alpha2.ConditionReady).Reason)
		assert.Equal(t, metav1.ConditionFalse, cond(t, got, v1alpha2.ConditionProgressing).Status, "Progressing still says it")
	})
}

// The Pod handler queues the CR only when what a pod says of why it does not start
// changes: not at each status update of a pod.
func TestPodHandler(t *testing.T) {
	f := newPodFixture(t)
	h := f.c.podHandler()
	f.queued()
	mk := func(name, instance string, mods ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, ResourceVersion: "1",
			Labels: map[string]string{llsd.LabelApp: llsd.LabelAppValue, llsd.LabelInstance: instance}}}
		for _, m := range mods {
			m(p)
		}
		return p
	}
	secret := podtest.WithContainers(podtest.Waiting("llama-stack", "CreateContainerConfigError", podtest.SecretMissing))
	restarted := func(p *corev1.Pod) { p.ResourceVersion = "2"; p.Status.ContainerStatuses[0].RestartCount++ }

	h.OnAdd(mk("a", "app", podtest.WithContainers(podtest.Waiting("llama-stack", "ContainerCreating", ""))), false)
	assert.Empty(t, f.queued(), "a pod starting")
	h.OnAdd(mk("a", "app", secret), false)
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued(), "a stuck pod")
	h.OnUpdate(mk("a", "app", secret), mk("a", "app", secret, func(p *corev1.Pod) { p.ResourceVersion = "2" }))
	assert.Empty(t, f.queued(), "same problem")
	h.OnUpdate(mk("a", "app", podtest.WithContainers(podtest.CrashLooping("10s"))), mk("a", "app", podtest.WithContainers(podtest.CrashLooping("20s")), restarted))
	assert.Empty(t, f.queued(), "a longer back-off, one restart more")
	h.OnUpdate(mk("a", "app", podtest.WithContainers(podtest.Waiting("llama-stack", "ContainerCreating", ""))), mk("a", "app", podtest.WithContainers(corev1.ContainerStatus{Name: "llama-stack", Ready: true})))
	assert.Empty(t, f.queued(), "a pod becoming ready (the Deployment says so)")
	h.OnUpdate(mk("a", "app", podtest.WithContainers(podtest.Waiting("llama-stack", "ContainerCreating", ""))), mk("a", "app", secret))
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued(), "a pod getting stuck")
	h.OnUpdate(mk("a", "app", secret), mk("a", "app", podtest.WithContainers(podtest.CrashLooping("10s"))))
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued(), "another cause")
	h.OnUpdate(mk("a", "app", secret), mk("a", "app", secret, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }))
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued(), "a stuck pod terminating")
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "demo/a", Obj: mk("a", "app", secret)})
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued(), "a stuck pod deleted (tombstone)")
	h.OnDelete(mk("a", "app"))
	assert.Empty(t, f.queued(), "a pod deleted that was not stuck")
	h.OnAdd(mk("b", "no-such-cr", secret), false)
	h.OnAdd(mk("c", "", secret), false)
	assert.Empty(t, f.queued(), "no CR of that name")
}

// A pod's reason is the kubelet's, not a closed list: DeploymentReady is stuck on any
// reason but deploymentReady's own progress reasons and the user errors (whose Events
// updateStatus records already).
func TestStuckReason(t *testing.T) {
	for _, r := range []string{v1alpha2.ReasonReplicaFailure, v1alpha2.ReasonProgressDeadlineExceeded, v1alpha2.ReasonUnschedulable,
		v1alpha2.ReasonCreateContainerConfigError, v1alpha2.ReasonImagePullBackOff, v1alpha2.ReasonCrashLoopBackOff,
		v1alpha2.ReasonPodNotStarting, "PreStartHookError"} {
		assert.True(t, status.StuckReason(r), r)
	}
	for _, r := range []string{v1alpha2.ReasonDeploymentReady, v1alpha2.ReasonDeploymentPending, v1alpha2.ReasonDeploymentScaling,
		v1alpha2.ReasonScaledToZero, v1alpha2.ReasonDistributionNotSupported, v1alpha2.ReasonConfigMapNotFound,
		v1alpha2.ReasonConfigMapKeyMissing, v1alpha2.ReasonConfigMapNotAllowed, v1alpha2.ReasonCABundleInvalid,
		v1alpha2.ReasonResourceNotOwned, v1alpha2.ReasonResourceInvalid, v1alpha2.ReasonDeploymentFailed,
		v1alpha2.ReasonBaseConfigRequired, v1alpha2.ReasonConfigInvalid, v1alpha2.ReasonServerVersionNotSupported} {
		assert.False(t, status.StuckReason(r), r)
	}
}

// runningAfter is the server container running again, ready or not, after it exited.
func runningAfter(ready bool, last *corev1.ContainerStateTerminated) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "llama-stack", Ready: ready, RestartCount: 1,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: last}}
}

// A container killed once, long ago, whose readiness fails now (a dependency down) is
// not crash-looping: the CR is not Ready (Initializing), with no Warning.
func TestOneRestartLongAgoIsNoCrashLoop(t *testing.T) {
	f := newPodFixture(t)
	oom := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
	f.pod("app-1111-a", "app-1111", 72*time.Hour, podtest.WithContainers(runningAfter(true, oom)))
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	require.Equal(t, v1alpha2.PhaseReady, f.llsd("app").Status.Phase)
	f.events()

	f.pod("app-1111-a", "app-1111", 72*time.Hour, podtest.WithContainers(runningAfter(false, oom)))
	f.setDeploymentStatus("app", notAvailable)
	f.converge("app")
	got := f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseInitializing, got.Status.Phase)
	assert.Equal(t, v1alpha2.ReasonDeploymentScaling, cond(t, got, v1alpha2.ConditionDeploymentReady).Reason)
	assert.Equal(t, v1alpha2.ReasonNotReady, cond(t, got, v1alpha2.ConditionReady).Reason)
	assert.Zero(t, countEvents(f.events(), "Warning"))
}

// A crash loop is reported from its first exit, and stays reported while the container
// runs again between two crashes: one status write and one Warning for the loop, none
// per restart; once the container is ready the CR is Ready.
func TestCrashLoopIsOneWrite(t *testing.T) {
	f := newPodFixture(t)
	exit := podtest.CrashLooping("10s").LastTerminationState.Terminated
	exited := corev1.ContainerStatus{Name: "llama-stack", State: corev1.ContainerState{Terminated: exit}}
	f.pod("app-1111-a", "app-1111", time.Minute, podtest.WithContainers(exited))
	f.converge("app")
	require.Equal(t, v1alpha2.ReasonCrashLoopBackOff, cond(t, f.llsd("app"), v1alpha2.ConditionReady).Reason)
	require.Equal(t, 1, countEvents(f.events(), "Warning CrashLoopBackOff"))
	for _, b := range []string{"10s", "20s", "40s"} {
		for name, s := range map[string]corev1.ContainerStatus{"back-off " + b: podtest.CrashLooping(b), "running again": runningAfter(false, exit), "exited": exited} {
			f.pod("app-1111-a", "app-1111", time.Minute, podtest.WithContainers(s))
			assert.Empty(t, f.sync("app"), name)
		}
	}
	assert.Empty(t, f.events())

	f.pod("app-1111-a", "app-1111", time.Minute, podtest.WithContainers(runningAfter(true, exit)))
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	assert.Equal(t, v1alpha2.PhaseReady, f.llsd("app").Status.Phase)
}

// rollingOut is the Deployment's status while its new pod does not start and its old
// one serves.
func rollingOut(d *appsv1.Deployment) {
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1,
		AvailableReplicas: 1, UnavailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}}}
}

// A rollout whose new pod does not start while the old one serves: the CR stays Ready,
// and Progressing (True) names the pod's problem, with one Warning Event, before the
// progress deadline.
func TestStuckPodOfARollout(t *testing.T) {
	f := newPodFixture(t)
	f.pod("app-1111-a", "app-1111", time.Hour, podtest.WithContainers(corev1.ContainerStatus{Name: "llama-stack", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}))
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	require.Equal(t, v1alpha2.PhaseReady, f.llsd("app").Status.Phase)
	f.events()

	f.updateDeployment("app", "kube-controller-manager", func(d *appsv1.Deployment) { d.Annotations[rollout.RevisionAnnotation] = "2" })
	f.replicaSet("app-2222", "2", f.dep.UID)
	f.pod("app-2222-a", "app-2222", 0, podtest.WithContainers(podtest.Waiting("llama-stack", "CreateContainerConfigError", podtest.SecretMissing)))
	f.setDeploymentStatus("app", rollingOut)
	f.converge("app")
	got := f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	assert.Equal(t, metav1.ConditionTrue, cond(t, got, v1alpha2.ConditionReady).Status)
	assert.Equal(t, metav1.ConditionTrue, cond(t, got, v1alpha2.ConditionDeploymentReady).Status)
	p := cond(t, got, v1alpha2.ConditionProgressing)
	assert.Equal(t, metav1.ConditionTrue, p.Status)
	assert.Equal(t, v1alpha2.ReasonCreateContainerConfigError, p.Reason)
	want := "pod app-2222-a: container llama-stack: " + podtest.SecretMissing
	assert.Equal(t, want+"; Deployment is rolling out: 1 of 1 replicas updated and available", p.Message)
	events := f.events()
	assert.Equal(t, 1, countEvents(events, "Warning CreateContainerConfigError "+want), "events: %v", events)
	assert.Empty(t, f.sync("app"))
	assert.Empty(t, f.events())

	// The old pod goes (its node drained, say): DeploymentReady says it now, no new Warning.
	f.setDeploymentStatus("app", func(d *appsv1.Deployment) { notAvailable(d) })
	f.converge("app")
	got = f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseFailed, got.Status.Phase)
	assert.Equal(t, v1alpha2.ReasonCreateContainerConfigError, cond(t, got, v1alpha2.ConditionDeploymentReady).Reason)
	assert.Zero(t, countEvents(f.events(), "Warning"), "the same problem of the same pod")

	// The Secret made: the new pod runs, the rollout completes.
	f.pod("app-2222-a", "app-2222", 0, podtest.WithContainers(corev1.ContainerStatus{Name: "llama-stack", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}))
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	got = f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	assert.Equal(t, v1alpha2.ReasonRolloutComplete, cond(t, got, v1alpha2.ConditionProgressing).Reason)
}

// Messages that change at each attempt: a pull error names the node's end of the
// connection, with an ephemeral port; the scheduler's message counts nodes. The pull
// message is made stable; the scheduler's is kept, but a new one of the same pod and
// reason is no new Warning.
func TestStuckPodMessagesThatChange(t *testing.T) {
	pull := func(local string) func(*corev1.Pod) {
		return podtest.WithContainers(podtest.Waiting("llama-stack", "ImagePullBackOff", `Back-off pulling image "quay.io/x/y:1": ErrImagePull: failed to pull and unpack image "quay.io/x/y:1": failed to copy: read tcp `+local+`->23.20.95.219:443: read: connection reset by peer`))
	}
	f := newPodFixture(t)
	f.pod("app-1111-a", "app-1111", time.Minute, pull("10.2.0.49:42728"))
	f.converge("app")
	c := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady)
	assert.Equal(t, `pod app-1111-a: container llama-stack: ErrImagePull: failed to pull and unpack image "quay.io/x/y:1": failed to copy: read tcp 23.20.95.219:443: read: connection reset by peer`, c.Message)
	require.Equal(t, 1, countEvents(f.events(), "Warning ImagePullBackOff"))
	f.pod("app-1111-a", "app-1111", time.Minute, pull("10.2.0.49:51002"))
	assert.Empty(t, f.sync("app"), "another attempt, another port")
	f.pod("app-1111-a", "app-1111", time.Minute, pull("[fd00::49]:51002"))
	assert.Empty(t, f.sync("app"), "over IPv6")

	f.pod("app-1111-a", "app-1111", time.Minute, podtest.Unschedulable)
	f.converge("app")
	require.Equal(t, 1, countEvents(f.events(), "Warning Unschedulable"))
	f.pod("app-1111-a", "app-1111", time.Minute, func(p *corev1.Pod) {
		podtest.Unschedulable(p)
		p.Status.Conditions[0].Message = strings.ReplaceAll(podtest.UnschedulableMsg, "0/3 nodes", "0/4 nodes")
	})
	f.converge("app")
	assert.Contains(t, cond(t, f.llsd("app"), v1alpha2.ConditionReady).Message, "0/4 nodes", "the scheduler's words")
	assert.Empty(t, f.events(), "the same pod, the same reason")
}

// A kubelet or runtime reason that is one the controller gives with its own meaning
// is not passed on as it is: the pod does not start (PodNotStarting), the CR is Failed
// with a Warning, and the kubelet's reason is in the message.
func TestPodReasonThatIsTheControllers(t *testing.T) {
	for _, r := range []string{v1alpha2.ReasonConfigInvalid, v1alpha2.ReasonDeploymentScaling, v1alpha2.ReasonReady, v1alpha2.ReasonRollingOut} {
		t.Run(r, func(t *testing.T) {
			f := newPodFixture(t)
			f.pod("app-1111-a", "app-1111", time.Minute, podtest.WithContainers(podtest.Waiting("llama-stack", r, "runtime says no")))
			f.converge("app")
			got := f.llsd("app")
			assert.Equal(t, v1alpha2.PhaseFailed, got.Status.Phase)
			msg := "pod app-1111-a: container llama-stack: " + r + ": runtime says no"
			for _, ct := range []string{v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionReady} {
				assert.Equal(t, v1alpha2.ReasonPodNotStarting, cond(t, got, ct).Reason, ct)
				assert.Equal(t, msg, cond(t, got, ct).Message, ct)
			}
			assert.Equal(t, 1, countEvents(f.events(), "Warning PodNotStarting "+msg))
		})
	}
}

// v1alpha2Reasons reads every Reason constant of the API package from its source:
// name to value.
func v1alpha2Reasons(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string]string{}
	files, err := filepath.Glob(filepath.Join("..", "apis", "llamastack", "v1alpha2", "*.go"))
	require.NoError(t, err)
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") || strings.HasPrefix(filepath.Base(path), "zz_") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Reason") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					require.True(t, ok, "%s is not a literal", n.Name)
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					out[n.Name] = v
				}
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

// userErrorReasons reads the reasons the controller, its revision and configgen give user errors:
// fault.Problem{Reason: v1alpha2.ReasonX, Message: ...}, generate's fail(v1alpha2.ReasonX, ...) and
// configgen's Error{Reason: v1alpha2.ReasonX}.
func userErrorReasons(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	var out []string
	reason := func(e ast.Expr) {
		if sel, ok := e.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Reason") {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "v1alpha2" {
				out = append(out, sel.Sel.Name)
			}
		}
	}
	for _, dir := range []string{".", "revision", filepath.Join("..", "configgen")} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			require.NoError(t, err)
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					var name string
					switch t := n.Type.(type) {
					case *ast.Ident:
						name = t.Name
					case *ast.SelectorExpr:
						if x, ok := t.X.(*ast.Ident); ok {
							name = x.Name + "." + t.Sel.Name
						}
					}
					if name == "fault.Problem" || name == "Error" {
						for _, e := range n.Elts {
							if kv, ok := e.(*ast.KeyValueExpr); ok {
								if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Reason" {
									reason(kv.Value)
								}
							}
						}
					}
				case *ast.CallExpr:
					if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "fail" && len(n.Args) > 0 {
						reason(n.Args[0])
					}
				}
				return true
			})
		}
	}
	return out
}

// Every reason of the API is the controller's own or one of a pod; the user errors'
// are problems; status.StuckReason says stuck of ReplicaFailure, ProgressDeadlineExceeded and
// the pods' reasons only.
func TestReasonsAreClassified(t *testing.T) {
	all := v1alpha2Reasons(t)
	for name, v := range all {
		assert.True(t, rollout.OwnReason(v) != slices.Contains(rollout.PodReasons, v), "%s (%q) must be in exactly one of the own reasons and rollout.PodReasons", name, v)
		stuck := slices.Contains(rollout.PodReasons, v) || v == v1alpha2.ReasonReplicaFailure || v == v1alpha2.ReasonProgressDeadlineExceeded
		assert.Equal(t, stuck, status.StuckReason(v), "status.StuckReason(%s)", name)
	}
	assert.Len(t, rollout.OwnReasons(), len(all)-len(rollout.PodReasons), "the own reasons are only API reasons")
	users := userErrorReasons(t)
	assert.GreaterOrEqual(t, len(users), 10, "found %v", users)
	for _, name := range users {
		v, ok := all[name]
		require.True(t, ok, name)
		assert.True(t, fault.IsReason(v), "a user error's reason %s is a problem", name)
	}
}
