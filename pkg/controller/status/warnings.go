package status

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
)

// What a status write tells the user once: a warning condition that is new, and the
// condition that reports the CR's problems. The controller's updateStatus records the
// Events and log lines; these decide when.

// PodReason tells whether a condition's reason is a pod's (rollout.ProblemOf): any but the
// controller's own.
func PodReason(reason string) bool {
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

// NewWarning tells whether a bad condition now is a new problem: was is the condition
// of the same type before, and previous every condition before.
func NewWarning(previous []metav1.Condition, was, now *metav1.Condition, bad func(*metav1.Condition) bool) bool {
	if was == nil || !bad(was) {
		return !samePodReport(previous, now)
	}
	return !sameWarning(was, now)
}

// sameWarning tells whether two bad conditions of a type say the same problem: the same
// message or, for a pod's problem, the same reason of the same pod.
func sameWarning(was, now *metav1.Condition) bool {
	if PodReason(now.Reason) && podOf(now.Message) != "" {
		return was.Reason == now.Reason && podOf(was.Message) == podOf(now.Message)
	}
	return was.Message == now.Message
}

// samePodReport tells whether one of the previous DeploymentReady and Progressing
// already reported the pod problem now reports: a stuck pod moving from one to the
// other (the old pods of a rollout going away) is not a new problem.
func samePodReport(previous []metav1.Condition, now *metav1.Condition) bool {
	if !PodReason(now.Reason) || podOf(now.Message) == "" {
		return false
	}
	for _, t := range []string{v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionProgressing} {
		if c := meta.FindStatusCondition(previous, t); c != nil && c.Reason == now.Reason && podOf(c.Message) == podOf(now.Message) {
			return true
		}
	}
	return false
}

// ReportedProblem is the condition that reports the CR's user errors, or nil when none
// does: DeploymentReady while nothing serves, Progressing (a change refused) while the
// Deployment serves as asked. A problem moving from one to the other is the same one.
func ReportedProblem(conds []metav1.Condition) *metav1.Condition {
	for _, t := range []string{v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionProgressing} {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionFalse && fault.IsReason(c.Reason) {
			return c
		}
	}
	return nil
}
