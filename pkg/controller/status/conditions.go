package status

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
)

// Each condition of the CR's status is the answer of one function here, pure, from
// what the sync observed; Calculate puts them together.

// resolvedDistribution is status.resolvedDistribution: what a generated config runs,
// kept as it was while the generation fails or the CR has a problem (nothing new is
// rolled out), dropped once the CR stops generating (prev and conds are the status as
// reported; a CR that never generated keeps what it had).
func resolvedDistribution(l *v1alpha2.LlamaStackDistribution, obs Observed, prev *v1alpha2.ResolvedDistributionStatus, conds []metav1.Condition) *v1alpha2.ResolvedDistributionStatus {
	g := obs.Generation
	switch {
	case !revision.GeneratesConfig(l):
		if meta.FindStatusCondition(conds, v1alpha2.ConditionConfigGenerated) != nil {
			return nil
		}
		return prev
	case g == nil || g.Problem != nil || len(obs.Problems) > 0:
		return prev
	}
	return g.Resolved.DeepCopy()
}

// configGeneratedCondition is ConfigGenerated: only for a CR that asks for a generated
// config, and kept as it is when the generation did not run.
func configGeneratedCondition(l *v1alpha2.LlamaStackDistribution, obs Observed) conditionUpdate {
	g := obs.Generation
	switch {
	case !revision.GeneratesConfig(l):
		return dropped
	case g == nil:
		return keepAsIs
	case g.Problem != nil:
		return setTo(metav1.ConditionFalse, g.Problem.Reason, g.Problem.Message)
	}
	msg := fmt.Sprintf("Generated ConfigMap %s for server %s from %s", g.ConfigMapName, g.Resolved.ServerVersion, g.Resolved.ConfigSource)
	if len(obs.Problems) > 0 {
		// Nothing was applied: the ConfigMap may not exist, or be someone else's
		// object of that name, so it is not named.
		msg = fmt.Sprintf("Generated a config for server %s from %s; it is not rolled out while the CR has a problem (%s)",
			g.Resolved.ServerVersion, g.Resolved.ConfigSource, obs.Problems[0].Reason)
	} else if obs.Rollback != nil && obs.Rollback.Held {
		msg += "; its rollout failed and was rolled back: the Deployment runs the config that served before (Progressing)"
	}
	return setTo(metav1.ConditionTrue, v1alpha2.ReasonConfigGenerated, msg)
}

// servesAsAsked tells whether the CR serves what it asks for: the Deployment ready,
// the Service made, and the storage bound if any.
func servesAsAsked(l *v1alpha2.LlamaStackDistribution, obs Observed) bool {
	ready, _, _ := deploymentReady(l, obs.Deployment, obs.Pod)
	return ready && obs.Service != nil && storageBound(l, obs.PVC)
}

// refused tells whether the CR's problems are a change refused: a problem keeps the
// Deployment as it runs, and while it serves as asked the CR stays Ready. While it
// scales (a scale is applied whatever the problem) and a replica already serves, the
// problem is not why the CR is not ready: the count is (DeploymentReady), or a pod that
// does not start.
func refused(l *v1alpha2.LlamaStackDistribution, obs Observed) bool {
	return len(obs.Problems) > 0 && (servesAsAsked(l, obs) ||
		Serving(obs.Deployment) && obs.Service != nil && storageBound(l, obs.PVC))
}

// deploymentReadyCondition is DeploymentReady: a problem while nothing serves (as
// asked, or on the way to it: refused) is why the CR is not; else whether the
// Deployment is available (deploymentReady).
func deploymentReadyCondition(l *v1alpha2.LlamaStackDistribution, obs Observed) conditionUpdate {
	if len(obs.Problems) > 0 && !refused(l, obs) {
		return setTo(metav1.ConditionFalse, obs.Problems[0].Reason, fault.Message(obs.Problems))
	}
	return trueOrFalse(deploymentReady(l, obs.Deployment, obs.Pod))
}

