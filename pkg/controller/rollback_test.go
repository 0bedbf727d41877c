package controller

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
)

// rollbackFixture plays the Deployment controller and the kubelet around the
// controller: each template the controller applies gets a ReplicaSet of its own (or
// the one with the same template back, at a new revision), and the test says how its
// pods fare.
type rollbackFixture struct {
	*fixture
	revision int
}

func newRollbackFixture(t *testing.T, objs ...runtime.Object) *rollbackFixture {
	f := &rollbackFixture{fixture: newFixture(t, objs...)}
	f.converge("app")
	if l := f.llsd("app"); l.Spec.Workload.Storage != nil {
		f.setPVCPhase(llsd.PVCName(l), corev1.ClaimBound)
	}
	f.updateDeployment("app", "kube-controller-manager", func(d *appsv1.Deployment) { d.UID = "dep-uid" })
	f.rollOut()
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	f.events()
	f.secretsServed()
	return f
}

// secretsServed creates the Secrets the Deployment's pods read that the test did not:
// pods that served had them.
func (f *rollbackFixture) secretsServed() {
	f.t.Helper()
	for _, r := range rollout.TemplateRefs(&f.deployment("app").Spec.Template) {
		if r.Kind != "Secret" {
			continue
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: testNamespace}}
		if _, err := f.kubeclient.CoreV1().Secrets(testNamespace).Create(f.ctx, secret, metav1.CreateOptions{}); err != nil {
			require.True(f.t, apierrors.IsAlreadyExists(err), err)
		}
	}
}

// templateHash names a ReplicaSet of the template (the Deployment controller's
// pod-template-hash, in form).
func templateHash(t *corev1.PodTemplateSpec) string {
	return rollout.TemplateContentHash(t)[:8]
}

// rollOut plays the Deployment controller for the Deployment's current template: the
// ReplicaSet of that template, made or found, gets the next revision, and the
// Deployment that revision. It returns the ReplicaSet's name.
func (f *rollbackFixture) rollOut() string {
	f.t.Helper()
	d := f.deployment("app")
	tmpl := d.Spec.Template.DeepCopy()
	name := "app-" + templateHash(tmpl)
	f.revision++
	rev := strconv.Itoa(f.revision)
	rss := f.kubeclient.AppsV1().ReplicaSets(testNamespace)
	if rs, err := rss.Get(f.ctx, name, metav1.GetOptions{}); err == nil {
		rs = rs.DeepCopy()
		rs.Annotations[rollout.RevisionAnnotation] = rev
		_, err = rss.Update(f.ctx, rs, metav1.UpdateOptions{})
		require.NoError(f.t, err)
	} else {
		tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = templateHash(tmpl)
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID(name + "-uid"),
				Labels:      tmpl.Labels,
				Annotations: map[string]string{rollout.RevisionAnnotation: rev},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "app", UID: d.UID,
					Controller: ptr.To(true)}},
			},
			Spec: appsv1.ReplicaSetSpec{Template: *tmpl},
		}
		_, err = rss.Create(f.ctx, rs, metav1.CreateOptions{})
		require.NoError(f.t, err)
	}
	f.updateDeployment("app", "kube-controller-manager", func(d *appsv1.Deployment) {
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[rollout.RevisionAnnotation] = rev
	})
	return name
}

// crashLooping is a pod of rs whose server restarted n times.
func (f *rollbackFixture) crashLooping(pod, rs string, n int32) {
	f.t.Helper()
	(&podFixture{fixture: f.fixture}).pod(pod, rs, time.Minute, func(p *corev1.Pod) {
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "llama-stack", RestartCount: n,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
				Message: "ValueError: provider vllm: url is required"}},
		}}}
	})
}

// newPodFailing is the Deployment's status while its new pod does not become available:
// with a rolling update the old one still serves; with Recreate nothing does.
func newPodFailing(oldServing bool) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}}}
		if oldServing {
			d.Status.Replicas, d.Status.AvailableReplicas, d.Status.ReadyReplicas = 2, 1, 1
		}
	}
}

