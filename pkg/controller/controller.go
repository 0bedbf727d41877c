// Package controller runs LlamaStackDistributions: it turns each CR into its
// Deployment, Service and optional children, and reports their state in the CR's status.
package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	appsac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	coreac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyac "k8s.io/client-go/applyconfigurations/policy/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	llsdscheme "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned/scheme"
	informers "github.com/llamastack/llama-stack-controller/pkg/generated/informers/externalversions"
	listers "github.com/llamastack/llama-stack-controller/pkg/generated/listers/llamastack/v1alpha1"
)

// Config is what NewController needs. The informer factories are started by the caller
// after NewController returns.
type Config struct {
	KubeClient kubernetes.Interface
	Client     clientset.Interface

	// LLSDInformers watches LlamaStackDistributions.
	LLSDInformers informers.SharedInformerFactory
	// ChildInformers watches the owned kinds; it should select on
	// app.kubernetes.io/managed-by=llama-stack-operator and use TransformStripManagedFields.
	ChildInformers kubeinformers.SharedInformerFactory
	// ConfigMapInformers watches the ConfigMaps CRs may reference; it should use
	// TransformConfigMap so that the cache keeps only what the controller reads of each.
	ConfigMapInformers kubeinformers.SharedInformerFactory
	// OperatorInformers watches the operator ConfigMap in OperatorNamespace.
	OperatorInformers kubeinformers.SharedInformerFactory

	// OperatorNamespace holds the operator ConfigMap and is the NetworkPolicy's operator peer.
	OperatorNamespace string
	// WatchNamespace limits the controller to one namespace; "" watches all.
	WatchNamespace string
	// OperatorVersion is reported in status.version.operatorVersion.
	OperatorVersion string
	// Distributions maps distribution names to images; nil means the built-in list.
	Distributions map[string]string
	// Recorder records Events; nil makes one that writes them through EventClient.
	Recorder record.EventRecorder
	// EventClient writes the Events of the recorder NewController makes; nil means
	// KubeClient. A client of its own (its own rate limiter, as Kubernetes' controllers
	// have) keeps Events from taking the requests the workers wait on.
	EventClient kubernetes.Interface
	// ServerProbe reaches the running servers for HealthCheck, version and providers;
	// the zero value disables it.
	ServerProbe ServerProbe
	// OpenShift says the cluster serves the security.openshift.io API group: server pods
	// then leave runAsUser and fsGroup to the namespace's SCC.
	OpenShift bool
}

// Controller is the LlamaStackDistribution controller.
type Controller struct {
	kubeclient kubernetes.Interface
	client     clientset.Interface

	llsdLister     listers.LlamaStackDistributionLister
	llsdIndexer    cache.Indexer
	configMapCache cache.Indexer // configMapEntry objects: read it with cachedConfigMap
	operatorConfig corelisters.ConfigMapLister

	deployments     *childKind[*appsv1.Deployment, appsac.DeploymentApplyConfiguration]
	services        *childKind[*corev1.Service, coreac.ServiceApplyConfiguration]
	pvcs            *childKind[*corev1.PersistentVolumeClaim, coreac.PersistentVolumeClaimApplyConfiguration]
	hpas            *childKind[*autoscalingv2.HorizontalPodAutoscaler, autoscalingac.HorizontalPodAutoscalerApplyConfiguration]
	pdbs            *childKind[*policyv1.PodDisruptionBudget, policyac.PodDisruptionBudgetApplyConfiguration]
	ingresses       *childKind[*networkingv1.Ingress, networkingac.IngressApplyConfiguration]
	networkPolicies *childKind[*networkingv1.NetworkPolicy, networkingac.NetworkPolicyApplyConfiguration]
	configMapCopies *childKind[*corev1.ConfigMap, coreac.ConfigMapApplyConfiguration]

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
	prober *prober
	// caFailures remembers, per CR, CA bundle sources that do not build (caFailure).
	caFailures sync.Map

	operatorNamespace string
	watchNamespace    string
	operatorVersion   string
	distributions     map[string]string
	openShift         bool

	// syncHandler is the sync function; tests replace it.
	syncHandler func(ctx context.Context, key cache.ObjectName) error
}

