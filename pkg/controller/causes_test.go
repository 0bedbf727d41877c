package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

const missingSAMessage = `pods "app-5d8c-" is forbidden: error looking up service account demo/custom-sa: serviceaccount "custom-sa" not found`

// replicaFailure is the Deployment controller's status for pods it cannot create.
func replicaFailure(d *appsv1.Deployment) {
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetCreated"},
			{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: missingSAMessage},
		},
	}
}

// TestDeploymentCausesReachTheStatus: a Deployment that cannot create its pods (a
// missing ServiceAccount) or whose rollout ran out of time says why in its own
// conditions: the CR reports it (Failed, with the Deployment's reason and message, one
// Warning Event) instead of Initializing forever.
func TestDeploymentCausesReachTheStatus(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	f.events()

	f.setDeploymentStatus("app", replicaFailure)
	f.converge("app")
	got := f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseFailed, got.Status.Phase)
	for _, ct := range []string{v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionReady} {
		c := cond(t, got, ct)
		assert.Equal(t, metav1.ConditionFalse, c.Status, ct)
		assert.Equal(t, v1alpha2.ReasonReplicaFailure, c.Reason, ct)
		assert.Contains(t, c.Message, `serviceaccount "custom-sa" not found`, ct)
		assert.Contains(t, c.Message, "FailedCreate", ct)
	}
	events := f.events()
	assert.Equal(t, 1, countEvents(events, "Warning ReplicaFailure"), "events: %v", events)
	f.converge("app")
	assert.Empty(t, f.events(), "no Event without a change")

	// Fixed (the ServiceAccount made): the pods come up.
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	got = f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	assert.Equal(t, 1, countEvents(f.events(), "Normal Ready"))

	// A rollout past its deadline with nothing available.
	f.setDeploymentStatus("app", func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
			Message: `ReplicaSet "app-5d8c" has timed out progressing.`}}}
	})
	f.converge("app")
	got = f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseFailed, got.Status.Phase)
	c := cond(t, got, v1alpha2.ConditionReady)
	assert.Equal(t, v1alpha2.ReasonProgressDeadlineExceeded, c.Reason)
	assert.Contains(t, c.Message, "has timed out progressing")
	assert.Equal(t, 1, countEvents(f.events(), "Warning ProgressDeadlineExceeded"))

	// A condition about an older spec says nothing yet of the new one.
	f.setDeploymentStatus("app", func(d *appsv1.Deployment) {
		replicaFailure(d)
		d.Generation = d.Status.ObservedGeneration + 1
	})
	f.converge("app")
	assert.Equal(t, v1alpha2.ReasonDeploymentScaling, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason)
	assert.Equal(t, v1alpha2.PhaseInitializing, f.llsd("app").Status.Phase)
}

// TestScaledToZero: replicas 0 is a state asked for: Ready (reason ScaledToZero), with no
// server probed and a HealthCheck that says why.
func TestScaledToZero(t *testing.T) {
	srv := newFakeLlamaStack(t)
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 0 }))
	f.withProber(srv, time.Second)
	f.converge("app")
	assert.Equal(t, int32(0), *f.deployment("app").Spec.Replicas)
	got := f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	ready := cond(t, got, v1alpha2.ConditionReady)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, v1alpha2.ReasonScaledToZero, ready.Reason)
	assert.Equal(t, v1alpha2.ReasonScaledToZero, cond(t, got, v1alpha2.ConditionDeploymentReady).Reason)
	hc := cond(t, got, v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionUnknown, hc.Status)
	assert.Equal(t, v1alpha2.ReasonScaledToZero, hc.Reason)
	assert.Zero(t, srv.requests.Load(), "no server to probe")
	events := f.events()
	require.Equal(t, 1, countEvents(events, "Normal Ready"), "events: %v", events)
	assert.True(t, hasEvent(events, "scaled to zero"), "events: %v", events)

	// Scaled up again: not Ready until a replica serves.
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 1 })
	f.converge("app")
	assert.Equal(t, v1alpha2.PhaseInitializing, f.llsd("app").Status.Phase)
	assert.Equal(t, v1alpha2.ReasonServerNotAvailable, cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck).Reason)
}

