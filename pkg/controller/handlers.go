package controller

// Informer event handlers: each turns a change it is told of into the CRs to sync.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
)

// enqueue adds a CR to the queue.
func (c *Controller) enqueue(obj any) {
	key, err := cache.ObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// enqueueDeleted adds a deleted CR to the queue, also when known only by its tombstone.
func (c *Controller) enqueueDeleted(obj any) {
	key, err := cache.DeletionHandlingObjectToName(obj)
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
	o, ok1 := oldObj.(*v1alpha2.LlamaStackDistribution)
	n, ok2 := newObj.(*v1alpha2.LlamaStackDistribution)
	if !ok1 || !ok2 || o.ResourceVersion == n.ResourceVersion {
		return
	}
	c.statusWrites.seen(n)
	if o.Generation == n.Generation && o.UID == n.UID &&
		(o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) {
		return
	}
	c.enqueue(n)
}

// enqueueAsking returns a function that enqueues every CR for which asks is true: the
// CRs an optional kind's API matters to, when it comes or goes.
func (c *Controller) enqueueAsking(asks func(*v1alpha2.LlamaStackDistribution) bool) func() {
	return func() {
		all, err := c.llsdLister.List(labels.Everything())
		if err != nil {
			utilruntime.HandleError(err)
			return
		}
		for _, l := range all {
			if asks(l) {
				c.enqueue(l)
			}
		}
	}
}

// ownedHandler enqueues the CR that controls a changed child, resolved by Kind and UID.
func (c *Controller) ownedHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    c.handleOwned,
		UpdateFunc: unlessResync(c.handleOwned),
		DeleteFunc: c.handleOwnedDelete,
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

// handleOwned enqueues the CR that controls a changed child, resolved by Kind and UID.
func (c *Controller) handleOwned(obj any) { c.enqueueOwner(obj, true) }

// handleOwnedDelete enqueues the CR that controlled a deleted child and, when the child
// was left by an earlier CR of the same name (deleted, then created again), the CR that
// now bears that name: it has been waiting for the garbage collector to delete it.
func (c *Controller) handleOwnedDelete(obj any) { c.enqueueOwner(obj, false) }

// enqueueOwner enqueues the CR named by obj's controller reference; with sameUID only
// when it is that very CR, not a new one that merely reuses the name.
func (c *Controller) enqueueOwner(obj any, sameUID bool) {
	o, ref := controllerOf(obj, llsd.ControllerKind.Kind)
	if ref == nil {
		return
	}
	l, err := c.llsdLister.LlamaStackDistributions(o.GetNamespace()).Get(ref.Name)
	if err != nil || sameUID && l.UID != ref.UID {
		return
	}
	c.queue.Add(cache.ObjectName{Namespace: l.Namespace, Name: l.Name})
}

// controllerOf returns an object (also one known only by its tombstone) and its
// controller reference, when that is of the kind; else a nil reference.
func controllerOf(obj any, kind string) (metav1.Object, *metav1.OwnerReference) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil || ref.Kind != kind {
		return nil, nil
	}
	return o, ref
}

// configMapHandler enqueues the CRs that reference a changed ConfigMap, and the owner of
// a managed copy.
func (c *Controller) configMapHandler() cache.ResourceEventHandler {
	handle := func(obj any, deleted bool) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		cm, ok := obj.(metav1.Object) // a configMapEntry (see TransformConfigMap)
		if !ok {
			return
		}
		// A deleted copy may be one an earlier CR of the same name left (see
		// handleOwnedDelete).
		c.enqueueOwner(cm, !deleted)
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
		AddFunc:    func(obj any) { handle(obj, false) },
		UpdateFunc: unlessResync(func(obj any) { handle(obj, false) }),
		DeleteFunc: func(obj any) { handle(obj, true) },
	}
}

