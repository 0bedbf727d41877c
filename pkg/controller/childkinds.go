package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	coreac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyac "k8s.io/client-go/applyconfigurations/policy/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayv1client "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/typed/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// The owned kinds: each bound once to its lister, typed client and Extract function,
// so that one generic writer (apply.go) ensures and deletes every child.

// bindChildKinds binds every owned kind, one line each, to the informer the factory
// makes for it (the caller starts the factory), and returns them. The
// managed ConfigMaps are read from the ConfigMap cache, which is not the factory's.
func (c *Controller) bindChildKinds(f kubeinformers.SharedInformerFactory) ([]children.Bound, error) {
	k := c.kubeclient
	b := children.Binder{Factory: f, Recorder: c.recorder}
	// The Deployment and the Service are wanted as long as the CR is: they go with it
	// (garbage collection), never deleted by the controller.
	c.deployments = children.Bind(&b, appsv1.SchemeGroupVersion.WithResource("deployments"), "Deployment",
		k.AppsV1().Deployments, appsac.ExtractDeployment, children.NeverDelete)
	c.services = children.Bind(&b, corev1.SchemeGroupVersion.WithResource("services"), "Service",
		k.CoreV1().Services, coreac.ExtractService, children.NeverDelete)
	// The controller never deletes a PersistentVolumeClaim: it holds the user's data.
	// Nor takes over its fields from a previous manager: its spec is all but immutable,
	// and dropping a field from it would be refused.
	c.pvcs = children.Bind(&b, corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), "PersistentVolumeClaim",
		k.CoreV1().PersistentVolumeClaims, coreac.ExtractPersistentVolumeClaim, children.NeverDelete|children.NeverTakeOver)
	c.hpas = children.Bind(&b, autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers"), "HorizontalPodAutoscaler",
		k.AutoscalingV2().HorizontalPodAutoscalers, autoscalingac.ExtractHorizontalPodAutoscaler, 0)
	c.pdbs = children.Bind(&b, policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), "PodDisruptionBudget",
		k.PolicyV1().PodDisruptionBudgets, policyac.ExtractPodDisruptionBudget, 0)
	c.ingresses = children.Bind(&b, networkingv1.SchemeGroupVersion.WithResource("ingresses"), "Ingress",
		k.NetworkingV1().Ingresses, networkingac.ExtractIngress, 0)
	c.networkPolicies = children.Bind(&b, networkingv1.SchemeGroupVersion.WithResource("networkpolicies"), "NetworkPolicy",
		k.NetworkingV1().NetworkPolicies, networkingac.ExtractNetworkPolicy, 0)
	// The managed ConfigMaps are compared by content hash and written whole (see
	// userconfig.go, cabundleconfigmap.go), never through ensure: nothing to take over.
	c.configMapCopies = children.NewKind(c.recorder, "ConfigMap", c.cachedConfigMap,
		k.CoreV1().ConfigMaps, coreac.ExtractConfigMap, children.NeverTakeOver)

	// Every child a CR has, in the order a sync makes them (childTable).
	c.table.configs = []mountedConfigMap{userConfigCopy{c}, caBundle{c}, generatedConfig{c}}
	c.table.claim = claimChild{c}
	c.table.server = serverChild{c}
	c.table.front = []askedChild{
		asked[*corev1.Service, coreac.ServiceApplyConfiguration]{kind: c.services, name: llsd.ServiceName,
			wanted: always(func(*v1alpha2.LlamaStackDistribution) bool { return true }),
			build: func(l *v1alpha2.LlamaStackDistribution, in childInputs) *corev1.Service {
				return children.NewService(l, in.listening)
			},
			seen: func(obs *status.Observed, svc *corev1.Service) { obs.Service = svc }},
		asked[*networkingv1.NetworkPolicy, networkingac.NetworkPolicyApplyConfiguration]{kind: c.networkPolicies, name: llsd.NetworkPolicyName,
			wanted: func(_ *v1alpha2.LlamaStackDistribution, in childInputs) (bool, bool) {
				return in.cfg.EnableNetworkPolicy, in.cfg.NetworkPolicyKnown
			},
			because: func(childInputs) string { return revision.FlagOff(revision.FlagNetworkPolicy) },
			build: func(l *v1alpha2.LlamaStackDistribution, in childInputs) *networkingv1.NetworkPolicy {
				return children.NewNetworkPolicy(l, c.operatorNamespace, in.listening)
			}},
	}
	c.table.scaling = []askedChild{
		asked[*autoscalingv2.HorizontalPodAutoscaler, autoscalingac.HorizontalPodAutoscalerApplyConfiguration]{kind: c.hpas, name: llsd.HPAName,
			wanted: always(func(l *v1alpha2.LlamaStackDistribution) bool { return l.Spec.Workload.Autoscaling != nil }), build: fromCR(children.NewHPA)},
		asked[*policyv1.PodDisruptionBudget, policyac.PodDisruptionBudgetApplyConfiguration]{kind: c.pdbs, name: llsd.PDBName,
			wanted: always(children.WantsPDB), build: fromCR(children.NewPDB)},
	}
	c.table.back = append(slices.Clone(c.table.scaling),
		asked[*networkingv1.Ingress, networkingac.IngressApplyConfiguration]{kind: c.ingresses, name: llsd.IngressName,
			wanted: always(children.WantsIngress), build: fromCR(children.NewIngress),
			seen: func(obs *status.Observed, ing *networkingv1.Ingress) { obs.Ingress = ing }})
	return b.Kinds, b.Err
}