// progressingCondition is Progressing: a change refused, a rollout rolled back and held,
// or how the Deployment's rollout goes; no condition without a Deployment.
func progressingCondition(l *v1alpha2.LlamaStackDistribution, obs Observed) conditionUpdate {
	switch {
	case obs.Deployment == nil:
		return dropped
	case refused(l, obs):
		return setTo(metav1.ConditionFalse, obs.Problems[0].Reason, fault.Message(obs.Problems))
	case obs.Rollback != nil && obs.Rollback.Held:
		// The failed inputs are held back: what runs is the last that served.
		return setTo(metav1.ConditionFalse, v1alpha2.ReasonRolledBack, rollout.RolledBackMessage(obs.Rollback.Status)+
			"; the Deployment keeps the template that served, "+ReplicasNote(l))
	}
	status, reason, message := rollout.Progress(obs.Deployment, obs.Pod)
	if obs.Rollback != nil && obs.Rollback.Note != "" {
		message += "; " + obs.Rollback.Note
	}
	return setTo(status, reason, message)
}

// providersUpdate is what HealthCheck's answer does to status.distributionConfig.providers:
// keepCondition leaves them, setCondition sets them (nil: none known).
type providersUpdate struct {
	op        conditionOp
	providers []v1alpha2.ProviderInfo
}

var (
	keepProviders  = providersUpdate{op: keepCondition}
	clearProviders = providersUpdate{op: setCondition}
)

// healthCheckCondition is HealthCheck, the server's own answer, asked while at least
// one replica serves through the controller's Service; without probing, no condition.
// previous is the condition as reported: a restarted controller keeps the last answer
// until it has one of its own.
func healthCheckCondition(probing bool, l *v1alpha2.LlamaStackDistribution, obs Observed, previous *metav1.Condition) (conditionUpdate, providersUpdate) {
	switch {
	case !probing:
		return dropped, keepProviders
	case scaledToZero(l) && !Serving(obs.Deployment):
		return setTo(metav1.ConditionUnknown, v1alpha2.ReasonScaledToZero, "Scaled to zero: no server runs to ask"), clearProviders
	case !Serving(obs.Deployment):
		return setTo(metav1.ConditionFalse, v1alpha2.ReasonServerNotAvailable, "No replica of the server is available"), clearProviders
	case obs.Service == nil:
		return setTo(metav1.ConditionUnknown, v1alpha2.ReasonHealthCheckPending,
			fmt.Sprintf("Not asked: the server is asked through Service %s, which is not the controller's (or not made yet)", llsd.ServiceName(l))), clearProviders
	case obs.Probe == nil && previous != nil && previous.Reason != v1alpha2.ReasonServerNotAvailable &&
		previous.Reason != v1alpha2.ReasonHealthCheckPending:
		// No answer yet in this process (a restart): keep the last one reported.
		return keepAsIs, keepProviders
	case obs.Probe == nil:
		return setTo(metav1.ConditionUnknown, v1alpha2.ReasonHealthCheckPending, "Waiting for the server's first health check"), keepProviders
	case obs.Probe.Info.Healthy:
		providers := keepProviders
		if obs.Probe.Info.ProvidersKnown {
			providers = providersUpdate{op: setCondition, providers: obs.Probe.Info.Providers}
		}
		return setTo(metav1.ConditionTrue, v1alpha2.ReasonHealthCheckPassed, "Health check passed"), providers
	}
	return setTo(metav1.ConditionFalse, v1alpha2.ReasonHealthCheckFailed, obs.Probe.Info.HealthMessage), clearProviders
}