func withEnv(name, value string) func(*v1alpha2.LlamaStackDistribution) {
	return func(l *v1alpha2.LlamaStackDistribution) {
		if l.Spec.Workload.Overrides == nil {
			l.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{}
		}
		l.Spec.Workload.Overrides.Env = append(l.Spec.Workload.Overrides.Env, corev1.EnvVar{Name: name, Value: value})
	}
}

func serverEnv(d *appsv1.Deployment, name string) (string, bool) {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// TestFailedRolloutIsRolledBack: a change whose new pod crash-loops is rolled back, in
// one write, to the template of the last ReplicaSet that served (its generated
// ConfigMap kept); RolledBack says why in the pod's own words, with one Warning Event;
// the failed inputs are not applied again while the CR asks for them; a later change
// rolls forward. With storage (Recreate) the same, though nothing serves meanwhile.
func TestFailedRolloutIsRolledBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		storage bool
	}{{"rolling-update", false}, {"recreate-with-storage", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRollbackFixture(t, newGenLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
				if tc.storage {
					l.Spec.Workload.Storage = &v1alpha2.PVCStorageSpec{}
				}
			}))
			l := f.llsd("app")
			require.NotNil(t, l.Status.Rollback)
			served := l.Status.Rollback.ServedReplicaSet
			require.NotEmpty(t, served, "the ReplicaSet that serves is remembered")
			good := f.deployment("app").DeepCopy()
			goodConfig := good.Spec.Template.Spec.Volumes
			f.events()

			// A change: a new config (another endpoint) and env.
			f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
				l.Spec.Providers.Inference[0].Endpoint = "http://vllm-next:8000/v1"
				withEnv("LOG_LEVEL", "debug")(l)
			})
			f.converge("app")
			bad := f.deployment("app").DeepCopy()
			require.NotEqual(t, good.Spec.Template, bad.Spec.Template)
			failed := f.rollOut()
			f.setDeploymentStatus("app", newPodFailing(!tc.storage))

			// Restarted twice: given its back-off, not rolled back.
			f.crashLooping(failed+"-x1", failed, 2)
			f.converge("app")
			assert.Equal(t, bad.Spec.Template, f.deployment("app").Spec.Template, "not rolled back yet")
			f.events()

			// The third restart: rolled back, in one write of the Deployment.
			f.crashLooping(failed+"-x1", failed, 3)
			actions := f.sync("app")
			assert.Equal(t, []string{"get replicasets " + served, "get secrets vllm-creds"}, describe(gets(actions)),
				"the old template read once, and the Secret its pods read checked")
			assert.Equal(t, []string{"patch deployments app"}, writesTo(actions, "deployments", "app"), "one write")
			d := f.deployment("app")
			want := good.Spec.Template.DeepCopy()
			assert.True(t, equality.Semantic.DeepEqual(*want, d.Spec.Template), "the template that served is back:\n%s",
				cmp.Diff(*want, d.Spec.Template))
			_, hasEnv := serverEnv(d, "LOG_LEVEL")
			assert.False(t, hasEnv, "the env that served is back")
			assert.Equal(t, goodConfig, d.Spec.Template.Spec.Volumes, "the config that served is back")
			assert.NotContains(t, d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey)

			got := f.llsd("app")
			p := cond(t, got, v1alpha2.ConditionProgressing)
			assert.Equal(t, metav1.ConditionFalse, p.Status)
			assert.Equal(t, v1alpha2.ReasonRolledBack, p.Reason)
			assert.Contains(t, p.Message, "Rolled back to ReplicaSet "+served)
			assert.Contains(t, p.Message, "the rollout of ReplicaSet "+failed+" failed")
			assert.Contains(t, p.Message, "pod "+failed+"-x1: container llama-stack: restarting after it exited with code 1 (Error): ValueError: provider vllm: url is required")
			rb := got.Status.Rollback
			require.NotNil(t, rb)
			assert.Equal(t, served, rb.ServedReplicaSet)
			assert.Equal(t, failed, rb.FailedReplicaSet)
			assert.Equal(t, v1alpha2.ReasonCrashLoopBackOff, rb.Reason)
			assert.NotEmpty(t, rb.FailedInputs)
			assert.NotNil(t, rb.LastRollbackTime)
			events := f.events()
			assert.Equal(t, 1, countEvents(events, "Warning RolledBack"), "%v", events)

			// The Deployment controller goes back to the old ReplicaSet; the failed
			// inputs are not tried again, however often the CR is synced.
			assert.Equal(t, served, f.rollOut())
			f.converge("app")
			f.setDeploymentStatus("app", rolledOut)
			f.converge("app")
			assert.Empty(t, writesTo(f.sync("app"), "deployments", "app"))
			assert.True(t, equality.Semantic.DeepEqual(good.Spec.Template, f.deployment("app").Spec.Template))
			got = f.llsd("app")
			assert.Equal(t, metav1.ConditionTrue, cond(t, got, v1alpha2.ConditionReady).Status, "the old pods serve")
			assert.Equal(t, v1alpha2.ReasonRolledBack, cond(t, got, v1alpha2.ConditionProgressing).Reason)
			assert.Equal(t, served, got.Status.Rollback.ServedReplicaSet)
			assert.Equal(t, 0, countEvents(f.events(), "Warning RolledBack"), "one Event per rollback")
			for _, v := range bad.Spec.Template.Spec.Volumes {
				if v.ConfigMap != nil && llsd.IsGeneratedConfigMapName(got, v.ConfigMap.Name) {
					assert.Contains(t, f.configMapNames(), v.ConfigMap.Name, "the failed config is kept while the CR asks for it")
				}
			}
			for _, v := range goodConfig {
				if v.ConfigMap != nil && llsd.IsGeneratedConfigMapName(got, v.ConfigMap.Name) {
					assert.Contains(t, f.configMapNames(), v.ConfigMap.Name, "the config that serves is kept")
				}
			}

			// A fix rolls forward, and the rollback's record goes.
			f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
				l.Spec.Providers.Inference[0].Endpoint = "http://vllm:8000/v1"
			})
			f.converge("app")
			d = f.deployment("app")
			v, ok := serverEnv(d, "LOG_LEVEL")
			assert.True(t, ok && v == "debug", "the new inputs roll out")
			assert.NotContains(t, d.Annotations, rollout.AnnotationRolledBack)
			got = f.llsd("app")
			assert.NotEqual(t, v1alpha2.ReasonRolledBack, cond(t, got, v1alpha2.ConditionProgressing).Reason)
			require.NotNil(t, got.Status.Rollback)
			assert.Empty(t, got.Status.Rollback.FailedInputs)
			assert.Equal(t, served, got.Status.Rollback.ServedReplicaSet)
			next := f.rollOut()
			f.setDeploymentStatus("app", rolledOut)
			f.converge("app")
			assert.Equal(t, next, f.llsd("app").Status.Rollback.ServedReplicaSet, "the new ReplicaSet serves")
		})
	}
}

