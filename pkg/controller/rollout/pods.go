package rollout

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/truncate"
)

// Why a server pod does not start. The Deployment counts its pods but does not say why
// one is not available: a missing Secret or key the env refers to (the controller never
// reads Secrets), an image that cannot be pulled, a crash loop or no node to run on are
// told only in the pod's status, by the kubelet or the scheduler. The CR reports the
// first such pod of the current ReplicaSet, in the pod's own words: in DeploymentReady
// while the Deployment is not available (deploymentReady), else in Progressing while a
// rollout's old pods serve (Progress).

// PodProblem is why a pod does not start: a condition reason and a message naming the
// pod (and the container) with the kubelet's or the scheduler's words.
type PodProblem struct {
	Reason, Message string
	// continuing: the container runs again after it exited, and is not ready. That is
	// a crash loop between two back-offs only if one was reported already (the CR's
	// status says it, see PodProblemFor): the same words continue it, so the status
	// does not flip at each restart; but a container that exited once, long ago, and
	// whose readiness fails now is not crash-looping.
	continuing bool
}

// maxPodDetail caps what is quoted of a kubelet, scheduler or container message.
const maxPodDetail = 1024

// ProblemOf tells why the pod does not start, or nil when nothing the controller
// recognises holds it up: it is being scheduled or started, it runs, it is terminating
// or it has ended. It reads only what TransformPod keeps, and its answer changes only
// when the cause does, so that it can decide both what the status says and when a pod
// change is worth a sync (podHandler).
func ProblemOf(p *corev1.Pod) *PodProblem {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return nil
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &PodProblem{Reason: v1alpha2.ReasonUnschedulable, Message: fmt.Sprintf("pod %s: %s", p.Name, detail(c.Message, "no node can run it"))}
		}
	}
	for _, s := range p.Status.InitContainerStatuses {
		if pr := containerProblem(p.Name, "init container", &s, true); pr != nil {
			return pr
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if pr := containerProblem(p.Name, "container", &s, false); pr != nil {
			return pr
		}
	}
	return nil
}

// Waiting reasons of a container that is starting normally.
var startingReasons = []string{"", "ContainerCreating", "PodInitializing"}

// Waiting reasons of an image that cannot be pulled: the kubelet reports the error of
// an attempt under its own reason (ErrImagePull, RegistryUnavailable,
// SignatureValidationFailed), then ImagePullBackOff until the next attempt, with a
// message that wraps the same error.
var pullReasons = []string{"ErrImagePull", "RegistryUnavailable", "SignatureValidationFailed", v1alpha2.ReasonImagePullBackOff}

func containerProblem(pod, kind string, s *corev1.ContainerStatus, init bool) *PodProblem {
	prefix := fmt.Sprintf("pod %s: %s %s: ", pod, kind, s.Name)
	w := s.State.Waiting
	switch {
	case w != nil && slices.Contains(pullReasons, w.Reason):
		return &PodProblem{Reason: v1alpha2.ReasonImagePullBackOff, Message: prefix + detail(stableNetError(pullError(w)), w.Reason)}
	case w != nil && w.Reason == v1alpha2.ReasonCrashLoopBackOff:
		return crashProblem(prefix, s.LastTerminationState.Terminated)
	case w != nil && !slices.Contains(startingReasons, w.Reason):
		if !conditionReason.MatchString(w.Reason) || len(w.Reason) > 1024 || OwnReason(w.Reason) {
			// Not a reason a condition can hold, or one the controller gives with a
			// meaning of its own (a user error, a rollout's progress): the kubelet's
			// reason goes in the message.
			said := w.Reason
			if m := strings.TrimSpace(w.Message); m != "" {
				said += ": " + m
			}
			return &PodProblem{Reason: v1alpha2.ReasonPodNotStarting, Message: prefix + detail(said, "")}
		}
		return &PodProblem{Reason: w.Reason, Message: prefix + detail(w.Message, w.Reason)}
	case w != nil || s.Ready:
		return nil
	}
	// Just exited: a crash, reported as the back-off that follows. An init container
	// that completed is done.
	if t := s.State.Terminated; t != nil {
		if init && t.ExitCode == 0 {
			return nil
		}
		return crashProblem(prefix, t)
	}
	// Running again, not ready, after an exit: maybe between two back-offs of a crash
	// loop, with the words of the back-off before (the same last exit).
	if t := s.LastTerminationState.Terminated; t != nil && s.State.Running != nil {
		pr := crashProblem(prefix, t)
		pr.continuing = true
		return pr
	}
	return nil
}

