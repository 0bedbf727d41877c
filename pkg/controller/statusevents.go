package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
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

	old := reportedProblem(l.Status.Conditions)
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
	podStuckInRollout := func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue && podReason(c.Reason) }
	for _, w := range []struct {
		condType string
		bad      func(*metav1.Condition) bool
	}{
		{v1alpha2.ConditionStorageInSync, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionFalse }},
		{v1alpha2.ConditionStorageAccessWarning, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue }},
		{v1alpha2.ConditionVolumeMountWarning, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue }},
		{v1alpha2.ConditionExposed, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionFalse }},
		{v1alpha2.ConditionDeploymentReady, func(c *metav1.Condition) bool { return deploymentStuck([]metav1.Condition{*c}) != nil }},
		{v1alpha2.ConditionProgressing, func(c *metav1.Condition) bool {
			dr := meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionDeploymentReady)
			return podStuckInRollout(c) && (dr == nil || deploymentStuck([]metav1.Condition{*dr}) == nil)
		}},
	} {
		now, was := meta.FindStatusCondition(st.Conditions, w.condType), meta.FindStatusCondition(l.Status.Conditions, w.condType)
		if now != nil && w.bad(now) && newWarning(l.Status.Conditions, was, now, w.bad) {
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

// podReason tells whether a condition's reason is a pod's (rollout.ProblemOf): any but the
// controller's own.
func podReason(reason string) bool {
	return !rollout.OwnReason(reason)
}

// podOf is the pod a pod problem's message names ("pod <name>: ..."), or "".
func podOf(message string) string {
	rest, ok := strings.CutPrefix(message, "pod ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, ":")
	return name
}

// newWarning tells whether a bad condition now is a new problem: was is the condition
// of the same type before, and previous every condition before.
func newWarning(previous []metav1.Condition, was, now *metav1.Condition, bad func(*metav1.Condition) bool) bool {
	if was == nil || !bad(was) {
		return !samePodReport(previous, now)
	}
	return !sameWarning(was, now)
}

// sameWarning tells whether two bad conditions of a type say the same problem: the same
// message or, for a pod's problem, the same reason of the same pod.
func sameWarning(was, now *metav1.Condition) bool {
	if podReason(now.Reason) && podOf(now.Message) != "" {
		return was.Reason == now.Reason && podOf(was.Message) == podOf(now.Message)
	}
	return was.Message == now.Message
}

// samePodReport tells whether one of the previous DeploymentReady and Progressing
// already reported the pod problem now reports: a stuck pod moving from one to the
// other (the old pods of a rollout going away) is not a new problem.
func samePodReport(previous []metav1.Condition, now *metav1.Condition) bool {
	if !podReason(now.Reason) || podOf(now.Message) == "" {
		return false
	}
	for _, t := range []string{v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionProgressing} {
		if c := meta.FindStatusCondition(previous, t); c != nil && c.Reason == now.Reason && podOf(c.Message) == podOf(now.Message) {
			return true
		}
	}
	return false
}

// reportedProblem is the condition that reports the CR's user errors, or nil when none
// does: DeploymentReady while nothing serves, Progressing (a change refused) while the
// Deployment serves as asked. A problem moving from one to the other is the same one.
func reportedProblem(conds []metav1.Condition) *metav1.Condition {
	for _, t := range []string{v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionProgressing} {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionFalse && fault.IsReason(c.Reason) {
			return c
		}
	}
	return nil
}
