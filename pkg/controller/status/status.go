package status

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/truncate"
	"github.com/llamastack/llama-stack-controller/pkg/controller/probe"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
)

// Observed is what a sync found or made: the inputs of Calculate.
type Observed struct {
	Deployment *appsv1.Deployment
	Service    *corev1.Service
	PVC        *corev1.PersistentVolumeClaim
	Ingress    *networkingv1.Ingress
	HTTPRoute  *gatewayv1.HTTPRoute
	// HTTPRouteAPI is what the sync knew of the HTTPRoute API; children.APIUnknown when
	// it did not look (the CR does not ask for an HTTPRoute).
	HTTPRouteAPI children.APIState
	// HTTPRouteEndpoint is where the Gateways serve the HTTPRoute (children.HTTPRouteEndpoint).
	HTTPRouteEndpoint children.RouteEndpoint
	// ParentGateways are the Gateways the CR's HTTPRoute attaches to
	// (children.HTTPRouteGateways) and whether the Gateway cache holds each; nil when
	// the sync cannot tell (the Gateway API is not served or its cache not synced, or a
	// Gateway is in a namespace the controller does not watch).
	ParentGateways []children.ParentGateway
	// BackendTLSPolicy and BackendTLSPolicyAPI are the same for the BackendTLSPolicy of
	// an HTTPRoute to a server that serves TLS (children.APIUnknown when the sync did not
	// look: the CR's server does not serve TLS, or is not exposed through an HTTPRoute).
	BackendTLSPolicy    *gatewayv1.BackendTLSPolicy
	BackendTLSPolicyAPI children.APIState
	// Route and RouteAPI are the same for an OpenShift Route.
	Route    *unstructured.Unstructured
	RouteAPI children.APIState
	// Storage is what the controller's ensure of the claim found; nil when it did not run.
	Storage *children.StorageSync
	// Pod is why a current pod of the Deployment does not start; nil when none is stuck
	// (rollout's PodProblemFor).
	Pod *rollout.PodProblem
	// Probe is the server's last answer; nil before the first one (or without probing).
	Probe *probe.Result
	// Problems are user errors, in the order found.
	Problems []fault.Problem
	// MountsChecked: the server container's mounts were worked out, and NestedMounts
	// are those hiding part of another volume. Unchecked, the last report stands.
	MountsChecked bool
	NestedMounts  []children.MountNesting
	// Generation is the config generation of a CR that asks for one; nil when it
	// did not run (the CR does not ask for one, or an earlier input failed).
	Generation *Generation
	// Rollback is what the Deployment's ensure found and did about automatic
	// rollback; nil when it did not run (status.rollback then stays as it is).
	Rollback *rollout.Outcome
}

// Generation is what the status reads of a config generation.
type Generation struct {
	// ConfigMapName is the generated ConfigMap's name; "" when nothing was generated.
	ConfigMapName string
	// Resolved is status.resolvedDistribution on success.
	Resolved v1alpha2.ResolvedDistributionStatus
	// Problem is why nothing could be generated: a user error.
	Problem *fault.Problem
}

// Facts is what Calculate reads of the controller rather than of the sync.
type Facts struct {
	// OperatorVersion is reported in status.version.operatorVersion.
	OperatorVersion string
	// Distributions are the distributions by name and their images; those without an
	// image are not reported as available.
	Distributions map[string]string
	// Probing: the controller asks the servers for their health (HealthCheck).
	Probing bool
}