// serviceReadyCondition is ServiceReady: the controller's Service exists, or why not.
func serviceReadyCondition(l *v1alpha2.LlamaStackDistribution, obs Observed) conditionUpdate {
	switch {
	case obs.Service != nil:
		return setTo(metav1.ConditionTrue, v1alpha2.ReasonServiceReady, "Service is ready")
	case len(obs.Problems) > 0:
		// Not attempted: a problem stops the children where they are.
		return setTo(metav1.ConditionFalse, v1alpha2.ReasonNotAttempted,
			fmt.Sprintf("Service %s is not created while the CR has a problem (%s)", llsd.ServiceName(l), obs.Problems[0].Reason))
	}
	return setTo(metav1.ConditionFalse, v1alpha2.ReasonServiceFailed, fmt.Sprintf("Service %s is not created yet", llsd.ServiceName(l)))
}

// storageInSyncCondition is StorageInSync: whether the claim is what the CR asks for
// (the controller's ensurePVC's finding), kept when the claim was not looked at.
func storageInSyncCondition(l *v1alpha2.LlamaStackDistribution, obs Observed) conditionUpdate {
	switch s := obs.Storage; {
	case l.Spec.Workload.Storage == nil:
		return dropped
	case s == nil:
		return keepAsIs
	default:
		return trueOrFalse(s.InSync, s.Reason, s.Message)
	}
}

// storageAccessWarningCondition is StorageAccessWarning, there only while ReadWriteOnce
// storage is shared by replicas that may land on other nodes.
func storageAccessWarningCondition(l *v1alpha2.LlamaStackDistribution, obs Observed) conditionUpdate {
	if l.Spec.Workload.Storage == nil || !children.SharedReadWriteOnce(l, obs.PVC) {
		return dropped
	}
	return setTo(metav1.ConditionTrue, v1alpha2.ReasonReadWriteOnceShared,
		"ReadWriteOnce storage with more than one replica or autoscaling: pods scheduled to another node cannot mount the volume; use storage.accessModes [ReadWriteMany] or one replica")
}

// storageReadyCondition is StorageReady: whether the CR's claim exists and is Bound.
func storageReadyCondition(l *v1alpha2.LlamaStackDistribution, obs Observed) conditionUpdate {
	switch p := obs.PVC; {
	case l.Spec.Workload.Storage == nil:
		return dropped
	case p == nil && len(obs.Problems) > 0:
		return setTo(metav1.ConditionFalse, v1alpha2.ReasonNotAttempted,
			fmt.Sprintf("PersistentVolumeClaim %s is not created while the CR has a problem (%s)", llsd.PVCName(l), obs.Problems[0].Reason))
	case p == nil:
		return setTo(metav1.ConditionFalse, v1alpha2.ReasonStorageFailed, fmt.Sprintf("PersistentVolumeClaim %s is not created yet", llsd.PVCName(l)))
	case p.DeletionTimestamp != nil:
		return setTo(metav1.ConditionFalse, v1alpha2.ReasonStorageFailed, fmt.Sprintf(
			"PersistentVolumeClaim %s is being deleted: it goes once no pod mounts it, then a new one is made", p.Name))
	case p.Status.Phase != corev1.ClaimBound:
		phase := string(p.Status.Phase)
		if phase == "" {
			phase = string(corev1.ClaimPending)
		}
		return setTo(metav1.ConditionFalse, v1alpha2.ReasonStorageFailed, "PVC is not bound: "+phase)
	}
	return setTo(metav1.ConditionTrue, v1alpha2.ReasonStorageReady, "Storage is ready")
}

// volumeMountWarningCondition is VolumeMountWarning, there only while a mount hides
// part of another volume's directory; unchecked, the last report stands.
func volumeMountWarningCondition(obs Observed) conditionUpdate {
	if !obs.MountsChecked {
		return keepAsIs
	}
	if msg := children.NestedMountsMessage(obs.NestedMounts); msg != "" {
		return setTo(metav1.ConditionTrue, v1alpha2.ReasonNestedMountPaths, msg)
	}
	return dropped
}