// bindOptionalKinds binds the kinds whose API the cluster may not serve
// (optionalkinds.go), each to the watch of its CRD, and adds them to the children a CR
// has while it asks for them.
func (c *Controller) bindOptionalKinds(cfg Config) error {
	// Without a Gateway API client the kind is never served, and its client never called.
	crds := cfg.CRDClient
	if cfg.GatewayClient == nil {
		crds = nil
	}
	routes, err := newOptionalKind("HTTPRoute", children.HTTPRouteResource, crds,
		func() cache.SharedIndexInformer { return newHTTPRouteInformer(cfg.GatewayClient, c.watchNamespace) },
		c.ownedHandler(), c.enqueueAsking(children.WantsHTTPRoute))
	if err != nil {
		return fmt.Errorf("watching the HTTPRoute CRD: %w", err)
	}
	c.optionalKinds = append(c.optionalKinds, routes)
	// The Gateways the routes attach to, read for their URL (gateway.go).
	gateways, err := newOptionalKind("Gateway", gatewayResource, crds,
		func() cache.SharedIndexInformer { return newGatewayInformer(cfg.GatewayClient, c.watchNamespace) },
		gatewayHandler(c.enqueueAsking(children.WantsHTTPRoute)), c.enqueueAsking(children.WantsHTTPRoute))
	if err != nil {
		return fmt.Errorf("watching the Gateway CRD: %w", err)
	}
	c.optionalKinds = append(c.optionalKinds, gateways)
	cachedGateway := func(ns, name string) *gatewayv1.Gateway {
		g, err := fromOptionalCache[*gatewayv1.Gateway](gateways)(ns, name)
		if err != nil {
			return nil
		}
		return g
	}
	c.httpRoutes = children.NewKind(c.recorder, "HTTPRoute", fromOptionalCache[*gatewayv1.HTTPRoute](routes),
		func(ns string) gatewayv1client.HTTPRouteInterface {
			return cfg.GatewayClient.GatewayV1().HTTPRoutes(ns)
		},
		gatewayac.ExtractHTTPRoute, children.NeverTakeOver)
	c.table.back = append(c.table.back,
		asked[*gatewayv1.HTTPRoute, gatewayac.HTTPRouteApplyConfiguration]{kind: c.httpRoutes, name: llsd.HTTPRouteName,
			api: routes, wanted: always(children.WantsHTTPRoute), build: fromCR(children.NewHTTPRoute),
			seen: func(obs *status.Observed, route *gatewayv1.HTTPRoute) {
				obs.HTTPRoute, obs.HTTPRouteEndpoint = route, children.HTTPRouteEndpoint(route, cachedGateway)
			},
			seenAPI: func(obs *status.Observed, state children.APIState) { obs.HTTPRouteAPI = state }},
		parentGateways{api: gateways, watchNamespace: c.watchNamespace})
	if err := c.bindBackendTLS(cfg, crds); err != nil {
		return err
	}

	// Without a dynamic client no ServiceMonitor or Route is made. A CR hears of the
	// ServiceMonitor CRD whatever it asks: whether its server serves metrics is known
	// only in its sync.
	crds = cfg.CRDClient
	if cfg.DynamicClient == nil {
		crds = nil
	}
	monitors, err := c.bindUnstructured(cfg, children.ServiceMonitorKind, children.ServiceMonitorResource, crds,
		func(*v1alpha2.LlamaStackDistribution) bool { return true }, &c.serviceMonitors)
	if err != nil {
		return err
	}
	openShiftRoutes, err := c.bindUnstructured(cfg, children.RouteKind, children.RouteResource, crds, children.WantsRoute, &c.routes)
	if err != nil {
		return err
	}
	openShiftRoutes.discovered = cfg.RoutesDiscovered
	c.table.back = append(c.table.back,
		asked[*unstructured.Unstructured, unstructured.Unstructured]{kind: c.serviceMonitors, name: llsd.ServiceMonitorName,
			api: monitors, wanted: wantsServiceMonitor, because: serviceMonitorFlagOff, build: fromCR(children.NewServiceMonitor)},
		asked[*unstructured.Unstructured, unstructured.Unstructured]{kind: c.routes, name: llsd.RouteName,
			api: openShiftRoutes, wanted: always(children.WantsRoute),
			build: func(l *v1alpha2.LlamaStackDistribution, in childInputs) *unstructured.Unstructured {
				return children.NewRoute(l, in.listening, in.serverCA)
			},
			seen:    func(obs *status.Observed, route *unstructured.Unstructured) { obs.Route = route },
			seenAPI: func(obs *status.Observed, state children.APIState) { obs.RouteAPI = state }})
	return nil
}

