package controller

import (
	"context"
	"fmt"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// observed is what a sync found or made: the inputs of calculateStatus.
type observed struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	pvc        *corev1.PersistentVolumeClaim
	ingress    *networkingv1.Ingress
	// storage is what ensurePVC found; nil when it did not run.
	storage *storageSync
	// pod is why a current pod of the Deployment does not start; nil when none is stuck
	// (podProblemFor).
	pod *podProblem
	// probe is the server's last answer; nil before the first one (or without probing).
	probe *probeResult
	// problems are user errors, in the order found.
	problems []userError
	// mountsChecked: the server container's mounts were worked out, and nestedMounts
	// are those hiding part of another volume. Unchecked, the last report stands.
	mountsChecked bool
	nestedMounts  []mountNesting
	// generation is the config generation of a CR that asks for one; nil when it
	// did not run (the CR does not ask for one, or an earlier input failed).
	generation *generation
	// rollback is what the Deployment's ensure found and did about automatic
	// rollback; nil when it did not run (status.rollback then stays as it is).
	rollback *rollbackOutcome
}

// calculateStatus computes the CR's status from what was observed. It is pure: now is
// used only for times that change (a condition flipping, the operator version changing).
func (c *Controller) calculateStatus(l *v1alpha2.LlamaStackDistribution, obs observed, now metav1.Time) v1alpha2.LlamaStackDistributionStatus {
	st := *l.Status.DeepCopy()
	st.ObservedGeneration = l.Generation

	serverVersion := st.Version.LlamaStackServerVersion
	if obs.probe != nil && obs.probe.info.version != "" {
		serverVersion = obs.probe.info.version
	}
	if st.Version.OperatorVersion != c.operatorVersion || st.Version.LlamaStackServerVersion != serverVersion || st.Version.LastUpdated == nil {
		st.Version.OperatorVersion = c.operatorVersion
		st.Version.LlamaStackServerVersion = serverVersion
		st.Version.LastUpdated = ptr.To(now)
	}
	st.DistributionConfig.ActiveDistribution = distributionLabel(l)
	st.DistributionConfig.AvailableDistributions = maps.Clone(c.distributions)
	maps.DeleteFunc(st.DistributionConfig.AvailableDistributions, func(_, image string) bool { return image == "" })

	set := func(condType string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: condType, Status: status, Reason: reason, Message: truncate(message, maxConditionMessage, truncatedMark),
			ObservedGeneration: l.Generation, LastTransitionTime: now,
		})
	}

	if l.DeletionTimestamp != nil {
		st.Phase = v1alpha2.PhaseTerminating
		set(v1alpha2.ConditionReady, metav1.ConditionFalse, v1alpha2.ReasonTerminating, "LlamaStackDistribution is being deleted")
		return st
	}

	// Generated config: only for a CR that asks for one; what runs is described by
	// resolvedDistribution, kept as it was while generation fails.
	switch g := obs.generation; {
	case !generatesConfig(l):
		// A CR that stopped generating drops what described it; one that never
		// generated keeps its status as it is.
		if meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionConfigGenerated) != nil {
			st.ResolvedDistribution = nil
			meta.RemoveStatusCondition(&st.Conditions, v1alpha2.ConditionConfigGenerated)
		}
	case g == nil:
	case g.problem != nil:
		set(v1alpha2.ConditionConfigGenerated, metav1.ConditionFalse, g.problem.reason, g.problem.message)
	default:
		if len(obs.problems) == 0 {
			st.ResolvedDistribution = g.resolved.DeepCopy()
		}
		msg := fmt.Sprintf("Generated ConfigMap %s for server %s from %s", g.configMapName(l), g.resolved.ServerVersion, g.resolved.ConfigSource)
		if len(obs.problems) > 0 {
			// Nothing was applied: the ConfigMap may not exist, or be someone else's
			// object of that name, so it is not named.
			msg = fmt.Sprintf("Generated a config for server %s from %s; it is not rolled out while the CR has a problem (%s)",
				g.resolved.ServerVersion, g.resolved.ConfigSource, obs.problems[0].reason)
		} else if obs.rollback != nil && obs.rollback.held {
			msg += "; its rollout failed and was rolled back: the Deployment runs the config that served before (Progressing)"
		}
		set(v1alpha2.ConditionConfigGenerated, metav1.ConditionTrue, v1alpha2.ReasonConfigGenerated, msg)
	}

	// Deployment. A problem keeps the Deployment as it runs: while it serves as asked
	// (with the Service, and the storage if any), the CR stays Ready and the problem is
	// a change refused, in Progressing; while nothing serves, it is why the CR is not.
	deploymentIsReady, reason, message := deploymentReady(l, obs.deployment, obs.pod)
	servesAsAsked := deploymentIsReady && obs.service != nil && storageBound(l, obs.pvc)
	refused := len(obs.problems) > 0 && servesAsAsked
	if len(obs.problems) > 0 && !servesAsAsked {
		set(v1alpha2.ConditionDeploymentReady, metav1.ConditionFalse, obs.problems[0].reason, problemsMessage(obs.problems))
	} else {
		status := metav1.ConditionFalse
		if deploymentIsReady {
			status = metav1.ConditionTrue
		}
		set(v1alpha2.ConditionDeploymentReady, status, reason, message)
	}
	if rb := obs.rollback; rb != nil {
		st.Rollback = rb.status.DeepCopy()
	}
	switch {
	case obs.deployment == nil:
		meta.RemoveStatusCondition(&st.Conditions, v1alpha2.ConditionProgressing)
	case refused:
		set(v1alpha2.ConditionProgressing, metav1.ConditionFalse, obs.problems[0].reason, problemsMessage(obs.problems))
	case obs.rollback != nil && obs.rollback.held:
		// The failed inputs are held back: what runs is the last that served.
		set(v1alpha2.ConditionProgressing, metav1.ConditionFalse, v1alpha2.ReasonRolledBack, rolledBackMessage(obs.rollback.status))
	default:
		status, reason, message := rolloutProgress(obs.deployment, obs.pod)
		if obs.rollback != nil && obs.rollback.note != "" {
			message += "; " + obs.rollback.note
		}
		set(v1alpha2.ConditionProgressing, status, reason, message)
	}

	// The server's own answer, asked while at least one replica serves.
	previous := meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionHealthCheck)
	switch {
	case c.prober == nil:
		meta.RemoveStatusCondition(&st.Conditions, v1alpha2.ConditionHealthCheck)
	case scaledToZero(l) && !serving(obs.deployment):
		set(v1alpha2.ConditionHealthCheck, metav1.ConditionUnknown, v1alpha2.ReasonScaledToZero, "Scaled to zero: no server runs to ask")
		st.DistributionConfig.Providers = nil
	case !serving(obs.deployment):
		set(v1alpha2.ConditionHealthCheck, metav1.ConditionFalse, v1alpha2.ReasonServerNotAvailable, "No replica of the server is available")
		st.DistributionConfig.Providers = nil
	case obs.service == nil:
		set(v1alpha2.ConditionHealthCheck, metav1.ConditionUnknown, v1alpha2.ReasonHealthCheckPending,
			fmt.Sprintf("Not asked: the server is asked through Service %s, which is not the controller's (or not made yet)", serviceName(l)))
		st.DistributionConfig.Providers = nil
	case obs.probe == nil && previous != nil && previous.Reason != v1alpha2.ReasonServerNotAvailable &&
		previous.Reason != v1alpha2.ReasonHealthCheckPending:
		// No answer yet in this process (a restart): keep the last one reported.
	case obs.probe == nil:
		set(v1alpha2.ConditionHealthCheck, metav1.ConditionUnknown, v1alpha2.ReasonHealthCheckPending, "Waiting for the server's first health check")
	case obs.probe.info.healthy:
		set(v1alpha2.ConditionHealthCheck, metav1.ConditionTrue, v1alpha2.ReasonHealthCheckPassed, "Health check passed")
		if obs.probe.info.providersKnown {
			st.DistributionConfig.Providers = obs.probe.info.providers
		}
	default:
		set(v1alpha2.ConditionHealthCheck, metav1.ConditionFalse, v1alpha2.ReasonHealthCheckFailed, obs.probe.info.healthMsg)
		st.DistributionConfig.Providers = nil
	}
	st.AvailableReplicas, st.Replicas = 0, 0
	if obs.deployment != nil {
		st.AvailableReplicas = obs.deployment.Status.AvailableReplicas
		st.Replicas = obs.deployment.Status.Replicas
	}
	st.Selector = labels.SelectorFromSet(selectorLabels(l)).String()

	// Service.
	if obs.service != nil {
		set(v1alpha2.ConditionServiceReady, metav1.ConditionTrue, v1alpha2.ReasonServiceReady, "Service is ready")
		st.ServiceURL = serviceURL(l, servesTLS(obs.deployment))
	} else if len(obs.problems) > 0 {
		// Not attempted: a problem stops the children where they are.
		set(v1alpha2.ConditionServiceReady, metav1.ConditionFalse, v1alpha2.ReasonNotAttempted,
			fmt.Sprintf("Service %s is not created while the CR has a problem (%s)", serviceName(l), obs.problems[0].reason))
	} else {
		set(v1alpha2.ConditionServiceReady, metav1.ConditionFalse, v1alpha2.ReasonServiceFailed,
			fmt.Sprintf("Service %s is not created yet", serviceName(l)))
	}

	// Storage.
	if l.Spec.Workload.Storage == nil {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha2.ConditionStorageReady)
		meta.RemoveStatusCondition(&st.Conditions, v1alpha2.ConditionStorageInSync)
		meta.RemoveStatusCondition(&st.Conditions, v1alpha2.ConditionStorageAccessWarning)
	} else {
		if s := obs.storage; s != nil {
			status := metav1.ConditionFalse
			if s.inSync {
				status = metav1.ConditionTrue
			}
			set(v1alpha2.ConditionStorageInSync, status, s.reason, s.message)
		}
		if sharedReadWriteOnce(l, obs.pvc) {
			set(v1alpha2.ConditionStorageAccessWarning, metav1.ConditionTrue, v1alpha2.ReasonReadWriteOnceShared,
				"ReadWriteOnce storage with more than one replica or autoscaling: pods scheduled to another node cannot mount the volume; use storage.accessModes [ReadWriteMany] or one replica")
		} else {
			meta.RemoveStatusCondition(&st.Conditions, v1alpha2.ConditionStorageAccessWarning)
		}
		switch p := obs.pvc; {
		case p == nil && len(obs.problems) > 0:
			set(v1alpha2.ConditionStorageReady, metav1.ConditionFalse, v1alpha2.ReasonNotAttempted,
				fmt.Sprintf("PersistentVolumeClaim %s is not created while the CR has a problem (%s)", pvcName(l), obs.problems[0].reason))
		case p == nil:
			set(v1alpha2.ConditionStorageReady, metav1.ConditionFalse, v1alpha2.ReasonStorageFailed,
				fmt.Sprintf("PersistentVolumeClaim %s is not created yet", pvcName(l)))
		case p.DeletionTimestamp != nil:
			set(v1alpha2.ConditionStorageReady, metav1.ConditionFalse, v1alpha2.ReasonStorageFailed, fmt.Sprintf(
				"PersistentVolumeClaim %s is being deleted: it goes once no pod mounts it, then a new one is made", p.Name))
		case p.Status.Phase != corev1.ClaimBound:
			phase := string(p.Status.Phase)
			if phase == "" {
				phase = string(corev1.ClaimPending)
			}
			set(v1alpha2.ConditionStorageReady, metav1.ConditionFalse, v1alpha2.ReasonStorageFailed, "PVC is not bound: "+phase)
		default:
			set(v1alpha2.ConditionStorageReady, metav1.ConditionTrue, v1alpha2.ReasonStorageReady, "Storage is ready")
		}
	}

	// Mounts nested in another volume's directory.
	if obs.mountsChecked {
		if msg := nestedMountsMessage(obs.nestedMounts); msg != "" {
			set(v1alpha2.ConditionVolumeMountWarning, metav1.ConditionTrue, v1alpha2.ReasonNestedMountPaths, msg)
		} else {
			meta.RemoveStatusCondition(&st.Conditions, v1alpha2.ConditionVolumeMountWarning)
		}
	}

	// Route.
	st.RouteURL = nil
	if wantsIngress(l) {
		url := ""
		if obs.ingress != nil {
			url = ingressURL(obs.ingress)
		}
		st.RouteURL = ptr.To(url)
	}

	// Aggregate.
	stuck := deploymentStuck(st.Conditions)
	switch {
	case len(obs.problems) > 0 && !refused:
		st.Phase = v1alpha2.PhaseFailed
		set(v1alpha2.ConditionReady, metav1.ConditionFalse, obs.problems[0].reason, problemsMessage(obs.problems))
	case obs.deployment == nil:
		st.Phase = v1alpha2.PhasePending
		set(v1alpha2.ConditionReady, metav1.ConditionFalse, v1alpha2.ReasonNotReady, "Deployment is pending")
	case servesAsAsked && scaledToZero(l):
		st.Phase = v1alpha2.PhaseReady
		set(v1alpha2.ConditionReady, metav1.ConditionTrue, v1alpha2.ReasonScaledToZero, scaledToZeroMessage)
	case servesAsAsked:
		st.Phase = v1alpha2.PhaseReady
		set(v1alpha2.ConditionReady, metav1.ConditionTrue, v1alpha2.ReasonReady, "LlamaStackDistribution is ready")
	case stuck != nil:
		// The Deployment says why it is not coming up: that is the answer.
		st.Phase = v1alpha2.PhaseFailed
		set(v1alpha2.ConditionReady, metav1.ConditionFalse, stuck.Reason, stuck.Message)
	default:
		st.Phase = v1alpha2.PhaseInitializing
		set(v1alpha2.ConditionReady, metav1.ConditionFalse, v1alpha2.ReasonNotReady, firstFalseMessage(st.Conditions))
	}
	return st
}

