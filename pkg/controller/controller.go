// Package controller runs LlamaStackDistributions: it turns each CR into its
// Deployment, Service and optional children, and reports their state in the CR's status.
package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	appsac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	coreac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/client-go/dynamic"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/probe"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	llsdscheme "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned/scheme"
	informers "github.com/llamastack/llama-stack-controller/pkg/generated/informers/externalversions"
	listers "github.com/llamastack/llama-stack-controller/pkg/generated/listers/llamastack/v1alpha2"
)

// Config is what NewController needs. The informer factories are started by the caller
// after NewController returns.
type Config struct {
	KubeClient kubernetes.Interface
	Client     clientset.Interface

	// LLSDInformers watches LlamaStackDistributions.
	LLSDInformers informers.SharedInformerFactory
	// ChildInformers watches the owned kinds; it should select on
	// app.kubernetes.io/managed-by=llama-stack-operator and use children.TransformStripManagedFields.
	ChildInformers kubeinformers.SharedInformerFactory
	// ConfigMapInformers watches the ConfigMaps CRs may reference; it should use
	// TransformConfigMap so that the cache keeps only what the controller reads of each.
	// NewController makes its ConfigMap informer (see newConfigMapInformer): the
	// factory's resync period and transform apply to it, but it watches WatchNamespace
	// whatever namespace the factory was given, and without the factory's list options
	// (a tweak would hide ConfigMaps a CR may name). The factory must have made no
	// ConfigMap informer before: that one would be used instead.
	ConfigMapInformers kubeinformers.SharedInformerFactory
	// OperatorInformers watches the operator ConfigMap in OperatorNamespace.
	OperatorInformers kubeinformers.SharedInformerFactory
	// ReplicaSetInformers watches the ReplicaSets of the server Deployments, which tell
	// which generated ConfigMaps are still in use; it should select on
	// rollout.ReplicaSetSelector() and use rollout.TransformReplicaSet.
	ReplicaSetInformers kubeinformers.SharedInformerFactory
	// PodInformers watches the server pods, which tell why one does not start; it
	// should select on rollout.PodSelector() and use rollout.TransformPod.
	PodInformers kubeinformers.SharedInformerFactory
	// MetadataClient watches the metadata of the Secrets of WatchNamespace (secrets.go):
	// the controller runs that informer itself, in Run.
	MetadataClient metadata.Interface

	// OperatorNamespace holds the operator ConfigMap and is the NetworkPolicy's operator peer.
	OperatorNamespace string
	// WatchNamespace limits the controller to one namespace; "" watches all.
	WatchNamespace string
	// OperatorVersion is reported in status.version.operatorVersion.
	OperatorVersion string
	// Recorder records Events; nil makes one that writes them through EventClient.
	Recorder record.EventRecorder
	// EventClient writes the Events of the recorder NewController makes; nil means
	// KubeClient. A client of its own (its own rate limiter, as Kubernetes' controllers
	// have) keeps Events from taking the requests the workers wait on.
	EventClient kubernetes.Interface
	// ServerProbe reaches the running servers for HealthCheck, version and providers;
	// the zero value disables it.
	ServerProbe probe.Config
	// OpenShift says the cluster serves the security.openshift.io API group: server pods
	// then leave runAsUser and fsGroup to the namespace's SCC.
	OpenShift bool
	// CRDClient watches the CRDs of the optional kinds (optionalkinds.go), and
	// GatewayClient writes and watches HTTPRoutes; without both, no HTTPRoute is made
	// and a CR that asks for one is told the API is not served.
	CRDClient     apiextensionsclient.Interface
	GatewayClient gatewayclient.Interface
	// RoutesDiscovered says discovery found route.openshift.io/v1 at start. OpenShift
	// serves Routes from its own API server, not from a CRD: without a Route CRD, the
	// kind is then served from the start.
	RoutesDiscovered bool
	// DynamicClient writes and watches the optional kinds without a typed client
	// (ServiceMonitors, OpenShift Routes); without it and CRDClient, none is made.
	DynamicClient dynamic.Interface
}

