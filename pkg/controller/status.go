package controller

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

// observed is what a sync found or made: the inputs of calculateStatus.
type observed struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	pvc        *corev1.PersistentVolumeClaim
	ingress    *networkingv1.Ingress
	httpRoute  *gatewayv1.HTTPRoute
	// httpRouteAPI is what the sync knew of the HTTPRoute API; children.APIUnknown when
	// it did not look (the CR does not ask for an HTTPRoute).
	httpRouteAPI children.APIState
	// httpRouteEndpoint is where the Gateways serve the HTTPRoute (children.HTTPRouteEndpoint).
	httpRouteEndpoint children.RouteEndpoint
	// route and routeAPI are the same for an OpenShift Route.
	route    *unstructured.Unstructured
	routeAPI children.APIState
	// storage is what ensurePVC found; nil when it did not run.
	storage *children.StorageSync
	// pod is why a current pod of the Deployment does not start; nil when none is stuck
	// (podProblemFor).
	pod *rollout.PodProblem
	// probe is the server's last answer; nil before the first one (or without probing).
	probe *probe.Result
	// problems are user errors, in the order found.
	problems []fault.Problem
	// mountsChecked: the server container's mounts were worked out, and nestedMounts
	// are those hiding part of another volume. Unchecked, the last report stands.
	mountsChecked bool
	nestedMounts  []mountNesting
	// generation is the config generation of a CR that asks for one; nil when it
	// did not run (the CR does not ask for one, or an earlier input failed).
	generation *generation
	// rollback is what the Deployment's ensure found and did about automatic
	// rollback; nil when it did not run (status.rollback then stays as it is).
	rollback *rollout.Outcome
}

// calculateStatus computes the CR's status from what was observed. It is pure: now is
// used only for times that change (a condition flipping, the operator version changing).
// Each condition is the answer of its own function (statusconditions.go); this puts
// them together, in the order where a later one reads an earlier one.
func (c *Controller) calculateStatus(l *v1alpha2.LlamaStackDistribution, obs observed, now metav1.Time) v1alpha2.LlamaStackDistributionStatus {
	st := *l.Status.DeepCopy()
	st.ObservedGeneration = l.Generation
	st.Version = versionStatus(st.Version, c.operatorVersion, obs.probe, now)
	st.DistributionConfig.ActiveDistribution = llsd.DistributionLabel(l)
	st.DistributionConfig.AvailableDistributions = maps.Clone(c.distributions)
	maps.DeleteFunc(st.DistributionConfig.AvailableDistributions, func(_, image string) bool { return image == "" })

	set := func(condType string, u conditionUpdate) {
		switch u.op {
		case removeCondition:
			meta.RemoveStatusCondition(&st.Conditions, condType)
		case setCondition:
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{
				Type: condType, Status: u.status, Reason: u.reason, Message: truncate.String(u.message, maxConditionMessage, truncate.Mark),
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
	if rb := obs.rollback; rb != nil {
		st.Rollback = rb.Status.DeepCopy()
	}
	set(v1alpha2.ConditionProgressing, progressingCondition(l, obs))

	health, providers := healthCheckCondition(c.prober != nil, l, obs,
		meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionHealthCheck))
	set(v1alpha2.ConditionHealthCheck, health)
	if providers.op == setCondition {
		st.DistributionConfig.Providers = providers.providers
	}
	st.AvailableReplicas, st.Replicas = 0, 0
	if obs.deployment != nil {
		st.AvailableReplicas = obs.deployment.Status.AvailableReplicas
		st.Replicas = obs.deployment.Status.Replicas
	}
	st.Selector = labels.SelectorFromSet(llsd.SelectorLabels(l)).String()

	set(v1alpha2.ConditionServiceReady, serviceReadyCondition(l, obs))
	if obs.service != nil {
		st.ServiceURL = children.ServiceURL(l, servesTLS(obs.deployment))
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
