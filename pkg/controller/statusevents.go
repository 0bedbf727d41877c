package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// updateStatus writes the status when it differs from the CR's, then records the Events
// of a phase change and of each new problem: only once the write succeeded, so a
// conflict and its retry cannot record them twice.
func (c *Controller) updateStatus(ctx context.Context, l *v1alpha2.LlamaStackDistribution, st v1alpha2.LlamaStackDistributionStatus, problems []fault.Problem) error {
	if equality.Semantic.DeepEqual(l.Status, st) {
		return nil
	}
	updated := l.DeepCopy()
	updated.Status = st
	_, err := c.client.LlamastackV1alpha2().LlamaStackDistributions(l.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Updated status", "phase", st.Phase)

	old := status.ReportedProblem(l.Status.Conditions)
	if len(problems) > 0 && (old == nil || old.Message != fault.Message(problems)) {
		// One line per transition, at the default verbosity, for whoever reads the logs.
		logger.Info("LlamaStackDistribution cannot converge until its spec or environment changes",
			"reason", problems[0].Reason, "problems", fault.Message(problems))
		for _, p := range problems {
			c.recorder.Event(l, corev1.EventTypeWarning, p.Reason, p.Message)
		}
	} else if len(problems) == 0 && old != nil {
		logger.Info("LlamaStackDistribution's problem is resolved", "was", old.Reason)
	}
	// Warnings held in conditions: one Event (and log line) each time one appears or
	// changes. A pod's problem is one while the reason and the pod are the same: its
	// message (a scheduler's node counts, a crash's exit) is not a new one. A stuck pod
	// of a rollout (Progressing) is told once, by DeploymentReady when that says it too.
	podStuckInRollout := func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue && status.PodReason(c.Reason) }
	for _, w := range []struct {
		condType string
		bad      func(*metav1.Condition) bool
	}{
		{v1alpha2.ConditionStorageInSync, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionFalse }},
		{v1alpha2.ConditionStorageAccessWarning, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue }},
		{v1alpha2.ConditionVolumeMountWarning, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue }},
		{v1alpha2.ConditionExposed, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionFalse }},
		{v1alpha2.ConditionDeploymentReady, func(c *metav1.Condition) bool { return status.DeploymentStuck([]metav1.Condition{*c}) != nil }},
		{v1alpha2.ConditionProgressing, func(c *metav1.Condition) bool {
			dr := meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionDeploymentReady)
			return podStuckInRollout(c) && (dr == nil || status.DeploymentStuck([]metav1.Condition{*dr}) == nil)
		}},
	} {
		now, was := meta.FindStatusCondition(st.Conditions, w.condType), meta.FindStatusCondition(l.Status.Conditions, w.condType)
		if now != nil && w.bad(now) && status.NewWarning(l.Status.Conditions, was, now, w.bad) {
			logger.Info("LlamaStackDistribution has a warning", "condition", w.condType, "reason", now.Reason, "message", now.Message)
			c.recorder.Event(l, corev1.EventTypeWarning, now.Reason, now.Message)
		} else if was != nil && w.bad(was) && (now == nil || !w.bad(now)) {
			logger.Info("LlamaStackDistribution's warning is resolved", "condition", w.condType, "was", was.Reason)
		}
	}
	if st.Phase != l.Status.Phase && st.Phase == v1alpha2.PhaseReady {
		msg := "LlamaStackDistribution is ready"
		if ready := meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionReady); ready != nil {
			msg = ready.Message
		}
		c.recorder.Event(l, corev1.EventTypeNormal, v1alpha2.ReasonReady, msg)
	}
	return nil
}