// routeURL is status.routeURL: the Ingress's (or HTTPRoute's, or Route's) URL (""
// until it has one) when the CR asks to be exposed, else none.
func routeURL(l *v1alpha2.LlamaStackDistribution, obs Observed) *string {
	if children.WantsHTTPRoute(l) {
		if obs.BackendTLSPolicyAPI == children.APIAbsent || len(gatewaysNotFound(obs.ParentGateways)) > 0 {
			// The Gateway would speak plain HTTP to a server that serves TLS, or there is
			// no Gateway to serve it (its status may still say it was accepted).
			return ptr.To("")
		}
		return ptr.To(children.HTTPRouteURL(l, obs.HTTPRoute, obs.HTTPRouteEndpoint))
	}
	if children.WantsRoute(l) {
		return ptr.To(children.RouteHostURL(obs.Route))
	}
	if !children.WantsIngress(l) {
		return nil
	}
	url := ""
	if obs.Ingress != nil {
		url = children.IngressURL(obs.Ingress)
	}
	return ptr.To(url)
}

// exposedCondition is Exposed: for a CR exposed through an HTTPRoute or a Route,
// whether the cluster serves the API and the Gateways (or routers) accept the route;
// absent otherwise. An HTTPRoute to a server that serves TLS also needs the
// BackendTLSPolicy API. Until the controller knows (the API's discovery, the route's
// first write), the last report stands.
func exposedCondition(l *v1alpha2.LlamaStackDistribution, obs Observed) conditionUpdate {
	switch {
	case children.WantsHTTPRoute(l) && obs.HTTPRouteAPI != children.APIAbsent && obs.BackendTLSPolicyAPI == children.APIAbsent:
		return setTo(metav1.ConditionFalse, v1alpha2.ReasonBackendTLSNotServed, backendTLSNotServed)
	case children.WantsHTTPRoute(l) && obs.HTTPRouteAPI != children.APIAbsent && len(gatewaysNotFound(obs.ParentGateways)) > 0:
		return setTo(metav1.ConditionFalse, v1alpha2.ReasonGatewayNotFound, gatewayNotFoundMessage(l, gatewaysNotFound(obs.ParentGateways)))
	case children.WantsHTTPRoute(l):
		return routeCondition(obs.HTTPRouteAPI, obs.HTTPRoute != nil,
			"The cluster does not serve "+children.HTTPRouteResource.GroupVersion().String()+" HTTPRoute: install the Gateway API CRDs "+
				"(the standard channel), or expose the server with type Ingress",
			func() (metav1.ConditionStatus, string, string) { return children.HTTPRouteAcceptance(obs.HTTPRoute) })
	case children.WantsRoute(l):
		return routeCondition(obs.RouteAPI, obs.Route != nil,
			"The cluster does not serve "+children.RouteResource.GroupVersion().String()+" Route (it is not OpenShift): "+
				"expose the server with type Ingress or HTTPRoute",
			func() (metav1.ConditionStatus, string, string) { return children.RouteAdmission(obs.Route) })
	}
	return dropped
}

// gatewaysNotFound names (namespace/name) the Gateways an HTTPRoute attaches to when
// none of them exists; none when one does, or when the sync could not tell.
func gatewaysNotFound(parents []children.ParentGateway) []string {
	var missing []string
	for _, g := range parents {
		if g.Found {
			return nil
		}
		missing = append(missing, g.String())
	}
	return missing
}

// gatewayNotFoundMessage is Exposed's message for an HTTPRoute none of whose Gateways
// (missing) exists.
func gatewayNotFoundMessage(l *v1alpha2.LlamaStackDistribution, missing []string) string {
	what := "Gateway " + missing[0] + " does not exist"
	if len(missing) > 1 {
		what = "none of its Gateways exists (" + strings.Join(missing, ", ") + ")"
	}
	return fmt.Sprintf("HTTPRoute %s attaches to no Gateway: %s. Create the Gateway, or name an existing one "+
		"in spec.networking.expose.httpRoute.parentRefs", llsd.HTTPRouteName(l), what)
}

