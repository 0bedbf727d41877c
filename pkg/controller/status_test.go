package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

func TestStatusObservedGeneration(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) { l.Generation = 3 }))
	f.converge("app")
	got := f.llsd("app")
	assert.Equal(t, int64(3), got.Status.ObservedGeneration)
	for _, c := range got.Status.Conditions {
		assert.Equal(t, int64(3), c.ObservedGeneration, c.Type)
	}

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Workers = ptr.To(int32(2)) })
	f.converge("app")
	got = f.llsd("app")
	assert.Equal(t, int64(4), got.Generation)
	assert.Equal(t, int64(4), got.Status.ObservedGeneration)
}

func TestStatusPhaseFollowsTheDeployment(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	got := f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseInitializing, got.Status.Phase, "a Deployment without available pods")
	assert.Equal(t, v1alpha2.ReasonDeploymentScaling, cond(t, got, v1alpha2.ConditionDeploymentReady).Reason)
	assert.Equal(t, metav1.ConditionTrue, cond(t, got, v1alpha2.ConditionServiceReady).Status)
	assert.Equal(t, metav1.ConditionFalse, cond(t, got, v1alpha2.ConditionReady).Status)
	assert.Zero(t, got.Status.AvailableReplicas)
	f.events()

	assert.Equal(t, v1alpha2.ReasonRollingOut, cond(t, got, v1alpha2.ConditionProgressing).Reason)

	f.setDeploymentStatus("app", rolledOut)
	actions := f.sync("app")
	assert.Equal(t, []string{"update llamastackdistributions/status app"}, describe(mutating(actions)))
	got = f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	assert.Equal(t, int32(1), got.Status.AvailableReplicas)
	for _, ct := range []string{v1alpha2.ConditionReady, v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionServiceReady} {
		assert.Equal(t, metav1.ConditionTrue, cond(t, got, ct).Status, ct)
	}
	assert.Nil(t, findCondition(got, v1alpha2.ConditionStorageReady), "no StorageReady without storage")
	assert.Equal(t, 1, countEvents(f.events(), "Normal Ready"))
	require.Empty(t, describe(f.sync("app")), "status written only when it changed")

	// A pod goes away.
	f.setDeploymentStatus("app", func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 0 })
	f.sync("app")
	got = f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseInitializing, got.Status.Phase)
	assert.Zero(t, got.Status.AvailableReplicas)
	assert.Equal(t, metav1.ConditionFalse, cond(t, got, v1alpha2.ConditionReady).Status)
}