// Controller is the LlamaStackDistribution controller.
type Controller struct {
	kubeclient kubernetes.Interface
	client     clientset.Interface

	llsdLister     listers.LlamaStackDistributionLister
	llsdIndexer    cache.Indexer
	configMapCache cache.Indexer // configMapEntry objects: read it with cachedConfigMap
	operatorConfig corelisters.ConfigMapLister
	replicaSets    appslisters.ReplicaSetLister
	pods           corelisters.PodLister
	// secretInformer holds the metadata of Secrets (secrets.go); Run runs it.
	secretInformer cache.SharedIndexInformer
	secretCache    cache.Indexer

	deployments     *children.Kind[*appsv1.Deployment, appsac.DeploymentApplyConfiguration]
	services        *children.Kind[*corev1.Service, coreac.ServiceApplyConfiguration]
	pvcs            *children.Kind[*corev1.PersistentVolumeClaim, coreac.PersistentVolumeClaimApplyConfiguration]
	hpas            *children.Kind[*autoscalingv2.HorizontalPodAutoscaler, autoscalingac.HorizontalPodAutoscalerApplyConfiguration]
	pdbs            *children.Kind[*policyv1.PodDisruptionBudget, policyac.PodDisruptionBudgetApplyConfiguration]
	ingresses       *children.Kind[*networkingv1.Ingress, networkingac.IngressApplyConfiguration]
	networkPolicies *children.Kind[*networkingv1.NetworkPolicy, networkingac.NetworkPolicyApplyConfiguration]
	configMapCopies *children.Kind[*corev1.ConfigMap, coreac.ConfigMapApplyConfiguration]
	httpRoutes      *children.Kind[*gatewayv1.HTTPRoute, gatewayac.HTTPRouteApplyConfiguration]
	backendTLS      *children.Kind[*gatewayv1.BackendTLSPolicy, gatewayac.BackendTLSPolicyApplyConfiguration]
	serviceMonitors *children.Kind[*unstructured.Unstructured, unstructured.Unstructured]
	routes          *children.Kind[*unstructured.Unstructured, unstructured.Unstructured]
	// optionalKinds are the kinds whose API the cluster may not serve, each watched
	// while it does (optionalkinds.go).
	optionalKinds []*optionalKind
	// childKinds are the kinds bound to the child informers (childkinds.go).
	childKinds []children.Bound
	// table is every child a CR has, in the order a sync makes them (childkinds.go).
	table childTable

	cachesSynced []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]
	// recheck spaces out re-syncs of CRs blocked by something no event announces the
	// end of (an object of someone else's under a child's name): seconds growing to minutes.
	recheck workqueue.TypedRateLimiter[cache.ObjectName]
	// recheckAt holds when each pending recheck is due.
	recheckMu sync.Mutex
	recheckAt map[cache.ObjectName]time.Time

	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster
	// eventClient writes the broadcaster's Events.
	eventClient kubernetes.Interface

	// prober asks running servers for their health, version and providers.
	prober *probe.Prober
	// caFailures remembers, per CR, CA bundle sources that do not build (caFailure).
	caFailures sync.Map
	// failing holds, per CR, when its syncs started failing (failure).
	failing sync.Map
	// statusWrites holds, per CR, its last status write until the cache has it.
	statusWrites lastStatusWrites
	// resolver resolves each sync's revision and keeps, per CR, what it read live.
	resolver *revision.Resolver
	// caTrust remembers, per CR, the CA bundle last read live for the probe's trust.
	caTrust revision.ConfigMapReads
	// rollouts follows the Deployments' rollouts and makes their rollbacks.
	rollouts *rollout.Rollouts
	// clock tells the time of failures; tests replace it.
	clock clock.PassiveClock

	operatorNamespace string
	watchNamespace    string
	operatorVersion   string
	distributions     map[string]string
	openShift         bool

	// syncHandler is the sync function; tests replace it.
	syncHandler func(ctx context.Context, key cache.ObjectName) error
}