// gets keeps the actions that read.
func gets(actions []core.Action) []core.Action {
	var out []core.Action
	for _, a := range actions {
		if a.GetVerb() == "get" {
			out = append(out, a)
		}
	}
	return out
}

// failChange makes a change of the CR's env, lets the Deployment controller roll it out
// and its new pod crash-loop past the threshold; it returns the new ReplicaSet.
func (f *rollbackFixture) failChange(oldServing bool) string {
	f.t.Helper()
	f.updateHub("app", withEnv("LOG_LEVEL", "debug"))
	f.converge("app")
	failed := f.rollOut()
	f.setDeploymentStatus("app", newPodFailing(oldServing))
	f.crashLooping(failed+"-x1", failed, rollout.RollbackAfterRestarts)
	return failed
}

// Off per CR: a failed rollout stays, reported as it was before rollback existed.
func TestRollbackCanBeTurnedOff(t *testing.T) {
	f := newRollbackFixture(t, newGenLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Workload.Rollback = &v1alpha2.RollbackSpec{Enabled: ptr.To(false)}
	}))
	f.failChange(true)
	f.converge("app")
	_, ok := serverEnv(f.deployment("app"), "LOG_LEVEL")
	assert.True(t, ok, "the failed change stays rolled out")
	got := f.llsd("app")
	assert.Equal(t, v1alpha2.ReasonCrashLoopBackOff, cond(t, got, v1alpha2.ConditionProgressing).Reason)
	assert.Equal(t, 0, countEvents(f.events(), "Warning RolledBack"))

	// Turned on, the failed rollout is rolled back.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Rollback = nil })
	f.converge("app")
	_, ok = serverEnv(f.deployment("app"), "LOG_LEVEL")
	assert.False(t, ok, "rolled back once on")
	assert.Equal(t, v1alpha2.ReasonRolledBack, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)

	// Turned off while held: the CR's inputs roll out again, as asked.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Workload.Rollback = &v1alpha2.RollbackSpec{Enabled: ptr.To(false)}
	})
	f.converge("app")
	d := f.deployment("app")
	_, ok = serverEnv(d, "LOG_LEVEL")
	assert.True(t, ok)
	assert.NotContains(t, d.Annotations, rollout.AnnotationRolledBack)
}