// storageBound tells whether the CR's storage, if it asks for any, is ready: its claim
// exists, is not being deleted, and is Bound (StorageReady True).
func storageBound(l *v1alpha2.LlamaStackDistribution, p *corev1.PersistentVolumeClaim) bool {
	return l.Spec.Workload.Storage == nil || (p != nil && p.DeletionTimestamp == nil && p.Status.Phase == corev1.ClaimBound)
}

// serving tells whether at least one replica of the Deployment is available to answer.
func serving(d *appsv1.Deployment) bool {
	return d != nil && d.Status.AvailableReplicas > 0
}

// deploymentReady tells whether the server is available at the desired count: as many
// replicas available as the Deployment asks for (its own spec.replicas, whoever set it),
// but never more than the CR asks for (workload.replicas, or the HPA's lower bound while
// autoscaling), so an HPA scaling up does not make a serving CR unready. A rollout that
// keeps the replicas available leaves it ready (see rolloutProgress); with the reason
// and message of DeploymentReady. pod is why a current pod does not start, if one is stuck.
func deploymentReady(l *v1alpha2.LlamaStackDistribution, d *appsv1.Deployment, pod *podProblem) (bool, string, string) {
	if d == nil {
		return false, v1alpha2.ReasonDeploymentPending, "Deployment is pending"
	}
	if scaledToZero(l) {
		return true, v1alpha2.ReasonScaledToZero, "Deployment is scaled to zero"
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	if l.Spec.Workload.Autoscaling != nil {
		want = min(want, hpaMinReplicas(l))
	} else {
		want = min(want, specReplicas(l))
	}
	have := d.Status.AvailableReplicas
	if have >= want {
		return true, v1alpha2.ReasonDeploymentReady, "Deployment is ready"
	}
	// What the Deployment already says of its current spec is the cause: pods it cannot
	// create first, then a pod that does not start, in its own words (a rollout that
	// ran out of time is often the consequence of either). The message holds the
	// Deployment's or the pod's words and no counts, so it changes only with the cause
	// (one Warning Event per cause, not one per pod that starts).
	if d.Status.ObservedGeneration >= d.Generation {
		if c := deploymentCondition(d, appsv1.DeploymentReplicaFailure); c != nil && c.Status == corev1.ConditionTrue {
			return false, v1alpha2.ReasonReplicaFailure, fmt.Sprintf("Deployment cannot create pods (%s): %s", c.Reason, c.Message)
		}
		if pod != nil {
			return false, pod.reason, pod.message
		}
		if c := deploymentCondition(d, appsv1.DeploymentProgressing); c != nil && c.Status == corev1.ConditionFalse && c.Reason == v1alpha2.ReasonProgressDeadlineExceeded {
			return false, v1alpha2.ReasonProgressDeadlineExceeded, "Deployment stopped making progress before enough replicas were available: " + c.Message
		}
	}
	return false, v1alpha2.ReasonDeploymentScaling, fmt.Sprintf("Deployment has %d of %d replicas available", have, want)
}

// deploymentCondition returns the Deployment's condition of that type, or nil.
func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// scaledToZero tells whether the CR asks for no server: workload.replicas 0 without
// autoscaling. It is Ready once the Deployment exists (and the Service, and storage if
// asked): there is nothing to wait for, and no server to probe.
func scaledToZero(l *v1alpha2.LlamaStackDistribution) bool {
	return l.Spec.Workload.Autoscaling == nil && specReplicas(l) == 0
}

const scaledToZeroMessage = "LlamaStackDistribution is scaled to zero (spec.replicas is 0): no server runs"

// deploymentStuck returns DeploymentReady when it says the Deployment cannot come up
// without a change (it cannot create pods, a pod does not start, or its rollout ran
// out of time); else nil.
func deploymentStuck(conds []metav1.Condition) *metav1.Condition {
	c := meta.FindStatusCondition(conds, v1alpha2.ConditionDeploymentReady)
	if c != nil && c.Status == metav1.ConditionFalse && stuckReason(c.Reason) {
		return c
	}
	return nil
}

// stuckReason tells whether a reason of a False DeploymentReady says why the Deployment
// cannot come up: ReplicaFailure, ProgressDeadlineExceeded, or a pod's own reason
// (podProblemOf), which is the kubelet's or the scheduler's and so not a closed list,
// but never one the controller gives with another meaning (ownReason: containerProblem
// does not pass those on), such as a user error's.
func stuckReason(reason string) bool {
	return reason == v1alpha2.ReasonReplicaFailure || reason == v1alpha2.ReasonProgressDeadlineExceeded || podReason(reason)
}

// rolloutProgress is the Progressing condition: whether the Deployment has rolled out
// its current spec to every replica, as kubectl rollout status tells it. pod is why a
// pod of the current ReplicaSet does not start, if one is stuck: while rolling out,
// Progressing stays True but takes the pod's reason, its message first. The old pods
// may still serve (DeploymentReady stays True), and this is where the CR names what
// holds the rollout up before its progress deadline.
func rolloutProgress(d *appsv1.Deployment, pod *podProblem) (metav1.ConditionStatus, string, string) {
	if d.Status.ObservedGeneration < d.Generation {
		// A new spec: whatever the status says is about the one before.
		return metav1.ConditionTrue, v1alpha2.ReasonRollingOut, "Deployment rollout is starting"
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == v1alpha2.ReasonProgressDeadlineExceeded {
			return metav1.ConditionFalse, v1alpha2.ReasonProgressDeadlineExceeded, "Deployment rollout stopped making progress: " + c.Message
		}
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	switch {
	case s.UpdatedReplicas < want || s.Replicas > s.UpdatedReplicas || s.AvailableReplicas < s.UpdatedReplicas:
		msg := fmt.Sprintf("Deployment is rolling out: %d of %d replicas updated and available", min(s.UpdatedReplicas, s.AvailableReplicas), want)
		for _, c := range s.Conditions {
			if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
				msg += fmt.Sprintf("; it cannot create pods (%s): %s", c.Reason, c.Message)
			}
		}
		if pod != nil {
			return metav1.ConditionTrue, pod.reason, pod.message + "; " + msg
		}
		return metav1.ConditionTrue, v1alpha2.ReasonRollingOut, msg
	}
	return metav1.ConditionTrue, v1alpha2.ReasonRolloutComplete, "Deployment has rolled out"
}

// maxConditionMessage is the longest condition message the API accepts, in bytes.
const maxConditionMessage = 32768

func problemsMessage(problems []userError) string {
	msgs := make([]string, 0, len(problems))
	for _, p := range problems {
		msgs = append(msgs, p.message)
	}
	return strings.Join(msgs, "; ")
}

// firstFalseMessage returns the message of the first component condition that is not True.
func firstFalseMessage(conds []metav1.Condition) string {
	for _, t := range []string{v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionServiceReady, v1alpha2.ConditionStorageReady} {
		if cond := meta.FindStatusCondition(conds, t); cond != nil && cond.Status != metav1.ConditionTrue {
			return cond.Message
		}
	}
	return "not ready"
}

// updateStatus writes the status when it differs from the CR's, then records the Events
// of a phase change and of each new problem: only once the write succeeded, so a
// conflict and its retry cannot record them twice.
func (c *Controller) updateStatus(ctx context.Context, l *v1alpha2.LlamaStackDistribution, st v1alpha2.LlamaStackDistributionStatus, problems []userError) error {
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
	if len(problems) > 0 && (old == nil || old.Message != problemsMessage(problems)) {
		// One line per transition, at the default verbosity, for whoever reads the logs.
		logger.Info("LlamaStackDistribution cannot converge until its spec or environment changes",
			"reason", problems[0].reason, "problems", problemsMessage(problems))
		for _, p := range problems {
			c.recorder.Event(l, corev1.EventTypeWarning, p.reason, p.message)
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

// podReason tells whether a condition's reason is a pod's (podProblemOf): any but the
// controller's own.
func podReason(reason string) bool {
	return !ownReason(reason)
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
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionFalse && isProblemReason(c.Reason) {
			return c
		}
	}
	return nil
}

// isProblemReason tells whether reason is one of a user error (userError.reason).
func isProblemReason(reason string) bool {
	switch reason {
	case v1alpha2.ReasonDistributionNotSupported, v1alpha2.ReasonDistributionNotPublished, v1alpha2.ReasonConfigMapNotFound, v1alpha2.ReasonConfigMapKeyMissing,
		v1alpha2.ReasonConfigMapNotAllowed, v1alpha2.ReasonCABundleInvalid, v1alpha2.ReasonTLSSecretNotFound, v1alpha2.ReasonTLSSecretInvalid, v1alpha2.ReasonResourceNotOwned,
		v1alpha2.ReasonResourceInvalid, v1alpha2.ReasonDeploymentFailed, v1alpha2.ReasonBaseConfigRequired,
		v1alpha2.ReasonConfigInvalid, v1alpha2.ReasonServerVersionNotSupported:
		return true
	}
	return false
}