// backendTLSNotServed is Exposed's message for an HTTPRoute to a TLS server on a
// cluster without the BackendTLSPolicy API.
var backendTLSNotServed = "The server serves HTTPS (spec.networking.tls) and the cluster does not serve " +
	children.BackendTLSPolicyResource.GroupVersion().String() + " BackendTLSPolicy, which tells the Gateway to speak TLS to it: " +
	"the Gateway would send plain HTTP to the server's HTTPS port. Install the Gateway API standard CRDs of v1.4 or later " +
	"(they include BackendTLSPolicy), or expose the server another way"

// routeCondition is Exposed for a route of an optional kind: False with notServed
// while the cluster does not serve the kind, what accepted says once the route was
// seen, and the last report until then.
func routeCondition(api children.APIState, seen bool, notServed string, accepted func() (metav1.ConditionStatus, string, string)) conditionUpdate {
	switch {
	case api == children.APIAbsent:
		return setTo(metav1.ConditionFalse, v1alpha2.ReasonAPINotServed, notServed)
	case api == children.APIUnknown || !seen:
		return keepAsIs
	}
	return setTo(accepted())
}

// readyCondition is the phase and Ready, from what was observed and the component
// conditions already set (conds).
func readyCondition(l *v1alpha2.LlamaStackDistribution, obs Observed, conds []metav1.Condition) (v1alpha2.Phase, conditionUpdate) {
	stuck := DeploymentStuck(conds)
	switch {
	case len(obs.Problems) > 0 && !refused(l, obs):
		return v1alpha2.PhaseFailed, setTo(metav1.ConditionFalse, obs.Problems[0].Reason, fault.Message(obs.Problems))
	case obs.Deployment == nil:
		return v1alpha2.PhasePending, setTo(metav1.ConditionFalse, v1alpha2.ReasonNotReady, "Deployment is pending")
	case servesAsAsked(l, obs) && scaledToZero(l):
		return v1alpha2.PhaseReady, setTo(metav1.ConditionTrue, v1alpha2.ReasonScaledToZero, scaledToZeroMessage)
	case servesAsAsked(l, obs):
		return v1alpha2.PhaseReady, setTo(metav1.ConditionTrue, v1alpha2.ReasonReady, "LlamaStackDistribution is ready")
	case stuck != nil:
		// The Deployment says why it is not coming up: that is the answer.
		return v1alpha2.PhaseFailed, setTo(metav1.ConditionFalse, stuck.Reason, stuck.Message)
	}
	return v1alpha2.PhaseInitializing, setTo(metav1.ConditionFalse, v1alpha2.ReasonNotReady, firstFalseMessage(conds))
}

// storageBound tells whether the CR's storage, if it asks for any, is ready: its claim
// exists, is not being deleted, and is Bound (StorageReady True).
func storageBound(l *v1alpha2.LlamaStackDistribution, p *corev1.PersistentVolumeClaim) bool {
	return l.Spec.Workload.Storage == nil || (p != nil && p.DeletionTimestamp == nil && p.Status.Phase == corev1.ClaimBound)
}

// Serving tells whether at least one replica of the Deployment is available to answer.
func Serving(d *appsv1.Deployment) bool {
	return d != nil && d.Status.AvailableReplicas > 0
}