// replicaSetHandler enqueues the CR of a new or deleted ReplicaSet's Deployment (the
// CR's name; a Deployment of that name that the CR does not control is no business of
// the sync). A new one: the pods PodProblemFor reads are those of the Deployment's
// current ReplicaSet, and a stuck pod's event may come before its ReplicaSet is in the
// cache, with nothing else to sync again (adds are rare: one per rollout). A deleted
// one: a generated ConfigMap it mounted may now be unused. Other changes of
// ReplicaSets come with changes of their Deployment, which are watched already.
func (c *Controller) replicaSetHandler() cache.ResourceEventHandler {
	handle := func(obj any) {
		o, ref := controllerOf(obj, "Deployment")
		if ref == nil {
			return
		}
		l, err := c.llsdLister.LlamaStackDistributions(o.GetNamespace()).Get(ref.Name)
		if err != nil {
			return
		}
		// A deleted Deployment (the ReplicaSet's deletion follows it) is no longer cached.
		if d, err := c.deployments.Cached(l.Namespace, llsd.DeploymentName(l)); err == nil && !llsd.IsControlledBy(d, l) {
			return
		}
		c.queue.Add(cache.ObjectName{Namespace: l.Namespace, Name: l.Name})
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: handle, DeleteFunc: handle}
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

// operatorConfigHandler re-syncs every CR when the operator ConfigMap changes, and
// reports a ConfigMap that is not valid, or deleted, once per change, on the ConfigMap.
func (c *Controller) operatorConfigHandler(ctx context.Context) cache.ResourceEventHandler {
	logger := klog.FromContext(ctx)
	ours := func(obj any) *corev1.ConfigMap {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != OperatorConfigMapName || cm.Namespace != c.operatorNamespace {
			return nil
		}
		return cm
	}
	handle := func(obj any) {
		cm := ours(obj)
		if cm == nil {
			return
		}
		for _, p := range revision.ParseOperatorConfig(cm, c.distributions).Problems {
			logger.Error(nil, "Operator ConfigMap is invalid", "configMap", klog.KObj(cm), "problem", p)
			c.recorder.Eventf(cm, corev1.EventTypeWarning, "InvalidConfiguration", "%s", p)
		}
		c.enqueueAll()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: unlessResync(handle),
		DeleteFunc: func(obj any) {
			if cm := ours(obj); cm != nil {
				c.reportMissingOperatorConfig(ctx, cm, "was deleted")
				c.enqueueAll()
			}
		},
	}
}

// missingOperatorConfigMessage says what the controller does without its ConfigMap.
const missingOperatorConfigMessage = "existing NetworkPolicies and running server images are kept as they are until it is recreated (a server still on an earlier release's built-in image moves to this release's); new LlamaStackDistributions get the built-in defaults (no NetworkPolicy, the built-in image)"

// reportMissingOperatorConfig logs, and records a Warning Event about, an operator
// ConfigMap that is not there; cm names it.
func (c *Controller) reportMissingOperatorConfig(ctx context.Context, cm *corev1.ConfigMap, what string) {
	msg := fmt.Sprintf("ConfigMap %s/%s %s: %s", cm.Namespace, cm.Name, what, missingOperatorConfigMessage)
	klog.FromContext(ctx).Error(nil, "Operator ConfigMap is missing", "configMap", klog.KObj(cm), "detail", msg)
	c.recorder.Event(cm, corev1.EventTypeWarning, "OperatorConfigMissing", msg)
}

// podHandler enqueues a pod's CR (by its instance label, in the pod's namespace) when
// what rollout.ProblemOf says of the pod changes: a pod that gets stuck, changes cause,
// recovers or goes away. Other pod updates (a restart count, a condition's time, a pod
// becoming ready) are not syncs: what they change reaches the Deployment's status,
// which is watched. Whether the pod is the CR's is checked by the sync, through the
// ReplicaSet and the Deployment, by UID.
func (c *Controller) podHandler() cache.ResourceEventHandler {
	asPod := func(obj any) *corev1.Pod {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		p, _ := obj.(*corev1.Pod)
		return p
	}
	enqueue := func(p *corev1.Pod) {
		name := p.Labels[llsd.LabelInstance]
		if name == "" {
			return
		}
		if _, err := c.llsdLister.LlamaStackDistributions(p.Namespace).Get(name); err == nil {
			c.queue.Add(cache.ObjectName{Namespace: p.Namespace, Name: name})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p := asPod(obj); p != nil && rollout.ProblemOf(p) != nil {
				enqueue(p)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := asPod(oldObj), asPod(newObj)
			if o == nil || n == nil {
				return
			}
			if po, pn := rollout.ProblemOf(o), rollout.ProblemOf(n); !samePodProblem(po, pn) || crashLoopsOn(o) != crashLoopsOn(n) {
				enqueue(n)
			}
		},
		DeleteFunc: func(obj any) {
			if p := asPod(obj); p != nil && rollout.ProblemOf(p) != nil {
				enqueue(p)
			}
		},
	}
}

// crashLoopsOn tells whether the pod crash-loops long enough for its rollout to be
// taken for failed (failedRollout): the restart that crosses rollout.RollbackAfterRestarts is a
// sync, the others are not.
func crashLoopsOn(p *corev1.Pod) bool {
	if rollout.Restarts(p) < rollout.RollbackAfterRestarts {
		return false
	}
	pr := rollout.ProblemOf(p)
	return pr != nil && pr.Reason == v1alpha2.ReasonCrashLoopBackOff
}

// samePodProblem compares what two problems say: a crash loop's container running
// again between two back-offs says the same as in the back-off, and is no sync.
func samePodProblem(a, b *rollout.PodProblem) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Reason == b.Reason && a.Message == b.Message
}