// bindBackendTLS binds the BackendTLSPolicy, an optional kind of Gateway API (v1 since
// its 1.4), to the watch of its CRD, and adds to the table the policy of an HTTPRoute
// to a server that serves TLS, after the ConfigMap of the CA it names (backendCA).
func (c *Controller) bindBackendTLS(cfg Config, crds apiextensionsclient.Interface) error {
	policies, err := newOptionalKind("BackendTLSPolicy", children.BackendTLSPolicyResource, crds,
		func() cache.SharedIndexInformer {
			return newBackendTLSPolicyInformer(cfg.GatewayClient, c.watchNamespace)
		},
		c.ownedHandler(), c.enqueueAsking(children.WantsHTTPRoute))
	if err != nil {
		return fmt.Errorf("watching the BackendTLSPolicy CRD: %w", err)
	}
	c.optionalKinds = append(c.optionalKinds, policies)
	c.backendTLS = children.NewKind(c.recorder, "BackendTLSPolicy", fromOptionalCache[*gatewayv1.BackendTLSPolicy](policies),
		func(ns string) gatewayv1client.BackendTLSPolicyInterface {
			return cfg.GatewayClient.GatewayV1().BackendTLSPolicies(ns)
		},
		gatewayac.ExtractBackendTLSPolicy, children.NeverTakeOver)
	c.table.back = append(c.table.back, backendCA{c: c, api: policies},
		asked[*gatewayv1.BackendTLSPolicy, gatewayac.BackendTLSPolicyApplyConfiguration]{kind: c.backendTLS, name: llsd.BackendTLSPolicyName,
			api: policies,
			wanted: func(l *v1alpha2.LlamaStackDistribution, in childInputs) (bool, bool) {
				return children.WantsBackendTLSPolicy(l, in.listening), true
			},
			build: func(l *v1alpha2.LlamaStackDistribution, in childInputs) *gatewayv1.BackendTLSPolicy {
				return children.NewBackendTLSPolicy(l, len(in.backendCA) > 0)
			},
			seen:    func(obs *status.Observed, p *gatewayv1.BackendTLSPolicy) { obs.BackendTLSPolicy = p },
			seenAPI: func(obs *status.Observed, state children.APIState) { obs.BackendTLSPolicyAPI = state }})
	return nil
}