// TestUserErrorTransitionsAreLogged: a user error appearing, changing and going away
// each leave one line at the default verbosity, not one per sync.
func TestUserErrorTransitionsAreLogged(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = "nope" }))
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(0)))
	f.ctx = klog.NewContext(f.ctx, logger)
	buffer := logger.GetSink().(ktesting.Underlier).GetBuffer()

	f.converge("app")
	f.sync("app")
	assert.Equal(t, 1, countLines(buffer.String(), "cannot converge"), "logs:\n%s", buffer.String())
	assert.Contains(t, buffer.String(), v1alpha2.ReasonDistributionNotSupported)

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = "starter" })
	f.converge("app")
	assert.Equal(t, 1, countLines(buffer.String(), "problem is resolved"), "logs:\n%s", buffer.String())
	assert.Equal(t, 1, countLines(buffer.String(), "cannot converge"))

	// A warning condition: one line when it appears, one when it goes.
	f.setDeploymentStatus("app", replicaFailure)
	f.converge("app")
	f.sync("app")
	assert.Equal(t, 1, countLines(buffer.String(), "has a warning"), "logs:\n%s", buffer.String())
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	assert.Equal(t, 1, countLines(buffer.String(), "warning is resolved"), "logs:\n%s", buffer.String())
}

// countLines counts the lines of logs that contain s.
func countLines(logs, s string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// TestForeignServiceIsNotProbed: a Service of someone else's under <n>-service (with
// the managed-by label, so it is in the cache) is never called, also with a user
// error that keeps the children as they are.
func TestForeignServiceIsNotProbed(t *testing.T) {
	for _, userError := range []bool{false, true} {
		srv := newFakeLlamaStack(t)
		f := newFixture(t, newLLSD("app"), foreignObject(kindService, "app-service", true))
		f.withProber(srv, time.Second)
		f.converge("app")
		f.setDeploymentStatus("app", rolledOut)
		if userError {
			f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = "nope" })
		}
		f.converge("app")
		assert.Zero(t, srv.requests.Load(), "the foreign Service was called (user error %v)", userError)
		hc := cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck)
		assert.Equal(t, metav1.ConditionUnknown, hc.Status)
		assert.Contains(t, hc.Message, "not the controller's")
		assert.Equal(t, metav1.ConditionFalse, cond(t, f.llsd("app"), v1alpha2.ConditionServiceReady).Status)
	}
}

// TestDeletedDuringSyncIsNotAnError: a CR deleted while it is synced (the cache still
// has it; its status write finds nothing) is dropped quietly, not logged as an error
// nor retried; a NotFound for something else still is.
func TestDeletedDuringSyncIsNotAnError(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(0)))
	ctx := klog.NewContext(f.ctx, logger)
	buffer := logger.GetSink().(ktesting.Underlier).GetBuffer()

	require.NoError(t, f.client.LlamastackV1alpha2().LlamaStackDistributions(testNamespace).Delete(f.ctx, "app", metav1.DeleteOptions{}))
	f.c.queue.Add(key("app"))
	require.True(t, f.c.processNextWorkItem(ctx))
	assert.NotContains(t, buffer.String(), "Error syncing", "logs:\n%s", buffer.String())
	assert.Zero(t, f.c.queue.NumRequeues(key("app")))

	// The real thing: the CR is there and something else is not found.
	g := newFixture(t, newLLSD("app"))
	g.c.syncHandler = func(context.Context, cache.ObjectName) error {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "app")
	}
	g.c.queue.Add(key("app"))
	require.True(t, g.c.processNextWorkItem(ctx))
	assert.Contains(t, buffer.String(), "Error syncing")
	assert.Equal(t, 1, g.c.queue.NumRequeues(key("app")))
}

// TestDeploymentCauseIsStableAndFirst: pods coming up one by one under a quota do not
// record a Warning each, and a missing ServiceAccount is named even when the Deployment
// lists its progress deadline first.
func TestDeploymentCauseIsStableAndFirst(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 3 }))
	f.converge("app")
	f.events()
	for available := range int32(3) {
		f.setDeploymentStatus("app", func(d *appsv1.Deployment) {
			replicaFailure(d)
			d.Status.Replicas, d.Status.AvailableReplicas = available, available
		})
		f.converge("app")
	}
	assert.Equal(t, 1, countEvents(f.events(), "Warning ReplicaFailure"), "one cause, one Warning")

	f.setDeploymentStatus("app", func(d *appsv1.Deployment) {
		replicaFailure(d)
		d.Status.Conditions = []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "app-5d8c" has timed out progressing.`},
			d.Status.Conditions[1],
		}
	})
	f.converge("app")
	c := cond(t, f.llsd("app"), v1alpha2.ConditionReady)
	assert.Equal(t, v1alpha2.ReasonReplicaFailure, c.Reason)
	assert.Contains(t, c.Message, `serviceaccount "custom-sa" not found`)
}