// Nothing to go back to: the first rollout of a CR, and a crash loop of the ReplicaSet
// that served itself (not a change of the CR's), stay as they are.
func TestNoRollbackWithoutAnEarlierReplicaSetThatServed(t *testing.T) {
	t.Run("first-rollout", func(t *testing.T) {
		f := &rollbackFixture{fixture: newFixture(t, newGenLLSD("app"))}
		f.converge("app")
		f.updateDeployment("app", "kube-controller-manager", func(d *appsv1.Deployment) { d.UID = "dep-uid" })
		first := f.rollOut()
		f.setDeploymentStatus("app", newPodFailing(false))
		f.crashLooping(first+"-x1", first, 5)
		tmpl := f.deployment("app").Spec.Template
		f.converge("app")
		assert.Equal(t, tmpl, f.deployment("app").Spec.Template)
		got := f.llsd("app")
		assert.Nil(t, got.Status.Rollback)
		assert.Equal(t, v1alpha2.ReasonCrashLoopBackOff, cond(t, got, v1alpha2.ConditionReady).Reason)
	})
	t.Run("served-replicaset-fails", func(t *testing.T) {
		f := newRollbackFixture(t, newGenLLSD("app"))
		served := f.llsd("app").Status.Rollback.ServedReplicaSet
		tmpl := f.deployment("app").Spec.Template
		f.setDeploymentStatus("app", newPodFailing(false))
		f.crashLooping(served+"-x1", served, 5)
		f.converge("app")
		assert.Equal(t, tmpl, f.deployment("app").Spec.Template)
		assert.Equal(t, v1alpha2.ReasonCrashLoopBackOff, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)
		assert.Equal(t, 0, countEvents(f.events(), "Warning RolledBack"))
	})
}