// A spec change rolls the pods while the old ones keep serving: Ready and
// DeploymentReady stay True (same lastTransitionTime), and Progressing shows the
// rollout, from the Deployment's status lagging its new generation to its end.
func TestRolloutKeepsReady(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	before := f.llsd("app")
	readySince := cond(t, before, v1alpha2.ConditionReady).LastTransitionTime
	assert.Equal(t, v1alpha2.ReasonRolloutComplete, cond(t, before, v1alpha2.ConditionProgressing).Reason)
	f.events()

	checkServing := func(step string) {
		t.Helper()
		got := f.llsd("app")
		assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase, step)
		for _, ct := range []string{v1alpha2.ConditionReady, v1alpha2.ConditionDeploymentReady} {
			c := cond(t, got, ct)
			assert.Equal(t, metav1.ConditionTrue, c.Status, "%s: %s %s", step, ct, c.Message)
		}
		assert.Equal(t, readySince, cond(t, got, v1alpha2.ConditionReady).LastTransitionTime, step)
	}

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = append(l.Spec.Server.ContainerSpec.Env, corev1.EnvVar{Name: "X", Value: "1"})
	})
	f.converge("app")
	// The fake API does not count generations: as the API server would for the new spec.
	f.setDeploymentStatus("app", func(d *appsv1.Deployment) { d.Generation = d.Status.ObservedGeneration + 1 })
	f.converge("app")
	d := f.deployment("app")
	require.Less(t, d.Status.ObservedGeneration, d.Generation, "the Deployment's status lags its new spec")
	checkServing("status lagging")
	assert.Equal(t, v1alpha2.ReasonRollingOut, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)

	// The new pod starts beside the old one (surge), then replaces it.
	f.setDeploymentStatus("app", func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	})
	f.converge("app")
	checkServing("surge")
	p := cond(t, f.llsd("app"), v1alpha2.ConditionProgressing)
	assert.Equal(t, metav1.ConditionTrue, p.Status)
	assert.Equal(t, v1alpha2.ReasonRollingOut, p.Reason)

	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	checkServing("done")
	assert.Equal(t, v1alpha2.ReasonRolloutComplete, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)
	assert.Zero(t, countEvents(f.events(), "Normal Ready"), "no second Ready Event")

	// A rollout that stopped making progress is False, with the Deployment's words.
	f.setDeploymentStatus("app", func(d *appsv1.Deployment) {
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "app-5d8" has timed out progressing.`}}
	})
	f.converge("app")
	p = cond(t, f.llsd("app"), v1alpha2.ConditionProgressing)
	assert.Equal(t, metav1.ConditionFalse, p.Status)
	assert.Equal(t, v1alpha2.ReasonProgressDeadlineExceeded, p.Reason)
	assert.Contains(t, p.Message, "has timed out progressing")

	// A fix: the new generation, not the stale deadline, is what the status tells.
	f.setDeploymentStatus("app", func(d *appsv1.Deployment) { d.Generation = d.Status.ObservedGeneration + 1 })
	f.converge("app")
	p = cond(t, f.llsd("app"), v1alpha2.ConditionProgressing)
	assert.Equal(t, metav1.ConditionTrue, p.Status)
	assert.Equal(t, v1alpha2.ReasonRollingOut, p.Reason)
}

// An HPA scaling above what the CR asks for does not make a serving CR unready while
// the new replicas start.
func TestHPAScaleUpKeepsReady(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 5}
	}))
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	require.Equal(t, v1alpha2.PhaseReady, f.llsd("app").Status.Phase)
	f.updateDeployment("app", hpaManager, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(int32(4)) })
	f.converge("app")
	assert.Equal(t, v1alpha2.PhaseReady, f.llsd("app").Status.Phase)
	assert.Equal(t, metav1.ConditionTrue, cond(t, f.llsd("app"), v1alpha2.ConditionReady).Status)
}

func TestStatusPendingWithoutADeployment(t *testing.T) {
	f := newFixture(t)
	l := newLLSD("app")
	st := f.c.calculateStatus(l, status.Observed{Service: children.NewService(l, children.AskedListening(l, ""))}, metav1.Now())
	assert.Equal(t, v1alpha2.PhasePending, st.Phase)
	l.Status = st
	assert.Equal(t, v1alpha2.ReasonDeploymentPending, cond(t, l, v1alpha2.ConditionDeploymentReady).Reason)
	assert.Equal(t, metav1.ConditionFalse, cond(t, l, v1alpha2.ConditionReady).Status)
}

// Upstream §12.1: an HPA above spec.replicas must not make the CR look unready.
func TestStatusReadyWhileTheHPAScaledAboveSpecReplicas(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 5}
	}))
	f.converge("app")
	f.scaleAsHPA("app", 4)
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	got := f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	assert.Equal(t, int32(4), got.Status.AvailableReplicas)
	assert.Equal(t, ptr.To(int32(1)), got.Spec.Workload.Replicas)
	assert.Equal(t, int32(4), f.replicas("app"))
}

func TestStatusReadyWithZeroReplicas(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 0 }))
	f.converge("app")
	assert.Equal(t, int32(0), f.replicas("app"))
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	got := f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	assert.Zero(t, got.Status.AvailableReplicas)
}

func TestStorageReadyFollowsThePVC(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
	}))
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	got := f.llsd("app")
	sr := cond(t, got, v1alpha2.ConditionStorageReady)
	assert.Equal(t, metav1.ConditionFalse, sr.Status)
	assert.Equal(t, v1alpha2.ReasonStorageFailed, sr.Reason)
	assert.Contains(t, sr.Message, "Pending")
	assert.Equal(t, v1alpha2.PhaseInitializing, got.Status.Phase, "not ready while the claim is unbound")
	assert.Equal(t, metav1.ConditionFalse, cond(t, got, v1alpha2.ConditionReady).Status)

	f.setPVCPhase("app-pvc", corev1.ClaimBound)
	f.converge("app")
	got = f.llsd("app")
	assert.Equal(t, metav1.ConditionTrue, cond(t, got, v1alpha2.ConditionStorageReady).Status)
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	assert.Equal(t, metav1.ConditionTrue, cond(t, got, v1alpha2.ConditionReady).Status)

	f.setPVCPhase("app-pvc", corev1.ClaimPending)
	f.converge("app")
	got = f.llsd("app")
	assert.Equal(t, metav1.ConditionFalse, cond(t, got, v1alpha2.ConditionStorageReady).Status)
	assert.NotEqual(t, v1alpha2.PhaseReady, got.Status.Phase)

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = nil })
	f.converge("app")
	got = f.llsd("app")
	assert.Nil(t, findCondition(got, v1alpha2.ConditionStorageReady), "StorageReady goes with the storage")
}

func TestLastTransitionTimeHoldsWhileAConditionKeepsItsStatus(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")

	// Move every transition into the past.
	past := metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	l := f.llsd("app")
	for i := range l.Status.Conditions {
		l.Status.Conditions[i].LastTransitionTime = past
	}
	_, err := f.client.LlamastackV1alpha2().LlamaStackDistributions(testNamespace).UpdateStatus(f.ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.refreshCaches()
	require.Empty(t, describe(f.sync("app")), "an unchanged condition is not rewritten with a new time")

	f.setDeploymentStatus("app", rolledOut)
	assert.Equal(t, []string{"update llamastackdistributions/status app"}, describe(mutating(f.sync("app"))))
	got := f.llsd("app")
	svcReady := cond(t, got, v1alpha2.ConditionServiceReady)
	assert.True(t, svcReady.LastTransitionTime.Equal(&past), "ServiceReady stayed True: %s", svcReady.LastTransitionTime)
	assert.True(t, cond(t, got, v1alpha2.ConditionDeploymentReady).LastTransitionTime.After(past.Time), "DeploymentReady turned True")
	assert.True(t, cond(t, got, v1alpha2.ConditionReady).LastTransitionTime.After(past.Time), "Ready turned True")
	require.Empty(t, describe(f.sync("app")))
}

func TestStatusIsWrittenOnlyWhenItChanges(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	actions := f.sync("app")
	assert.Contains(t, describe(actions), "update llamastackdistributions/status app")
	second := f.sync("app")
	require.Empty(t, describe(second))

	// A Deployment status change the CR does not report.
	f.setDeploymentStatus("app", func(d *appsv1.Deployment) {
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetCreated"}}
	})
	require.Empty(t, describe(f.sync("app")))
}

func TestStatusServiceURL(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	assert.Equal(t, "http://app-service.demo.svc.cluster.local:8321", f.llsd("app").Status.ServiceURL)

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Port = 9000 })
	f.converge("app")
	assert.Equal(t, "http://app-service.demo.svc.cluster.local:9000", f.llsd("app").Status.ServiceURL)
}

func TestStatusRouteURL(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	assert.Nil(t, f.llsd("app").Status.RouteURL, "no route without exposeRoute")

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true} })
	f.converge("app")
	assert.Equal(t, ptr.To(""), f.llsd("app").Status.RouteURL, "exposed, no address yet")

	ing := f.stored(kindIngress, "app-ingress").(*networkingv1.Ingress).DeepCopy()
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{Hostname: "llama.example.com"}}
	_, err := f.kubeclient.NetworkingV1().Ingresses(testNamespace).UpdateStatus(f.ctx, ing, metav1.UpdateOptions{FieldManager: "ingress-controller"})
	require.NoError(t, err)
	f.refreshCaches()
	actions := f.sync("app")
	assert.Equal(t, []string{"update llamastackdistributions/status app"}, describe(mutating(actions)))
	assert.Equal(t, ptr.To("http://llama.example.com"), f.llsd("app").Status.RouteURL)
	require.Empty(t, describe(f.sync("app")))

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Network.ExposeRoute = false })
	f.converge("app")
	assert.Nil(t, f.llsd("app").Status.RouteURL)
}

func TestTerminatingCRWritesOnlyItsStatus(t *testing.T) {
	f := newFixture(t, append(allChildrenObjects(), newLLSDv1("app", allChildren))...)
	f.converge("app")
	require.Equal(t, v1alpha2.PhaseInitializing, f.llsd("app").Status.Phase)

	l := f.llsd("app")
	l.DeletionTimestamp = ptr.To(metav1.Now())
	l.Finalizers = []string{"example.com/hold"}
	_, err := f.client.LlamastackV1alpha2().LlamaStackDistributions(testNamespace).Update(f.ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.refreshCaches()
	// A spec change while terminating is not acted on either.
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Port = 9000 })

	actions := f.sync("app")
	assert.Equal(t, []string{"update llamastackdistributions/status app"}, describe(actions), "no child is read or written")
	got := f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseTerminating, got.Status.Phase)
	ready := cond(t, got, v1alpha2.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, v1alpha2.ReasonTerminating, ready.Reason)
	require.Empty(t, describe(f.sync("app")))
}

func TestUnknownDistributionIsReportedOnce(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = "nope" }))
	actions := f.sync("app")
	assert.Equal(t, []string{"update llamastackdistributions/status app"}, describe(mutating(actions)))
	assert.Nil(t, f.stored(kindDeployment, "app"))
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonDistributionNotSupported,
		`"nope"`, "supported distributions: postgres-demo, starter (or set")
	// Names without a published image are not offered.
	msg := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Message
	assert.NotContains(t, msg, "remote-vllm")
	assert.NotContains(t, msg, "meta-reference-gpu")
	events := f.events()
	assert.Equal(t, 1, countEvents(events, "Warning DistributionNotSupported"), "events: %v", events)
	assert.True(t, hasEvent(events, "nope"))

	require.Empty(t, describe(f.sync("app")), "same problem: no status write")
	assert.Empty(t, f.events(), "same problem: no second Event")
}

func TestUnknownDistributionLeavesTheRunningDeploymentAlone(t *testing.T) {
	f := newFixture(t, newLLSDv1("app"))
	f.converge("app")
	before := f.deployment("app")
	f.events()

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Distribution.Name = "nope"
		l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "X", Value: "1"}}
	})
	actions := f.sync("app")
	assert.Empty(t, childWrites(actions))
	after := f.deployment("app")
	assert.Equal(t, before, after, "the Deployment is left as it runs")
	assert.Equal(t, testImage, serverContainerOf(t, after).Image)
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonDistributionNotSupported, "nope")
	assert.Equal(t, 1, countEvents(f.events(), "Warning DistributionNotSupported"))
	require.Empty(t, describe(f.sync("app")))
	assert.Empty(t, f.events())

	// Fixed: the CR converges again, with the pending spec change.
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = "starter" })
	f.converge("app")
	got := f.llsd("app")
	assert.NotEqual(t, v1alpha2.PhaseFailed, got.Status.Phase)
	assert.NotEqual(t, v1alpha2.ReasonDistributionNotSupported, cond(t, got, v1alpha2.ConditionDeploymentReady).Reason)
	assert.Equal(t, "1", envValue(t, serverContainerOf(t, f.deployment("app")).Env, "X"))
}

func TestSameProblemIsNotReportedAgainWhenTheStatusMoves(t *testing.T) {
	// Someone else's Service blocks only the Service: the Deployment still runs and its
	// status still moves, so the CR's status is rewritten while the problem stays.
	f := newFixture(t, newLLSD("app"), foreignObject(kindService, "app-service", true))
	f.converge("app")
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonResourceNotOwned, "Service demo/app-service")
	assert.Equal(t, 1, countEvents(f.events(), "Warning ResourceNotOwned"))

	f.setDeploymentStatus("app", rolledOut)
	assert.Equal(t, []string{"update llamastackdistributions/status app"}, describe(mutating(f.sync("app"))))
	got := f.llsd("app")
	assert.Equal(t, int32(1), got.Status.AvailableReplicas)
	requireUserError(t, got, v1alpha2.ReasonResourceNotOwned, "Service demo/app-service")
	assert.Zero(t, countEvents(f.events(), "Warning"), "the same problem is reported once")
	assert.Positive(t, f.c.recheck.NumRequeues(key("app")), "no event announces the fix: rechecked with backoff")

	// The Service goes away: the CR recovers and owns a Service of its own.
	require.NoError(t, f.kubeclient.CoreV1().Services(testNamespace).Delete(f.ctx, "app-service", metav1.DeleteOptions{}))
	f.refreshCaches()
	f.converge("app")
	got = f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	assertControlledChild(t, f.stored(kindService, "app-service"), got)
	assert.Zero(t, f.c.recheck.NumRequeues(key("app")), "the backoff is reset once resolved")
}

// The Events of a status change are recorded once the status write succeeded: a
// conflict and its retry record them once.
func TestStatusEventsAfterTheWrite(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Distribution.Name = "no-such-distribution"
	}))
	conflicts := 1
	f.client.PrependReactor("update", "llamastackdistributions", func(a core.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "llamastackdistributions"}, "app", errors.New("changed"))
		}
		return false, nil, nil
	})
	err := f.c.syncHandler(f.ctx, key("app"))
	require.True(t, apierrors.IsConflict(err), "%v", err)
	assert.Empty(t, f.events(), "an Event for a status that was not written")
	f.converge("app")
	assert.Equal(t, 1, countEvents(f.events(), "Warning DistributionNotSupported"))
}

// The ready gauge follows what the CR reports on every path, a failed sync included.
func TestReadyGaugeOnEveryPath(t *testing.T) {
	RegisterMetrics()
	labels := map[string]string{"namespace": testNamespace, "name": "app"}
	const name = "llama_stack_controller_llamastackdistribution_ready"
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	require.Equal(t, 1.0, gauge(t, name, labels))

	readyGauge.DeleteLabelValues(testNamespace, "app") // as in a new process
	f.kubeclient.PrependReactor("get", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("try later")
	})
	f.updateDeployment("app", "kubectl-label", func(d *appsv1.Deployment) { delete(d.Labels, llsd.LabelManagedBy) })
	require.Error(t, f.c.syncHandler(f.ctx, key("app")))
	assert.Equal(t, 1.0, gauge(t, name, labels), "a failed sync left the gauge unset")

	// Being deleted: not ready.
	l := f.llsd("app")
	l.DeletionTimestamp = ptr.To(metav1.Now())
	l.Finalizers = []string{"example.com/hold"}
	_, err := f.client.LlamastackV1alpha2().LlamaStackDistributions(testNamespace).Update(f.ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.refreshCaches()
	f.sync("app")
	assert.Equal(t, 0.0, gauge(t, name, labels))
}

// A child the controller did not try to make, because a problem stops the children, is
// not reported as failed.
func TestChildrenNotAttemptedAreNotFailed(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withUserConfigMap("missing", ""), func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
	}))
	f.converge("app")
	l := f.llsd("app")
	for _, ct := range []string{v1alpha2.ConditionServiceReady, v1alpha2.ConditionStorageReady} {
		c := cond(t, l, ct)
		assert.Equal(t, v1alpha2.ReasonNotAttempted, c.Reason, ct)
		assert.Contains(t, c.Message, "while the CR has a problem ("+v1alpha2.ReasonConfigMapNotFound+")", ct)
	}
}