// NewController wires the informers' handlers and returns the controller.
func NewController(ctx context.Context, cfg Config) (*Controller, error) {
	utilruntime.Must(llsdscheme.AddToScheme(scheme.Scheme))

	llsdInformer := cfg.LLSDInformers.Llamastack().V1alpha2().LlamaStackDistributions()
	cmInformer := cfg.ConfigMapInformers.InformerFor(&corev1.ConfigMap{}, newConfigMapInformer(cfg.WatchNamespace))
	opInformer := cfg.OperatorInformers.Core().V1().ConfigMaps()
	rsInformer := cfg.ReplicaSetInformers.Apps().V1().ReplicaSets()
	podInformer := cfg.PodInformers.Core().V1().Pods()
	if cfg.MetadataClient == nil {
		return nil, fmt.Errorf("no metadata client to watch Secrets with")
	}
	secretInformer := newSecretInformer(cfg.MetadataClient, cfg.WatchNamespace)

	c := &Controller{
		kubeclient:        cfg.KubeClient,
		client:            cfg.Client,
		llsdLister:        llsdInformer.Lister(),
		llsdIndexer:       llsdInformer.Informer().GetIndexer(),
		configMapCache:    cmInformer.GetIndexer(),
		operatorConfig:    opInformer.Lister(),
		replicaSets:       rsInformer.Lister(),
		pods:              podInformer.Lister(),
		secretInformer:    secretInformer,
		secretCache:       secretInformer.GetIndexer(),
		operatorNamespace: cfg.OperatorNamespace,
		watchNamespace:    cfg.WatchNamespace,
		operatorVersion:   cfg.OperatorVersion,
		openShift:         cfg.OpenShift,
		distributions:     revision.BuiltinDistributions(),
		recorder:          cfg.Recorder,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: llsd.Controller}),
		recheck:   workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](2*time.Second, 5*time.Minute),
		recheckAt: map[cache.ObjectName]time.Time{},
		clock:     clock.RealClock{},
	}
	if c.recorder == nil {
		c.eventClient = cfg.EventClient
		if c.eventClient == nil {
			c.eventClient = cfg.KubeClient
		}
		c.broadcaster = record.NewBroadcaster(record.WithContext(ctx))
		c.recorder = c.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: llsd.Controller})
	}
	c.syncHandler = c.sync
	c.resolver = c.newResolver()
	if cfg.ServerProbe.Endpoint != nil {
		c.prober = probe.New(cfg.ServerProbe, func(key cache.ObjectName) { c.queue.Add(key) })
	}
	children, err := c.bindChildKinds(cfg.ChildInformers)
	if err != nil {
		return nil, err
	}
	c.childKinds = children
	c.rollouts = &rollout.Rollouts{Client: cfg.KubeClient, ReplicaSets: c.replicaSets, Pods: c.pods,
		ConfigMap: c.cachedConfigMap, Extract: c.deployments.Extract, Now: func() time.Time { return c.clock.Now() }}
	if err := c.bindOptionalKinds(cfg); err != nil {
		return nil, err
	}

	w := watched{llsd: llsdInformer.Informer(), configMaps: cmInformer, operator: opInformer.Informer(),
		replicaSets: rsInformer.Informer(), pods: podInformer.Informer(), secrets: secretInformer}
	if err := c.watch(ctx, w, children); err != nil {
		return nil, err
	}
	return c, nil
}

// watched are the informers the controller watches besides its children's.
type watched struct {
	llsd, configMaps, operator, replicaSets, pods, secrets cache.SharedIndexInformer
}

// watch adds the indexes and event handlers of w and of the children's informers, and
// records what the workers wait for before they start.
func (c *Controller) watch(ctx context.Context, w watched, children []children.Bound) error {
	if err := w.llsd.AddIndexers(cache.Indexers{configMapIndex: indexByConfigMap, secretIndex: indexBySecret}); err != nil {
		return fmt.Errorf("adding the ConfigMap and Secret indexes: %w", err)
	}
	if err := w.configMaps.AddIndexers(cache.Indexers{controllerUIDIndex: indexByControllerUID}); err != nil {
		return fmt.Errorf("adding the ConfigMap owner index: %w", err)
	}

	klog.FromContext(ctx).Info("Setting up event handlers")
	type informerHandler struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}
	handlers := []informerHandler{
		{w.llsd, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: c.updateLLSD,
			// Its children go with it (garbage collection); the sync of a deleted CR
			// drops what is kept for it.
			DeleteFunc: c.enqueueDeleted,
		}},
		{w.configMaps, c.configMapHandler()},
		{w.operator, c.operatorConfigHandler(ctx)},
		{w.replicaSets, c.replicaSetHandler()},
		{w.pods, c.podHandler()},
		{w.secrets, c.secretHandler()},
	}
	for _, child := range children {
		handlers = append(handlers, informerHandler{child.Informer, c.ownedHandler()})
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return fmt.Errorf("adding event handler: %w", err)
		}
		c.cachesSynced = append(c.cachesSynced, h.informer.HasSynced)
	}
	return nil
}