// Calculate computes the CR's status from what was observed and the controller's
// facts. It is pure: now is used only for times that change (a condition flipping, the
// operator version changing). Each condition is the answer of its own function
// (conditions.go); this puts them together, in the order where a later one reads an
// earlier one.
func Calculate(l *v1alpha2.LlamaStackDistribution, obs Observed, facts Facts, now metav1.Time) v1alpha2.LlamaStackDistributionStatus {
	st := *l.Status.DeepCopy()
	st.ObservedGeneration = l.Generation
	st.Version = versionStatus(st.Version, facts.OperatorVersion, obs.Probe, now)
	st.DistributionConfig.ActiveDistribution = llsd.DistributionLabel(l)
	st.DistributionConfig.AvailableDistributions = maps.Clone(facts.Distributions)
	maps.DeleteFunc(st.DistributionConfig.AvailableDistributions, func(_, image string) bool { return image == "" })

	set := func(condType string, u conditionUpdate) {
		switch u.op {
		case removeCondition:
			meta.RemoveStatusCondition(&st.Conditions, condType)
		case setCondition:
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{
				Type: condType, Status: u.status, Reason: u.reason, Message: truncate.String(u.message, MaxConditionMessage, truncate.Mark),
				ObservedGeneration: l.Generation, LastTransitionTime: now,
			})
		}
	}

	if l.DeletionTimestamp != nil {
		st.Phase = v1alpha2.PhaseTerminating
		set(v1alpha2.ConditionReady, setTo(metav1.ConditionFalse, v1alpha2.ReasonTerminating, "LlamaStackDistribution is being deleted"))
		return st
	}

	st.ResolvedDistribution = resolvedDistribution(l, obs, st.ResolvedDistribution, st.Conditions)
	set(v1alpha2.ConditionConfigGenerated, configGeneratedCondition(l, obs))

	set(v1alpha2.ConditionDeploymentReady, deploymentReadyCondition(l, obs))
	if rb := obs.Rollback; rb != nil {
		st.Rollback = rb.Status.DeepCopy()
	}
	set(v1alpha2.ConditionProgressing, progressingCondition(l, obs))

	health, providers := healthCheckCondition(facts.Probing, l, obs,
		meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionHealthCheck))
	set(v1alpha2.ConditionHealthCheck, health)
	if providers.op == setCondition {
		st.DistributionConfig.Providers = providers.providers
	}
	st.AvailableReplicas, st.Replicas = 0, 0
	if obs.Deployment != nil {
		st.AvailableReplicas = obs.Deployment.Status.AvailableReplicas
		st.Replicas = obs.Deployment.Status.Replicas
	}
	st.Selector = labels.SelectorFromSet(llsd.SelectorLabels(l)).String()

	set(v1alpha2.ConditionServiceReady, serviceReadyCondition(l, obs))
	if obs.Service != nil {
		st.ServiceURL = children.ServiceURL(l, children.ServesTLS(obs.Deployment))
	}

	set(v1alpha2.ConditionStorageInSync, storageInSyncCondition(l, obs))
	set(v1alpha2.ConditionStorageAccessWarning, storageAccessWarningCondition(l, obs))
	set(v1alpha2.ConditionStorageReady, storageReadyCondition(l, obs))
	set(v1alpha2.ConditionVolumeMountWarning, volumeMountWarningCondition(obs))

	st.RouteURL = routeURL(l, obs)
	set(v1alpha2.ConditionExposed, exposedCondition(l, obs))

	var ready conditionUpdate
	st.Phase, ready = readyCondition(l, obs, st.Conditions)
	set(v1alpha2.ConditionReady, ready)
	return st
}

// conditionOp is what a condition's function does to the condition.
type conditionOp int

const (
	// keepCondition leaves it as reported: nothing new is known of it.
	keepCondition conditionOp = iota
	setCondition
	removeCondition
)

// conditionUpdate is a condition's function's answer: keep it, remove it, or set it
// to the status, reason and message given.
type conditionUpdate struct {
	op      conditionOp
	status  metav1.ConditionStatus
	reason  string
	message string
}

func setTo(status metav1.ConditionStatus, reason, message string) conditionUpdate {
	return conditionUpdate{op: setCondition, status: status, reason: reason, message: message}
}

// trueOrFalse is a condition True when ok, else False.
func trueOrFalse(ok bool, reason, message string) conditionUpdate {
	if ok {
		return setTo(metav1.ConditionTrue, reason, message)
	}
	return setTo(metav1.ConditionFalse, reason, message)
}

var (
	keepAsIs = conditionUpdate{op: keepCondition}
	dropped  = conditionUpdate{op: removeCondition}
)

// versionStatus is status.version: the operator's version and the server's (its last
// answer, else what was reported), with the time either last changed.
func versionStatus(prev v1alpha2.VersionInfo, operatorVersion string, probe *probe.Result, now metav1.Time) v1alpha2.VersionInfo {
	serverVersion := prev.LlamaStackServerVersion
	if probe != nil && probe.Info.Version != "" {
		serverVersion = probe.Info.Version
	}
	if prev.OperatorVersion == operatorVersion && prev.LlamaStackServerVersion == serverVersion && prev.LastUpdated != nil {
		return prev
	}
	return v1alpha2.VersionInfo{OperatorVersion: operatorVersion, LlamaStackServerVersion: serverVersion, LastUpdated: ptr.To(now)}
}