// bindUnstructured binds an optional kind without a typed client (unstructured.go) to
// the watch of its CRD and to the dynamic client, into kind; the CRs asks selects hear
// of its API.
func (c *Controller) bindUnstructured(cfg Config, kindName string, resource schema.GroupVersionResource,
	crds apiextensionsclient.Interface, asks func(*v1alpha2.LlamaStackDistribution) bool,
	kind **children.Kind[*unstructured.Unstructured, unstructured.Unstructured]) (*optionalKind, error) {
	optional, err := newOptionalKind(kindName, resource, crds,
		func() cache.SharedIndexInformer {
			return children.NewUnstructuredInformer(cfg.DynamicClient, resource, c.watchNamespace)
		},
		c.ownedHandler(), c.enqueueAsking(asks))
	if err != nil {
		return nil, fmt.Errorf("watching the %s CRD: %w", kindName, err)
	}
	c.optionalKinds = append(c.optionalKinds, optional)
	*kind = children.NewKind(c.recorder, kindName, fromOptionalCache[*unstructured.Unstructured](optional),
		func(ns string) children.UnstructuredClient {
			return children.UnstructuredClient{Resource: cfg.DynamicClient.Resource(resource).Namespace(ns)}
		},
		children.ExtractUnstructured, children.NeverTakeOver)
	return optional, nil
}

// childInputs are what a sync knows, besides the CR, that decides whether a child is
// wanted and what it holds.
type childInputs struct {
	// cfg is the operator ConfigMap as the sync read it.
	cfg revision.OperatorConfig
	// listening is what the pods of the Deployment, as applied, answer on.
	listening children.Listening
	// serverCA is the ca.crt of the server's TLS Secret; empty without TLS or without one.
	serverCA []byte
	// backendCA is what verifies the server the pods serve as listening says: the
	// ca.crt of its TLS Secret and the CA bundle they mount; read only for a CR that
	// has a BackendTLSPolicy (empty otherwise, and when the controller knows no CA).
	backendCA []byte
	// rev is the revision the sync resolved; nil for a sync that changes nothing.
	rev *revision.Revision
	// plan is the Deployment to apply; nil when none is (a problem keeps what runs, or
	// the claim is not the CR's yet).
	plan *deploymentPlan
}

// childTable is every child a CR has, in the order a sync makes them: the ConfigMaps
// the pods mount, written with the revision (the pod template names them and carries
// their hashes); the claim (the Deployment mounts it, so it is planned and applied only
// once the claim is the CR's); the children in front of the pods (the Service, and a
// NetworkPolicy in place before the pods start); the Deployment; then the others. Each
// is one entry: its kind, its name, when the CR wants it, its builder and what the
// status reads of it.
type childTable struct {
	configs []mountedConfigMap
	claim   askedChild
	front   []askedChild
	server  askedChild
	back    []askedChild
	// scaling are the entries of back that follow the replica count and the CR alone
	// (the HPA, the PDB): ensured also while a problem holds the rest (scaleHeld).
	scaling []askedChild
}

// afterClaim is the table's entries after the claim, in order.
func (t *childTable) afterClaim() []askedChild {
	return slices.Concat(t.front, []askedChild{t.server}, t.back)
}

// mountedConfigMap is the table's entry of a ConfigMap the pods mount: written while the
// revision mounts it, before any other child, and deleted by the Deployment's entry once
// no pod template of the CR mounts it (configmapcleanup.go).
type mountedConfigMap interface {
	// write writes it when the revision mounts it, and records in rev what the pods
	// read of it (its name and hash); a problem is the user's.
	write(ctx context.Context, l *v1alpha2.LlamaStackDistribution, rev *revision.Revision) (*fault.Problem, error)
}

// userConfigCopy is the copy of a user config in another namespace (userconfig.go).
type userConfigCopy struct{ c *Controller }

func (e userConfigCopy) write(ctx context.Context, l *v1alpha2.LlamaStackDistribution, rev *revision.Revision) (*fault.Problem, error) {
	return e.c.ensureUserConfigCopy(ctx, l, rev.UserConfig)
}

// caBundle is the managed CA bundle (cabundleconfigmap.go); the pods read its hash.
type caBundle struct{ c *Controller }

func (e caBundle) write(ctx context.Context, l *v1alpha2.LlamaStackDistribution, rev *revision.Revision) (*fault.Problem, error) {
	hash, problem, err := e.c.ensureCABundle(ctx, l, rev.CARefs)
	rev.CAHash = hash
	return problem, err
}

// generatedConfig is the generated config's immutable ConfigMap (generatedconfig.go):
// the pods mount it where a user config would be, and run the image it was made for.
type generatedConfig struct{ c *Controller }