// OwnReason tells whether a reason is one the controller gives its conditions with a
// meaning of its own, which a pod's reason must not be taken for (a runtime calling an
// error ConfigInvalid is not the CR's config): every v1alpha2 reason but those of
// ProblemOf (PodReasons).
func OwnReason(reason string) bool {
	return ownReasons[reason]
}

// PodReasons are the reasons ProblemOf gives of its own; any other it gives is the
// kubelet's.
var PodReasons = []string{v1alpha2.ReasonUnschedulable, v1alpha2.ReasonCreateContainerConfigError, v1alpha2.ReasonImagePullBackOff,
	v1alpha2.ReasonInvalidImageName, v1alpha2.ReasonCreateContainerError, v1alpha2.ReasonRunContainerError,
	v1alpha2.ReasonCrashLoopBackOff, v1alpha2.ReasonPodNotStarting}

// OwnReasons are the reasons the controller gives with its own meaning, sorted.
func OwnReasons() []string {
	out := make([]string, 0, len(ownReasons))
	for r := range ownReasons {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// ownReasons are the v1alpha2 reasons but PodReasons (TestReasonsAreClassified checks
// that each is in one of the two).
var ownReasons = map[string]bool{
	v1alpha2.ReasonDeploymentReady: true, v1alpha2.ReasonDeploymentPending: true, v1alpha2.ReasonDeploymentScaling: true,
	v1alpha2.ReasonDeploymentFailed: true, v1alpha2.ReasonStorageReady: true, v1alpha2.ReasonStorageFailed: true,
	v1alpha2.ReasonServiceReady: true, v1alpha2.ReasonServiceFailed: true, v1alpha2.ReasonNotAttempted: true, v1alpha2.ReasonReady: true,
	v1alpha2.ReasonNotReady: true, v1alpha2.ReasonTerminating: true, v1alpha2.ReasonScaledToZero: true,
	v1alpha2.ReasonReplicaFailure: true, v1alpha2.ReasonRollingOut: true, v1alpha2.ReasonRolloutComplete: true, v1alpha2.ReasonRolledBack: true,
	v1alpha2.ReasonProgressDeadlineExceeded: true, v1alpha2.ReasonHealthCheckPassed: true, v1alpha2.ReasonHealthCheckFailed: true,
	v1alpha2.ReasonHealthCheckPending: true, v1alpha2.ReasonServerNotAvailable: true, v1alpha2.ReasonStorageInSync: true,
	v1alpha2.ReasonShrinkRefused: true, v1alpha2.ReasonStorageFieldImmutable: true, v1alpha2.ReasonResizeRefused: true,
	v1alpha2.ReasonResizing: true, v1alpha2.ReasonReadWriteOnceShared: true, v1alpha2.ReasonNestedMountPaths: true,
	v1alpha2.ReasonDistributionNotSupported: true, v1alpha2.ReasonDistributionNotPublished: true, v1alpha2.ReasonConfigMapNotFound: true, v1alpha2.ReasonConfigMapKeyMissing: true,
	v1alpha2.ReasonConfigMapNotAllowed: true, v1alpha2.ReasonCABundleInvalid: true, v1alpha2.ReasonTLSSecretNotFound: true, v1alpha2.ReasonTLSSecretInvalid: true, v1alpha2.ReasonResourceNotOwned: true,
	v1alpha2.ReasonResourceInvalid: true, v1alpha2.ReasonConfigGenerated: true, v1alpha2.ReasonBaseConfigRequired: true,
	v1alpha2.ReasonConfigInvalid: true, v1alpha2.ReasonServerVersionNotSupported: true, v1alpha2.ReasonSpecInvalid: true,
	v1alpha2.ReasonRouteAccepted: true, v1alpha2.ReasonRouteNotAccepted: true, v1alpha2.ReasonRoutePending: true, v1alpha2.ReasonAPINotServed: true,
	v1alpha2.ReasonBackendTLSNotServed: true, v1alpha2.ReasonGatewayNotFound: true,
}

// netAddrs is the local end of a Go network error (`read tcp 10.2.0.49:42728->23.20.95.219:443`):
// an ephemeral port, and an address of the node, different at each attempt.
var netAddrs = regexp.MustCompile(`\b((?:tcp|udp)[46]?) \S+:\d+->`)

// stableNetError drops the local end of the network errors in msg, so that a message
// says the same at each attempt that fails the same way (`read tcp 23.20.95.219:443:
// connection reset by peer`, as a dial error names it).
func stableNetError(msg string) string {
	return netAddrs.ReplaceAllString(msg, "$1 ")
}

// crashProblem describes a crash loop by how the container last exited: the kubelet's
// own message ("back-off 40s restarting failed container=... pod=...") says only how
// long it waits, which grows at each restart and would rewrite the status each time.
func crashProblem(prefix string, t *corev1.ContainerStateTerminated) *PodProblem {
	msg := "restarting after it failed"
	if t != nil {
		msg = fmt.Sprintf("restarting after it exited with code %d", t.ExitCode)
		if t.Reason != "" {
			msg += " (" + t.Reason + ")"
		}
		if m := strings.TrimSpace(t.Message); m != "" {
			msg += ": " + detail(m, "")
		}
	}
	return &PodProblem{Reason: v1alpha2.ReasonCrashLoopBackOff, Message: prefix + msg}
}

// pullError is the error of the last pull attempt, the same in the attempt's own state
// (reason and message) and in the back-off after it (`Back-off pulling image "x":
// <reason>: <message>`).
func pullError(w *corev1.ContainerStateWaiting) string {
	if w.Reason != v1alpha2.ReasonImagePullBackOff {
		return w.Reason + ": " + w.Message
	}
	rest, ok := strings.CutPrefix(w.Message, "Back-off pulling image ")
	if !ok {
		return w.Message
	}
	image, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return w.Message
	}
	if cause, ok := strings.CutPrefix(rest[len(image):], ": "); ok && cause != "" {
		return cause
	}
	return w.Message
}

// detail is a message read from the cluster, cut to maxPodDetail, or fallback when empty.
func detail(msg, fallback string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return fallback
	}
	return truncate.String(msg, maxPodDetail, truncate.Ellipsis)
}