// configMapIndex indexes CRs by the "<namespace>/<name>" of every ConfigMap they reference.
const configMapIndex = "configMapRef"

// NewController wires the informers' handlers and returns the controller.
func NewController(ctx context.Context, cfg Config) (*Controller, error) {
	logger := klog.FromContext(ctx)
	utilruntime.Must(llsdscheme.AddToScheme(scheme.Scheme))

	llsdInformer := cfg.LLSDInformers.Llamastack().V1alpha1().LlamaStackDistributions()
	deployInformer := cfg.ChildInformers.Apps().V1().Deployments()
	svcInformer := cfg.ChildInformers.Core().V1().Services()
	pvcInformer := cfg.ChildInformers.Core().V1().PersistentVolumeClaims()
	hpaInformer := cfg.ChildInformers.Autoscaling().V2().HorizontalPodAutoscalers()
	pdbInformer := cfg.ChildInformers.Policy().V1().PodDisruptionBudgets()
	ingInformer := cfg.ChildInformers.Networking().V1().Ingresses()
	npInformer := cfg.ChildInformers.Networking().V1().NetworkPolicies()
	cmInformer := cfg.ConfigMapInformers.Core().V1().ConfigMaps()
	opInformer := cfg.OperatorInformers.Core().V1().ConfigMaps()

	c := &Controller{
		kubeclient:        cfg.KubeClient,
		client:            cfg.Client,
		llsdLister:        llsdInformer.Lister(),
		llsdIndexer:       llsdInformer.Informer().GetIndexer(),
		configMapCache:    cmInformer.Informer().GetIndexer(),
		operatorConfig:    opInformer.Lister(),
		operatorNamespace: cfg.OperatorNamespace,
		watchNamespace:    cfg.WatchNamespace,
		operatorVersion:   cfg.OperatorVersion,
		openShift:         cfg.OpenShift,
		distributions:     cfg.Distributions,
		recorder:          cfg.Recorder,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: controllerName}),
		recheck:   workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](2*time.Second, 5*time.Minute),
		recheckAt: map[cache.ObjectName]time.Time{},
	}
	if c.distributions == nil {
		c.distributions = builtinDistributions()
	}
	if c.recorder == nil {
		c.eventClient = cfg.EventClient
		if c.eventClient == nil {
			c.eventClient = cfg.KubeClient
		}
		c.broadcaster = record.NewBroadcaster(record.WithContext(ctx))
		c.recorder = c.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: controllerName})
	}
	c.syncHandler = c.sync
	if cfg.ServerProbe.HTTPClient != nil && cfg.ServerProbe.BaseURL != nil {
		c.prober = newProber(cfg.ServerProbe, func(key cache.ObjectName) { c.queue.Add(key) })
	}
	c.wireChildKinds(deployInformer.Lister(), svcInformer.Lister(), pvcInformer.Lister(), hpaInformer.Lister(),
		pdbInformer.Lister(), ingInformer.Lister(), npInformer.Lister())

	if err := llsdInformer.Informer().AddIndexers(cache.Indexers{configMapIndex: indexByConfigMap}); err != nil {
		return nil, fmt.Errorf("adding the ConfigMap index: %w", err)
	}

	logger.Info("Setting up event handlers")
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{llsdInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: c.updateLLSD,
			DeleteFunc: func(obj any) {}, // children go with the CR (garbage collection)
		}},
		{deployInformer.Informer(), c.ownedHandler()},
		{svcInformer.Informer(), c.ownedHandler()},
		{pvcInformer.Informer(), c.ownedHandler()},
		{hpaInformer.Informer(), c.ownedHandler()},
		{pdbInformer.Informer(), c.ownedHandler()},
		{ingInformer.Informer(), c.ownedHandler()},
		{npInformer.Informer(), c.ownedHandler()},
		{cmInformer.Informer(), c.configMapHandler()},
		{opInformer.Informer(), c.operatorConfigHandler(ctx)},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return nil, fmt.Errorf("adding event handler: %w", err)
		}
		c.cachesSynced = append(c.cachesSynced, h.informer.HasSynced)
	}
	return c, nil
}