// A rollout that runs out of its progress deadline (an image that cannot be pulled) is
// rolled back, with the stuck pod's own reason.
func TestRollbackAfterTheProgressDeadline(t *testing.T) {
	f := newRollbackFixture(t, newGenLLSD("app"))
	served := f.llsd("app").Status.Rollback.ServedReplicaSet
	f.updateHub("app", withEnv("LOG_LEVEL", "debug"))
	f.converge("app")
	failed := f.rollOut()
	f.setDeploymentStatus("app", newPodFailing(true))
	pf := &podFixture{fixture: f.fixture}
	pf.pod(failed+"-x1", failed, time.Minute, func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "llama-stack", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "docker.io/ogxai/distribution-starter:1.3.0": not found`}}}}
	})
	f.converge("app")
	_, ok := serverEnv(f.deployment("app"), "LOG_LEVEL")
	assert.True(t, ok, "within its deadline, a pull is retried")

	f.setDeploymentStatus("app", func(d *appsv1.Deployment) {
		newPodFailing(true)(d)
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "` + failed + `" has timed out progressing.`}}
	})
	f.converge("app")
	_, ok = serverEnv(f.deployment("app"), "LOG_LEVEL")
	assert.False(t, ok, "rolled back")
	rb := f.llsd("app").Status.Rollback
	require.NotNil(t, rb)
	assert.Equal(t, served, rb.ServedReplicaSet)
	assert.Equal(t, v1alpha2.ReasonImagePullBackOff, rb.Reason)
	assert.Contains(t, rb.Message, "not found")
	assert.Contains(t, rb.Message, "progress deadline")
}

// A config edited inside the user's own ConfigMap reaches the pods through a new copy:
// when its rollout fails, the rollback puts back the template of the copy that served,
// which still holds the content that served.
func TestConfigEditedInPlaceIsRolledBackToTheCopyThatServed(t *testing.T) {
	served := map[string]string{"config.yaml": startingUserConfig}
	f := newRollbackFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "")),
		configMap(testNamespace, userConfigName, served, nil))
	good := f.deployment("app").Spec.Template.DeepCopy()
	f.putConfigMap(configMap(testNamespace, userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2\nimage_name: broken\n")}, nil))
	f.converge("app")
	failed := f.rollOut()
	f.setDeploymentStatus("app", newPodFailing(true))
	f.crashLooping(failed+"-x1", failed, 4)
	f.converge("app")
	d := f.deployment("app")
	assert.True(t, equality.Semantic.DeepEqual(*good, d.Spec.Template), "the template that served is back:\n%s", cmp.Diff(*good, d.Spec.Template))
	assert.Equal(t, copyOf(f.fixture, served), userConfigVolume(t, d))
	cp := f.stored(kindConfigMapCopy, copyOf(f.fixture, served))
	require.NotNil(t, cp, "the copy that served is kept while a ReplicaSet mounts it")
	assert.Equal(t, served, cp.(*corev1.ConfigMap).Data)
	assert.Equal(t, v1alpha2.ReasonRolledBack, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)
	assert.Equal(t, 1, countEvents(f.events(), "Warning RolledBack"))
}

// The restart that crosses the threshold is a sync; the restarts before it are not.
func TestCrashLoopThresholdQueuesTheCR(t *testing.T) {
	pod := func(restarts int32) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "llama-stack", RestartCount: restarts,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}},
		}}}}
	}
	assert.False(t, crashLoopsOn(pod(rollout.RollbackAfterRestarts-1)))
	assert.True(t, crashLoopsOn(pod(rollout.RollbackAfterRestarts)))
	running := pod(rollout.RollbackAfterRestarts + 2)
	running.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	running.Status.ContainerStatuses[0].Ready = true
	assert.False(t, crashLoopsOn(running), "serving again")

	f := newFixture(t, newLLSD("app"))
	h := f.c.podHandler()
	for _, tc := range []struct {
		from, to int32
		queued   bool
	}{{1, 2, false}, {2, rollout.RollbackAfterRestarts, true}, {rollout.RollbackAfterRestarts, rollout.RollbackAfterRestarts + 1, false}} {
		o, n := pod(tc.from), pod(tc.to)
		for _, p := range []*corev1.Pod{o, n} {
			p.Namespace, p.Name, p.Labels = testNamespace, "app-1-x", map[string]string{llsd.LabelInstance: "app"}
		}
		h.OnUpdate(o, n)
		if tc.queued {
			assert.Equal(t, []cache.ObjectName{{Namespace: testNamespace, Name: "app"}}, f.queued(), "%d -> %d", tc.from, tc.to)
		} else {
			assert.Empty(t, f.queued(), "%d -> %d", tc.from, tc.to)
		}
	}
}