// conditionReason is what metav1.Condition accepts as a reason.
var conditionReason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// RevisionAnnotation is the Deployment controller's revision of a Deployment and of
// each of its ReplicaSets: the current ReplicaSet has the Deployment's.
const RevisionAnnotation = "deployment.kubernetes.io/revision"

// PodProblemFor returns why a current pod of the CR's Deployment does not start, or
// nil. The pods are those of the Deployment's current ReplicaSet (those of older
// ReplicaSets are on their way out in a rollout, and what held them up may be what the
// new spec fixes); when the current one is not known yet, those of every ReplicaSet of
// the Deployment. Of several stuck pods the oldest is reported, so that the report
// stays on one pod while it is stuck. Everything is read from the caches.
func (r *Rollouts) PodProblemFor(l *v1alpha2.LlamaStackDistribution, dep *appsv1.Deployment) *PodProblem {
	if dep == nil || r.Pods == nil {
		return nil
	}
	owned, current := r.deploymentReplicaSets(l, dep)
	pods, err := r.Pods.Pods(l.Namespace).List(labels.SelectorFromSet(labels.Set{llsd.LabelInstance: l.Name}))
	if err != nil {
		return nil
	}
	SortOldestFirst(pods)
	for _, p := range pods {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil || ref.Kind != "ReplicaSet" {
			continue
		}
		rs := owned[ref.Name]
		if rs == nil || rs.UID != ref.UID || (current != nil && rs != current) {
			continue
		}
		if pr := ProblemOf(p); pr != nil && (!pr.continuing || reported(l, pr)) {
			return pr
		}
	}
	return nil
}

// reported tells whether the CR's status reports pr already, in DeploymentReady or
// Progressing: a crash loop that continues while the container runs again.
func reported(l *v1alpha2.LlamaStackDistribution, pr *PodProblem) bool {
	for _, t := range []string{v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionProgressing} {
		if c := meta.FindStatusCondition(l.Status.Conditions, t); c != nil && c.Reason == pr.Reason && strings.Contains(c.Message, pr.Message) {
			return true
		}
	}
	return false
}