func (e generatedConfig) write(ctx context.Context, l *v1alpha2.LlamaStackDistribution, rev *revision.Revision) (*fault.Problem, error) {
	g := rev.Gen
	if g == nil {
		return nil, nil
	}
	err := e.c.ensureGeneratedConfigMap(ctx, l, g)
	rev.Image = g.Image
	rev.UserConfig = &revision.UserConfig{MountName: g.ConfigMapName(l), Hash: g.Out.Hash}
	return nil, err
}

// claimChild is the table's entry of the PersistentVolumeClaim: made while the CR asks
// for storage, then only expanded (ensurePVC); never deleted, as it holds the user's data.
type claimChild struct{ c *Controller }

func (e claimChild) sync(ctx context.Context, l *v1alpha2.LlamaStackDistribution, _ childInputs, obs *status.Observed) error {
	if l.Spec.Workload.Storage == nil {
		return nil
	}
	pvc, state, err := e.c.ensurePVC(ctx, l, meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionStorageInSync))
	if err == nil {
		obs.PVC, obs.Storage = pvc, &state
	}
	return err
}

func (e claimChild) observe(l *v1alpha2.LlamaStackDistribution, _ childInputs, obs *status.Observed) {
	obs.PVC, _ = e.c.pvcs.Cached(l.Namespace, llsd.PVCName(l))
}

// serverChild is the table's entry of the Deployment: wanted as long as the CR is,
// applied as the sync planned it (planDeployment: the CR's template, or the one a
// rollback holds or makes). Once it is applied, the managed ConfigMaps it no longer
// mounts are deleted.
type serverChild struct{ c *Controller }

func (e serverChild) sync(ctx context.Context, l *v1alpha2.LlamaStackDistribution, in childInputs, obs *status.Observed) error {
	obs.Deployment = e.c.controlledDeployment(l)
	if in.plan == nil {
		return nil
	}
	dep, rb, err := e.c.applyDeployment(ctx, l, in.plan)
	if err != nil {
		return err
	}
	obs.Deployment = dep
	if in.plan.keep {
		// Only scaled: the template, and what it mounts, are as they were.
		return nil
	}
	obs.Rollback = &rb
	var current []string
	if uc := in.rev.UserConfig; uc != nil {
		current = append(current, uc.MountName)
	}
	return errors.Join(e.c.deleteUnneededConfigMaps(ctx, l, in.rev.CARefs, dep),
		e.c.deleteUnusedConfigMaps(ctx, l, current, dep))
}

func (e serverChild) observe(l *v1alpha2.LlamaStackDistribution, _ childInputs, obs *status.Observed) {
	obs.Deployment = e.c.controlledDeployment(l)
}

// askedChild is a child the CR has while it asks for it: applied while it does, deleted
// (when the CR's) once it does not.
type askedChild interface {
	// sync applies or deletes it, and records it in obs.
	sync(ctx context.Context, l *v1alpha2.LlamaStackDistribution, in childInputs, obs *status.Observed) error
	// observe records it in obs as it is, for a sync that changes nothing.
	observe(l *v1alpha2.LlamaStackDistribution, in childInputs, obs *status.Observed)
}

// asked is an askedChild of one kind.
type asked[T metav1.Object, AC any] struct {
	kind *children.Kind[T, AC]
	name func(*v1alpha2.LlamaStackDistribution) string
	// wanted tells whether the CR asks for it; while known is false (the operator
	// ConfigMap does not say) it is neither made nor deleted.
	wanted func(l *v1alpha2.LlamaStackDistribution, in childInputs) (want, known bool)
	// because says why it is not wanted, for the Event of its deletion, when the operator
	// ConfigMap decides (a feature flag); nil, or "", when the CR alone does.
	because func(in childInputs) string
	build   func(*v1alpha2.LlamaStackDistribution, childInputs) T
	// seen records it in what the sync observed; nil when the status does not read it.
	seen func(*status.Observed, T)
	// api is the optional kind's API (nil for a kind always served); seenAPI records,
	// for a CR that asks for the child, what is known of it.
	api     *optionalKind
	seenAPI func(*status.Observed, children.APIState)
}

// served tells whether the kind's API is served; for a CR that asks for the child,
// what is known of it is recorded in obs.
func (a asked[T, AC]) served(l *v1alpha2.LlamaStackDistribution, in childInputs, obs *status.Observed) bool {
	if a.api == nil {
		return true
	}
	state := a.api.state()
	if want, _ := a.wanted(l, in); want && a.seenAPI != nil {
		a.seenAPI(obs, state)
	}
	return state == children.APIServed
}