// While a rollback holds, the template applied is exactly the served ReplicaSet's, not
// that template merged into the one made of the failed inputs: a failed change that
// added a service account, a pod annotation's worth of fields and a security context
// leaves none of them behind, and the held Deployment is not written again.
func TestHeldRollbackIsExactlyTheServedTemplate(t *testing.T) {
	f := newRollbackFixture(t, newGenLLSD("app"))
	served := f.llsd("app").Status.Rollback.ServedReplicaSet
	good := f.deployment("app").Spec.Template.DeepCopy()

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		withEnv("LOG_LEVEL", "debug")(l)
		l.Spec.Workload.Overrides.ServiceAccountName = "failing-sa"
		l.Spec.Workload.Overrides.TerminationGracePeriodSeconds = ptr.To[int64](5)
		l.Spec.Workload.Overrides.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}
	})
	f.converge("app")
	require.Equal(t, "failing-sa", f.deployment("app").Spec.Template.Spec.ServiceAccountName)
	failed := f.rollOut()
	f.setDeploymentStatus("app", newPodFailing(true))
	f.crashLooping(failed+"-x1", failed, rollout.RollbackAfterRestarts)
	f.converge("app")
	require.Equal(t, v1alpha2.ReasonRolledBack, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)

	// The Deployment controller goes back; each later sync holds.
	assert.Equal(t, served, f.rollOut())
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	d := f.deployment("app")
	assert.True(t, equality.Semantic.DeepEqual(*good, d.Spec.Template), "the held template is the served one:\n%s",
		cmp.Diff(*good, d.Spec.Template))
	assert.Empty(t, writesTo(f.sync("app"), "deployments", "app"), "nothing to write while it holds")
}

// A renewed certificate while a rollback holds rolls the served template with the new
// certificate's hash, never the failed change: the hold is keyed on what the user asked
// for, not on content that rotates under the same spec.
func TestRenewalDuringAHeldRollbackKeepsTheHold(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	f := newRollbackFixture(t, newGenLLSD("app", withServerTLS("serving")), serving.secret("serving"))
	clk := testingclock.NewFakeClock(time.Now())
	f.c.clock = clk
	good := f.deployment("app").Spec.Template.DeepCopy()
	require.NotEmpty(t, good.Annotations[llsd.AnnotationTLSHash])
	served := f.llsd("app").Status.Rollback.ServedReplicaSet

	f.failChange(true)
	f.converge("app")
	require.Equal(t, v1alpha2.ReasonRolledBack, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)
	assert.Equal(t, served, f.rollOut())
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	f.events()

	renewed := newTestServing(t, "app-service.demo.svc")
	f.putSecret(renewed.secret("serving"))
	f.converge("app")
	d := f.deployment("app")
	_, failed := serverEnv(d, "LOG_LEVEL")
	assert.False(t, failed, "the failed change does not come back with the renewal")
	assert.NotEqual(t, good.Annotations[llsd.AnnotationTLSHash], d.Spec.Template.Annotations[llsd.AnnotationTLSHash], "the served pods roll with the new certificate")
	want := good.DeepCopy()
	want.Annotations[llsd.AnnotationTLSHash] = d.Spec.Template.Annotations[llsd.AnnotationTLSHash]
	assert.True(t, equality.Semantic.DeepEqual(*want, d.Spec.Template), "the served template, renewed:\n%s", cmp.Diff(*want, d.Spec.Template))
	got := f.llsd("app")
	assert.Equal(t, v1alpha2.ReasonRolledBack, cond(t, got, v1alpha2.ConditionProgressing).Reason, "still held")
	assert.Equal(t, 0, countEvents(f.events(), "Warning RolledBack"), "no second rollback")
	assert.Contains(t, d.Annotations, rollout.AnnotationRolledBack)
}