func (c *Controller) wireChildKinds(
	deployments appslisters.DeploymentLister, services corelisters.ServiceLister,
	pvcs corelisters.PersistentVolumeClaimLister, hpas autoscalinglisters.HorizontalPodAutoscalerLister,
	pdbs policylisters.PodDisruptionBudgetLister, ingresses networkinglisters.IngressLister,
	nps networkinglisters.NetworkPolicyLister,
) {
	k := c.kubeclient
	c.deployments = &childKind[*appsv1.Deployment, appsac.DeploymentApplyConfiguration]{
		kind:   "Deployment",
		cached: func(ns, n string) (*appsv1.Deployment, error) { return deployments.Deployments(ns).Get(n) },
		live: func(ctx context.Context, ns, n string) (*appsv1.Deployment, error) {
			return k.AppsV1().Deployments(ns).Get(ctx, n, metav1.GetOptions{})
		},
		extract: appsac.ExtractDeployment,
		apply: func(ctx context.Context, ns string, ac *appsac.DeploymentApplyConfiguration, o metav1.ApplyOptions) (*appsv1.Deployment, error) {
			return k.AppsV1().Deployments(ns).Apply(ctx, ac, o)
		},
		patch: func(ctx context.Context, ns, n string, data []byte, o metav1.PatchOptions) (*appsv1.Deployment, error) {
			return k.AppsV1().Deployments(ns).Patch(ctx, n, types.JSONPatchType, data, o)
		},
		delete: func(ctx context.Context, ns, n string, o metav1.DeleteOptions) error {
			return k.AppsV1().Deployments(ns).Delete(ctx, n, o)
		},
	}
	c.services = &childKind[*corev1.Service, coreac.ServiceApplyConfiguration]{
		kind:   "Service",
		cached: func(ns, n string) (*corev1.Service, error) { return services.Services(ns).Get(n) },
		live: func(ctx context.Context, ns, n string) (*corev1.Service, error) {
			return k.CoreV1().Services(ns).Get(ctx, n, metav1.GetOptions{})
		},
		extract: coreac.ExtractService,
		apply: func(ctx context.Context, ns string, ac *coreac.ServiceApplyConfiguration, o metav1.ApplyOptions) (*corev1.Service, error) {
			return k.CoreV1().Services(ns).Apply(ctx, ac, o)
		},
		patch: func(ctx context.Context, ns, n string, data []byte, o metav1.PatchOptions) (*corev1.Service, error) {
			return k.CoreV1().Services(ns).Patch(ctx, n, types.JSONPatchType, data, o)
		},
		delete: func(ctx context.Context, ns, n string, o metav1.DeleteOptions) error {
			return k.CoreV1().Services(ns).Delete(ctx, n, o)
		},
	}
	c.pvcs = &childKind[*corev1.PersistentVolumeClaim, coreac.PersistentVolumeClaimApplyConfiguration]{
		kind: "PersistentVolumeClaim",
		cached: func(ns, n string) (*corev1.PersistentVolumeClaim, error) {
			return pvcs.PersistentVolumeClaims(ns).Get(n)
		},
		live: func(ctx context.Context, ns, n string) (*corev1.PersistentVolumeClaim, error) {
			return k.CoreV1().PersistentVolumeClaims(ns).Get(ctx, n, metav1.GetOptions{})
		},
		extract: coreac.ExtractPersistentVolumeClaim,
		apply: func(ctx context.Context, ns string, ac *coreac.PersistentVolumeClaimApplyConfiguration, o metav1.ApplyOptions) (*corev1.PersistentVolumeClaim, error) {
			return k.CoreV1().PersistentVolumeClaims(ns).Apply(ctx, ac, o)
		},
		// The controller never deletes a PersistentVolumeClaim: it holds the user's data.
		delete: nil,
		// Nor takes over its fields from a previous manager: its spec is all but
		// immutable, and dropping a field from it would be refused.
		patch: nil,
	}
	c.hpas = &childKind[*autoscalingv2.HorizontalPodAutoscaler, autoscalingac.HorizontalPodAutoscalerApplyConfiguration]{
		kind: "HorizontalPodAutoscaler",
		cached: func(ns, n string) (*autoscalingv2.HorizontalPodAutoscaler, error) {
			return hpas.HorizontalPodAutoscalers(ns).Get(n)
		},
		live: func(ctx context.Context, ns, n string) (*autoscalingv2.HorizontalPodAutoscaler, error) {
			return k.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, n, metav1.GetOptions{})
		},
		extract: autoscalingac.ExtractHorizontalPodAutoscaler,
		apply: func(ctx context.Context, ns string, ac *autoscalingac.HorizontalPodAutoscalerApplyConfiguration, o metav1.ApplyOptions) (*autoscalingv2.HorizontalPodAutoscaler, error) {
			return k.AutoscalingV2().HorizontalPodAutoscalers(ns).Apply(ctx, ac, o)
		},
		patch: func(ctx context.Context, ns, n string, data []byte, o metav1.PatchOptions) (*autoscalingv2.HorizontalPodAutoscaler, error) {
			return k.AutoscalingV2().HorizontalPodAutoscalers(ns).Patch(ctx, n, types.JSONPatchType, data, o)
		},
		delete: func(ctx context.Context, ns, n string, o metav1.DeleteOptions) error {
			return k.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctx, n, o)
		},
	}
	c.pdbs = &childKind[*policyv1.PodDisruptionBudget, policyac.PodDisruptionBudgetApplyConfiguration]{
		kind:   "PodDisruptionBudget",
		cached: func(ns, n string) (*policyv1.PodDisruptionBudget, error) { return pdbs.PodDisruptionBudgets(ns).Get(n) },
		live: func(ctx context.Context, ns, n string) (*policyv1.PodDisruptionBudget, error) {
			return k.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, n, metav1.GetOptions{})
		},
		extract: policyac.ExtractPodDisruptionBudget,
		apply: func(ctx context.Context, ns string, ac *policyac.PodDisruptionBudgetApplyConfiguration, o metav1.ApplyOptions) (*policyv1.PodDisruptionBudget, error) {
			return k.PolicyV1().PodDisruptionBudgets(ns).Apply(ctx, ac, o)
		},
		patch: func(ctx context.Context, ns, n string, data []byte, o metav1.PatchOptions) (*policyv1.PodDisruptionBudget, error) {
			return k.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, n, types.JSONPatchType, data, o)
		},
		delete: func(ctx context.Context, ns, n string, o metav1.DeleteOptions) error {
			return k.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, n, o)
		},
	}
	c.ingresses = &childKind[*networkingv1.Ingress, networkingac.IngressApplyConfiguration]{
		kind:   "Ingress",
		cached: func(ns, n string) (*networkingv1.Ingress, error) { return ingresses.Ingresses(ns).Get(n) },
		live: func(ctx context.Context, ns, n string) (*networkingv1.Ingress, error) {
			return k.NetworkingV1().Ingresses(ns).Get(ctx, n, metav1.GetOptions{})
		},
		extract: networkingac.ExtractIngress,
		apply: func(ctx context.Context, ns string, ac *networkingac.IngressApplyConfiguration, o metav1.ApplyOptions) (*networkingv1.Ingress, error) {
			return k.NetworkingV1().Ingresses(ns).Apply(ctx, ac, o)
		},
		patch: func(ctx context.Context, ns, n string, data []byte, o metav1.PatchOptions) (*networkingv1.Ingress, error) {
			return k.NetworkingV1().Ingresses(ns).Patch(ctx, n, types.JSONPatchType, data, o)
		},
		delete: func(ctx context.Context, ns, n string, o metav1.DeleteOptions) error {
			return k.NetworkingV1().Ingresses(ns).Delete(ctx, n, o)
		},
	}
	c.networkPolicies = &childKind[*networkingv1.NetworkPolicy, networkingac.NetworkPolicyApplyConfiguration]{
		kind:   "NetworkPolicy",
		cached: func(ns, n string) (*networkingv1.NetworkPolicy, error) { return nps.NetworkPolicies(ns).Get(n) },
		live: func(ctx context.Context, ns, n string) (*networkingv1.NetworkPolicy, error) {
			return k.NetworkingV1().NetworkPolicies(ns).Get(ctx, n, metav1.GetOptions{})
		},
		extract: networkingac.ExtractNetworkPolicy,
		apply: func(ctx context.Context, ns string, ac *networkingac.NetworkPolicyApplyConfiguration, o metav1.ApplyOptions) (*networkingv1.NetworkPolicy, error) {
			return k.NetworkingV1().NetworkPolicies(ns).Apply(ctx, ac, o)
		},
		patch: func(ctx context.Context, ns, n string, data []byte, o metav1.PatchOptions) (*networkingv1.NetworkPolicy, error) {
			return k.NetworkingV1().NetworkPolicies(ns).Patch(ctx, n, types.JSONPatchType, data, o)
		},
		delete: func(ctx context.Context, ns, n string, o metav1.DeleteOptions) error {
			return k.NetworkingV1().NetworkPolicies(ns).Delete(ctx, n, o)
		},
	}
	c.configMapCopies = &childKind[*corev1.ConfigMap, coreac.ConfigMapApplyConfiguration]{
		kind:   "ConfigMap",
		cached: c.cachedConfigMap,
		live: func(ctx context.Context, ns, n string) (*corev1.ConfigMap, error) {
			return k.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{})
		},
		extract: coreac.ExtractConfigMap,
		apply: func(ctx context.Context, ns string, ac *coreac.ConfigMapApplyConfiguration, o metav1.ApplyOptions) (*corev1.ConfigMap, error) {
			return k.CoreV1().ConfigMaps(ns).Apply(ctx, ac, o)
		},
		// The managed ConfigMaps are compared by content hash and written whole (see
		// userconfig.go, cabundleconfigmap.go), never through ensure: nothing to take over.
		delete: func(ctx context.Context, ns, n string, o metav1.DeleteOptions) error {
			return k.CoreV1().ConfigMaps(ns).Delete(ctx, n, o)
		},
	}
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

	logger.Info("Starting controller", "controller", controllerName)
	logger.Info("Waiting for informer caches to sync")
	if ok := cache.WaitForCacheSync(ctx.Done(), c.cachesSynced...); !ok {
		c.queue.ShutDown()
		if ctx.Err() != nil {
			// Told to stop while starting (e.g. just after winning the Lease): not a failure.
			logger.Info("Stopped before the informer caches synced", "controller", controllerName)
			return nil
		}
		return fmt.Errorf("failed to wait for caches to sync")
	}

	logger.Info("Starting workers", "count", workers)
	var wg wait.Group
	for range workers {
		wg.StartWithContext(ctx, func(ctx context.Context) { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	<-ctx.Done()
	logger.Info("Shutting down workers")
	c.queue.ShutDownWithDrain()
	wg.Wait()
	c.prober.wait()
	logger.Info("Stopped controller", "controller", controllerName)
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
	if namespaceTerminating(err) {
		// Nothing can be created there any more, and the CR is about to go too.
		observeSync(start, "dropped")
		logger.V(2).Info("Namespace is being deleted, dropping", "err", err)
		c.queue.Forget(key)
		return true
	}
	if apierrors.IsConflict(err) {
		// The cache was behind a write (often our own status update): retry quietly.
		observeSync(start, "conflict")
		logger.V(4).Info("Conflict, requeuing", "err", err)
	} else {
		observeSync(start, "error")
		utilruntime.HandleErrorWithContext(ctx, err, "Error syncing; requeuing for later retry", "objectReference", key)
	}
	c.queue.AddRateLimited(key)
	return true
}

// enqueue adds a CR to the queue.
func (c *Controller) enqueue(obj any) {
	key, err := cache.ObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// updateLLSD enqueues a CR when something the sync reads changed: the spec (generation),
// metadata the controller acts on, or a deletion. Status-only updates, among them the
// controller's own, and resyncs are skipped.
func (c *Controller) updateLLSD(oldObj, newObj any) {
	o, ok1 := oldObj.(*v1alpha1.LlamaStackDistribution)
	n, ok2 := newObj.(*v1alpha1.LlamaStackDistribution)
	if !ok1 || !ok2 || o.ResourceVersion == n.ResourceVersion {
		return
	}
	if o.Generation == n.Generation && o.UID == n.UID &&
		(o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) {
		return
	}
	c.enqueue(n)
}

// ownedHandler enqueues the CR that controls a changed child, resolved by Kind and UID.
func (c *Controller) ownedHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    c.handleOwned,
		UpdateFunc: unlessResync(c.handleOwned),
		DeleteFunc: c.handleOwned,
	}
}

// unlessResync makes an UpdateFunc that calls handle with the new object, except on a
// resync, where the resourceVersion is unchanged and so is everything else.
func unlessResync(handle func(obj any)) func(oldObj, newObj any) {
	return func(oldObj, newObj any) {
		o, ok1 := oldObj.(metav1.Object)
		n, ok2 := newObj.(metav1.Object)
		if ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion() {
			return
		}
		handle(newObj)
	}
}

func (c *Controller) handleOwned(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil || ref.Kind != controllerKind.Kind {
		return
	}
	l, err := c.llsdLister.LlamaStackDistributions(o.GetNamespace()).Get(ref.Name)
	if err != nil || l.UID != ref.UID {
		return // owner gone, or a new CR that merely reuses the name
	}
	c.queue.Add(cache.ObjectName{Namespace: l.Namespace, Name: l.Name})
}

// configMapHandler enqueues the CRs that reference a changed ConfigMap, and the owner of
// a managed copy.
func (c *Controller) configMapHandler() cache.ResourceEventHandler {
	handle := func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		cm, ok := obj.(metav1.Object) // a configMapEntry (see TransformConfigMap)
		if !ok {
			return
		}
		c.handleOwned(cm)
		objs, err := c.llsdIndexer.ByIndex(configMapIndex, cm.GetNamespace()+"/"+cm.GetName())
		if err != nil {
			utilruntime.HandleError(err)
			return
		}
		for _, o := range objs {
			c.enqueue(o)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: unlessResync(handle),
		DeleteFunc: handle,
	}
}

// indexByConfigMap lists the ConfigMaps a CR references, as "<namespace>/<name>".
func indexByConfigMap(obj any) ([]string, error) {
	l, ok := obj.(*v1alpha1.LlamaStackDistribution)
	if !ok {
		return nil, nil
	}
	// Every CR watches its namespace's odh-trusted-ca-bundle, which is picked up when it appears.
	keys := []string{l.Namespace + "/" + odhTrustedCABundle}
	if uc := l.Spec.Server.UserConfig; uc != nil {
		keys = append(keys, userConfigNamespace(l)+"/"+uc.ConfigMapName)
	}
	if tls := l.Spec.Server.TLSConfig; tls != nil && tls.CABundle != nil {
		ns := tls.CABundle.ConfigMapNamespace
		if ns == "" {
			ns = l.Namespace
		}
		keys = append(keys, ns+"/"+tls.CABundle.ConfigMapName)
	}
	return keys, nil
}

// enqueueAll adds every CR to the queue.
func (c *Controller) enqueueAll() {
	all, err := c.llsdLister.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, l := range all {
		c.queue.Add(cache.ObjectName{Namespace: l.Namespace, Name: l.Name})
	}
}

// namespaceTerminating reports whether err, or one of the errors joined in it, is the
// API server refusing to create an object in a namespace that is being deleted.
func namespaceTerminating(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return slices.ContainsFunc(joined.Unwrap(), namespaceTerminating)
	}
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