// deploymentReady tells whether the server is available at the desired count: as many
// replicas available as the Deployment asks for (its own spec.replicas, whoever set it),
// but never more than the CR asks for (workload.replicas, or the HPA's lower bound while
// autoscaling), so an HPA scaling up does not make a serving CR unready. A rollout that
// keeps the replicas available leaves it ready (see rollout.Progress); with the reason
// and message of DeploymentReady. pod is why a current pod does not start, if one is stuck.
func deploymentReady(l *v1alpha2.LlamaStackDistribution, d *appsv1.Deployment, pod *rollout.PodProblem) (bool, string, string) {
	if d == nil {
		return false, v1alpha2.ReasonDeploymentPending, "Deployment is pending"
	}
	if scaledToZero(l) {
		return true, v1alpha2.ReasonScaledToZero, "Deployment is scaled to zero"
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	if l.Spec.Workload.Autoscaling != nil {
		want = min(want, children.HPAMinReplicas(l))
	} else {
		want = min(want, llsd.SpecReplicas(l))
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
		if c := rollout.DeploymentCondition(d, appsv1.DeploymentReplicaFailure); c != nil && c.Status == corev1.ConditionTrue {
			return false, v1alpha2.ReasonReplicaFailure, fmt.Sprintf("Deployment cannot create pods (%s): %s", c.Reason, c.Message)
		}
		if pod != nil {
			return false, pod.Reason, pod.Message
		}
		if c := rollout.DeploymentCondition(d, appsv1.DeploymentProgressing); c != nil && c.Status == corev1.ConditionFalse && c.Reason == v1alpha2.ReasonProgressDeadlineExceeded {
			return false, v1alpha2.ReasonProgressDeadlineExceeded, "Deployment stopped making progress before enough replicas were available: " + c.Message
		}
	}
	return false, v1alpha2.ReasonDeploymentScaling, fmt.Sprintf("Deployment has %d of %d replicas available", have, want)
}

// scaledToZero tells whether the CR asks for no server: workload.replicas 0 without
// autoscaling. It is Ready once the Deployment exists (and the Service, and storage if
// asked): there is nothing to wait for, and no server to probe.
func scaledToZero(l *v1alpha2.LlamaStackDistribution) bool {
	return l.Spec.Workload.Autoscaling == nil && llsd.SpecReplicas(l) == 0
}

const scaledToZeroMessage = "LlamaStackDistribution is scaled to zero (spec.replicas is 0): no server runs"

// DeploymentStuck returns DeploymentReady when it says the Deployment cannot come up
// without a change (it cannot create pods, a pod does not start, or its rollout ran
// out of time); else nil.
func DeploymentStuck(conds []metav1.Condition) *metav1.Condition {
	c := meta.FindStatusCondition(conds, v1alpha2.ConditionDeploymentReady)
	if c != nil && c.Status == metav1.ConditionFalse && StuckReason(c.Reason) {
		return c
	}
	return nil
}

// StuckReason tells whether a reason of a False DeploymentReady says why the Deployment
// cannot come up: ReplicaFailure, ProgressDeadlineExceeded, or a pod's own reason
// (rollout.ProblemOf), which is the kubelet's or the scheduler's and so not a closed list,
// but never one the controller gives with another meaning (rollout.OwnReason: the
// rollout package's containerProblem does not pass those on), such as a user error's.
func StuckReason(reason string) bool {
	return reason == v1alpha2.ReasonReplicaFailure || reason == v1alpha2.ReasonProgressDeadlineExceeded || PodReason(reason)
}

// MaxConditionMessage is the longest condition message the API accepts, in bytes.
const MaxConditionMessage = 32768

// firstFalseMessage returns the message of the first component condition that is not True.
func firstFalseMessage(conds []metav1.Condition) string {
	for _, t := range []string{v1alpha2.ConditionDeploymentReady, v1alpha2.ConditionServiceReady, v1alpha2.ConditionStorageReady} {
		if cond := meta.FindStatusCondition(conds, t); cond != nil && cond.Status != metav1.ConditionTrue {
			return cond.Message
		}
	}
	return "not ready"
}

// ReplicasNote says what of the CR's replica count reaches a Deployment whose template
// is held (a problem, a rollback): the CR's count, or, with autoscaling, the HPA's. It
// does not name the count, so that a scale (an HPA or KEDA on the CR's scale
// subresource) does not tell the held problem again.
func ReplicasNote(l *v1alpha2.LlamaStackDistribution) string {
	if l.Spec.Workload.Autoscaling != nil {
		return "its replica count is left to the HorizontalPodAutoscaler"
	}
	return "its replica count follows the CR"
}