// A hold recorded by an earlier release (its hash of the whole template, rotating
// content included) still holds, and is recorded again keyed on the inputs alone.
func TestHoldRecordedByAnEarlierReleaseHolds(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	f := newRollbackFixture(t, newGenLLSD("app", withServerTLS("serving")), serving.secret("serving"))
	f.updateHub("app", withEnv("LOG_LEVEL", "debug"))
	f.converge("app")
	bad := f.deployment("app").Spec.Template.DeepCopy()
	failed := f.rollOut()
	f.setDeploymentStatus("app", newPodFailing(true))
	f.crashLooping(failed+"-x1", failed, rollout.RollbackAfterRestarts)
	f.converge("app")
	rec := rollout.ReadRollbackRecord(f.deployment("app"))
	require.NotNil(t, rec)
	inputs := rec.Inputs

	// The record as the earlier release wrote it.
	rec.Inputs = rollout.TemplateContentHash(bad)
	require.NotEqual(t, inputs, rec.Inputs)
	raw, err := json.Marshal(rec)
	require.NoError(t, err)
	f.updateDeployment("app", FieldManager, func(d *appsv1.Deployment) { d.Annotations[rollout.AnnotationRolledBack] = string(raw) })
	f.events()

	actions := f.sync("app")
	d := f.deployment("app")
	_, held := serverEnv(d, "LOG_LEVEL")
	assert.False(t, held, "still held")
	assert.Equal(t, []string{"patch deployments app"}, writesTo(actions, "deployments", "app"), "one write, of the record")
	f.converge("app")
	d = f.deployment("app")
	assert.Equal(t, 0, countEvents(f.events(), "Warning RolledBack"), "held, not rolled back again")
	assert.Equal(t, inputs, rollout.ReadRollbackRecord(d).Inputs, "recorded again on the inputs alone")
	assert.Equal(t, inputs, f.llsd("app").Status.Rollback.FailedInputs)
}

// A pod event can bring the CR back before the Deployment cache has the rollback: that
// sync sees the failed template and the crash-looping pod again. The rollback is not
// made again: no second write, Event, count or time.
func TestRollbackIsNotRepeatedOnAStaleCache(t *testing.T) {
	RegisterMetrics()
	f := newRollbackFixture(t, newGenLLSD("app"))
	var deployments cache.Indexer
	for _, k := range f.c.childKinds {
		if k.Kind == "Deployment" {
			deployments = k.Informer.GetIndexer()
		}
	}
	require.NotNil(t, deployments)
	f.failChange(true)
	stale, err := f.c.deployments.Cached(testNamespace, "app")
	require.NoError(t, err)
	before := counter(t, "llama_stack_controller_rollbacks_total", nil)

	require.Equal(t, []string{"patch deployments app"}, writesTo(f.sync("app"), "deployments", "app"), "rolled back")
	rolledBack := f.llsd("app").Status.Rollback.LastRollbackTime
	require.NotNil(t, rolledBack)
	require.NoError(t, deployments.Update(stale), "the informer has not seen the rollback")
	f.c.clock = testingclock.NewFakeClock(time.Now().Add(time.Minute))

	actions := f.sync("app")
	assert.Empty(t, writesTo(actions, "deployments", "app"), "not rolled back again")
	assert.Empty(t, gets(actions), "nothing read again")
	assert.Equal(t, 1, countEvents(f.events(), "Warning RolledBack"), "one Event")
	assert.Equal(t, before+1, counter(t, "llama_stack_controller_rollbacks_total", nil), "counted once")
	got := f.llsd("app")
	assert.Equal(t, rolledBack.Unix(), got.Status.Rollback.LastRollbackTime.Unix(), "one time")
	assert.Equal(t, v1alpha2.ReasonRolledBack, cond(t, got, v1alpha2.ConditionProgressing).Reason)

	// Once the cache has it, the memory goes.
	f.converge("app")
	remembered := f.c.rollouts.Remembered(cache.ObjectName{Namespace: testNamespace, Name: "app"})
	assert.False(t, remembered)
	assert.Contains(t, f.deployment("app").Annotations, rollout.AnnotationRolledBack)
}