// Run starts the workers and blocks until ctx is cancelled; then it stops taking new
// work, lets the workers finish the item they hold, and returns.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)

	if c.broadcaster != nil {
		c.broadcaster.StartStructuredLogging(3)
		c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.eventClient.CoreV1().Events("")})
		defer c.broadcaster.Shutdown()
	}

	logger.Info("Starting controller", "controller", llsd.Controller)
	var wg wait.Group
	// The Secret informer is the controller's own (the caller starts the factories').
	wg.StartWithContext(ctx, c.secretInformer.RunWithContext)
	logger.Info("Waiting for informer caches to sync")
	if ok := cache.WaitForCacheSync(ctx.Done(), c.cachesSynced...); !ok {
		c.queue.ShutDown()
		wg.Wait()
		if ctx.Err() != nil {
			// Told to stop while starting (e.g. just after winning the Lease): not a failure.
			logger.Info("Stopped before the informer caches synced", "controller", llsd.Controller)
			return nil
		}
		return fmt.Errorf("failed to wait for caches to sync")
	}

	if _, err := c.operatorConfig.ConfigMaps(c.operatorNamespace).Get(OperatorConfigMapName); apierrors.IsNotFound(err) {
		c.reportMissingOperatorConfig(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.operatorNamespace, Name: OperatorConfigMapName}}, "does not exist")
	}
	logger.Info("Starting workers", "count", workers)
	// The optional kinds are watched beside the workers: nothing waits for them.
	for _, k := range c.optionalKinds {
		wg.StartWithContext(ctx, k.run)
	}
	for range workers {
		wg.StartWithContext(ctx, func(ctx context.Context) { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	<-ctx.Done()
	logger.Info("Shutting down workers")
	c.queue.ShutDownWithDrain()
	wg.Wait()
	c.prober.Wait()
	logger.Info("Stopped controller", "controller", llsd.Controller)
	return nil
}

// HasSynced reports whether every informer the controller reads has synced.
func (c *Controller) HasSynced() bool {
	for _, synced := range c.cachesSynced {
		if !synced() {
			return false
		}
	}
	return true
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if ctx.Err() != nil {
		// Stopping: the keys still queued are not synced with a cancelled context (every
		// request would fail); a controller that starts later lists everything anew.
		return false
	}

	logger := klog.LoggerWithValues(klog.FromContext(ctx), "llamaStackDistribution", key)
	ctx = klog.NewContext(ctx, logger)
	start := time.Now()
	err := c.syncHandler(ctx, key)
	if err == nil {
		observeSync(start, "success")
		c.queue.Forget(key)
		return true
	}
	if fault.NamespaceTerminating(err) {
		// Nothing can be created there any more, and the CR is about to go too.
		observeSync(start, "dropped")
		logger.V(2).Info("Namespace is being deleted, dropping", "err", err)
		c.queue.Forget(key)
		return true
	}
	if c.deletedDuringSync(ctx, key, err) {
		// The CR went away while it was synced (its status write found nothing): not an
		// error, and its delete event forgets what was kept of it.
		observeSync(start, "dropped")
		logger.V(2).Info("Deleted while syncing, dropping", "err", err)
		c.queue.Forget(key)
		return true
	}
	if real := fault.WithoutConflicts(err); real == nil {
		// The cache was behind a write (often our own status update): retry quietly.
		observeSync(start, "conflict")
		logger.V(4).Info("Conflict, requeuing", "err", err)
	} else {
		observeSync(start, "error")
		utilruntime.HandleErrorWithContext(ctx, real, "Error syncing; requeuing for later retry", "objectReference", key)
	}
	c.queue.AddRateLimited(key)
	return true
}

// deletedDuringSync tells whether err, or one of the errors joined in it, is the API
// server saying that the CR itself is not found, and the CR is indeed gone: read live,
// as the cache may not have seen the deletion yet.
func (c *Controller) deletedDuringSync(ctx context.Context, key cache.ObjectName, err error) bool {
	if !fault.NotFoundCR(err, key) {
		return false
	}
	_, getErr := c.client.LlamastackV1alpha2().LlamaStackDistributions(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	return apierrors.IsNotFound(getErr)
}

// The names the controller's users read: its field manager, the label value that marks
// its children, and the ConfigMap annotation that opens one to other namespaces.
const (
	// OperatorConfigMapName is the ConfigMap, in the operator namespace, that holds
	// featureFlags and image-overrides (as upstream).
	OperatorConfigMapName = revision.OperatorConfigMapName
	// FieldManager is the server-side apply field manager of every write the controller
	// makes.
	FieldManager = llsd.FieldManager
	// ManagedByValue marks every child (label app.kubernetes.io/managed-by); the child
	// informers select on it.
	ManagedByValue = llsd.ManagedByValue
	// AllowedNamespacesAnnotation on a ConfigMap lists (comma-separated, or "*") the
	// namespaces whose LlamaStackDistributions may use it from another namespace.
	AllowedNamespacesAnnotation = llsd.AllowedNamespacesAnnotation
)