func (a asked[T, AC]) sync(ctx context.Context, l *v1alpha2.LlamaStackDistribution, in childInputs, obs *status.Observed) error {
	if !a.served(l, in, obs) {
		// Nothing of the kind can exist, or what exists is not known yet.
		return nil
	}
	want, known := a.wanted(l, in)
	switch {
	case !known:
		return nil
	case !want:
		var because string
		if a.because != nil {
			because = a.because(in)
		}
		return a.kind.DeleteIfOwnedBecause(ctx, l, a.name(l), because)
	}
	obj, err := a.kind.Ensure(ctx, l, a.build(l, in))
	if err == nil && a.seen != nil {
		a.seen(obs, obj)
	}
	return err
}

func (a asked[T, AC]) observe(l *v1alpha2.LlamaStackDistribution, in childInputs, obs *status.Observed) {
	if a.seen == nil || !a.served(l, in, obs) {
		return
	}
	// An object of someone else's under the child's name is not the CR's child.
	if obj, err := a.kind.Cached(l.Namespace, a.name(l)); err == nil && llsd.IsControlledBy(obj, l) {
		a.seen(obs, obj)
	}
}

// backendCA is the table's entry of the ConfigMap <name>-backend-ca, which holds the CA
// the BackendTLSPolicy has the Gateways verify the server with: made while the cluster
// serves the policy's API, the CR has one and the controller knows a CA; deleted (when
// the CR's) once one of these does not hold. Like the other managed ConfigMaps, it is
// compared by content hash (the ConfigMap cache keeps no data).
type backendCA struct {
	c   *Controller
	api *optionalKind
}

func (e backendCA) sync(ctx context.Context, l *v1alpha2.LlamaStackDistribution, in childInputs, _ *status.Observed) error {
	name := llsd.BackendCAConfigMapName(l)
	switch e.api.state() {
	case children.APIUnknown:
		return nil
	case children.APIServed:
		if !children.WantsBackendTLSPolicy(l, in.listening) || len(in.backendCA) == 0 {
			break
		}
		desired := children.NewBackendCAConfigMap(l, in.backendCA)
		hash := revision.HashData(desired.Data, nil)
		_, err := e.c.configMapCopies.EnsureWith(ctx, l, children.EnsureOptions[*corev1.ConfigMap]{
			Name:     name,
			UpToDate: func(cur *corev1.ConfigMap) bool { return revision.ConfigMapHash(cur) == hash },
			Build:    children.Fixed[*corev1.ConfigMap](desired),
		})
		return err
	}
	return e.c.configMapCopies.DeleteIfOwned(ctx, l, name)
}

// observe records nothing: the status does not read the ConfigMap.
func (backendCA) observe(*v1alpha2.LlamaStackDistribution, childInputs, *status.Observed) {}

// always is a wanted function for a child the CR alone decides.
func always(wants func(*v1alpha2.LlamaStackDistribution) bool) func(*v1alpha2.LlamaStackDistribution, childInputs) (bool, bool) {
	return func(l *v1alpha2.LlamaStackDistribution, _ childInputs) (bool, bool) { return wants(l), true }
}

// fromCR is a build function for a child made from the CR alone.
func fromCR[T any](build func(*v1alpha2.LlamaStackDistribution) T) func(*v1alpha2.LlamaStackDistribution, childInputs) T {
	return func(l *v1alpha2.LlamaStackDistribution, _ childInputs) T { return build(l) }
}

// serviceMonitorFlagOff says, for the Event of a ServiceMonitor deleted, when it goes
// because the operator ConfigMap turns ServiceMonitors off (not because the server
// stopped serving metrics).
func serviceMonitorFlagOff(in childInputs) string {
	if in.cfg.EnableServiceMonitor {
		return ""
	}
	return revision.FlagOff(revision.FlagServiceMonitor)
}

// wantsServiceMonitor tells whether l's server has a ServiceMonitor: its metrics are on
// and the operator ConfigMap allows it; while the ConfigMap does not say, existing
// ones are left as they are.
func wantsServiceMonitor(l *v1alpha2.LlamaStackDistribution, in childInputs) (want, known bool) {
	return in.cfg.EnableServiceMonitor && in.listening.Metrics, in.cfg.ServiceMonitorKnown
}
