package controller

import (
	"context"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
)

// Optional kinds are child kinds whose API the cluster may not serve (Gateway API's
// HTTPRoute). The controller watches each one's CustomResourceDefinition through an
// informer narrowed to its name; while the CRD is established and serves the version
// the controller writes, the kind's own informer runs, started when the CRD appears and
// stopped when it goes. Nothing waits for either at start-up: until the kind's informer
// has synced, a CR that asks for the child neither gets it nor has it deleted, and the
// CR's status says what is known of the API.

// optionalKind is one optional kind: the watch of its CRD and, while the CRD serves
// it, its informer.
type optionalKind struct {
	kind     string
	resource schema.GroupVersionResource
	// newInformer makes the kind's informer (narrowed to the controller's children).
	newInformer func() cache.SharedIndexInformer
	// handler handles the kind's events (those of an owned child).
	handler cache.ResourceEventHandler
	// changed is called when the state of the API may have changed.
	changed func()

	// crds is the informer of the kind's CRD; nil without a CRD client, when the kind is
	// never served.
	crds cache.SharedIndexInformer
	// crdsSynced tells whether the CRD's handler has seen the first list.
	crdsSynced cache.InformerSynced
	// discovered: API discovery found the kind's group version at start. With no CRD
	// of the kind once the CRD informer has synced, an aggregated API server serves it
	// (aggregated), and the kind is served whenever no CRD says otherwise.
	discovered bool

	mu sync.Mutex
	// ctx is the context the kind's informer runs under (run's).
	ctx        context.Context
	running    *kindCache
	aggregated bool
}

// kindCache is the cache of a running optional kind's informer.
type kindCache struct {
	indexer cache.Indexer
	synced  cache.InformerSynced
	stop    context.CancelFunc
	// done is closed when the informer has stopped; nil for a cache no informer fills
	// (tests).
	done chan struct{}
}

// crdName is the name of the CRD that serves resource.
func crdName(resource schema.GroupVersionResource) string {
	return resource.Resource + "." + resource.Group
}

// newOptionalKind watches the CRD of resource with crdClient (nil: the kind is never
// served).
func newOptionalKind(kind string, resource schema.GroupVersionResource, crdClient apiextensionsclient.Interface,
	newInformer func() cache.SharedIndexInformer, handler cache.ResourceEventHandler, changed func()) (*optionalKind, error) {
	k := &optionalKind{kind: kind, resource: resource, newInformer: newInformer, handler: handler, changed: changed}
	if crdClient == nil {
		return k, nil
	}
	name := crdName(resource)
	k.crds = apiextensionsinformers.NewFilteredCustomResourceDefinitionInformer(crdClient, 0, cache.Indexers{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	if err := k.crds.SetTransform(children.TransformStripManagedFields); err != nil {
		return nil, err
	}
	reg, err := k.crds.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.crdChanged,
		UpdateFunc: func(_, obj any) { k.crdChanged(obj) },
		DeleteFunc: func(any) { k.crdChanged(nil) },
	})
	if err != nil {
		return nil, err
	}
	k.crdsSynced = reg.HasSynced
	return k, nil
}

// run watches the CRD until ctx ends, then stops the kind's informer and returns once
// both have stopped. Once the CRD's informer has synced, the CRs hear of it.
func (k *optionalKind) run(ctx context.Context) {
	k.mu.Lock()
	k.ctx = ctx
	k.mu.Unlock()
	if k.crds != nil {
		crdsDone := make(chan struct{})
		go func() {
			defer close(crdsDone)
			k.crds.RunWithContext(ctx)
		}()
		if cache.WaitForCacheSync(ctx.Done(), k.crdsSynced) {
			if k.discovered && len(k.crds.GetStore().ListKeys()) == 0 {
				klog.FromContext(ctx).Info("The cluster serves an optional kind from an aggregated API server", "kind", k.kind, "resource", k.resource.String())
				k.mu.Lock()
				k.aggregated = true
				k.mu.Unlock()
				k.crdChanged(nil)
			}
			k.changed()
		}
		<-crdsDone
	}
	<-ctx.Done()
	k.mu.Lock()
	running := k.running
	k.running = nil
	k.mu.Unlock()
	running.halt()
}

// state tells what is known of the kind's API.
func (k *optionalKind) state() children.APIState {
	if k.crds == nil {
		return children.APIAbsent
	}
	k.mu.Lock()
	running := k.running
	k.mu.Unlock()
	switch {
	case running != nil && running.synced():
		return children.APIServed
	case running != nil || !k.crdsSynced():
		return children.APIUnknown
	}
	return children.APIAbsent
}

// cache returns the running informer's cache; nil when the API is not served.
func (k *optionalKind) cache() cache.Indexer {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.running == nil {
		return nil
	}
	return k.running.indexer
}

// crdChanged starts the kind's informer when crd (nil: deleted) serves the kind and
// none runs, and stops it when crd does not serve it any more.
func (k *optionalKind) crdChanged(obj any) {
	crd, _ := obj.(*apiextensionsv1.CustomResourceDefinition)
	if crd != nil && crd.Name != crdName(k.resource) {
		return // the watch selects the one name
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	served := servesVersion(crd, k.resource.Version) || (crd == nil && k.aggregated)
	if k.ctx == nil || k.ctx.Err() != nil || served == (k.running != nil) {
		return
	}
	logger := klog.FromContext(k.ctx)
	if !served {
		logger.Info("The cluster stopped serving an optional kind: its children are left alone", "kind", k.kind, "resource", k.resource.String())
		running := k.running
		k.running = nil
		// halt waits for the informer's goroutine, which never takes k.mu.
		running.halt()
		go k.changed()
		return
	}
	logger.Info("The cluster serves an optional kind: watching it", "kind", k.kind, "resource", k.resource.String())
	informer := k.newInformer()
	reg, err := informer.AddEventHandler(k.handler)
	if err != nil {
		logger.Error(err, "Cannot watch an optional kind", "kind", k.kind)
		return
	}
	ctx, stop := context.WithCancel(k.ctx)
	running := &kindCache{indexer: informer.GetIndexer(), synced: reg.HasSynced, stop: stop, done: make(chan struct{})}
	k.running = running
	go func() {
		defer close(running.done)
		informer.RunWithContext(ctx)
	}()
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			k.changed()
		}
	}()
}

// halt stops the informer and waits for it; nil does nothing.
func (c *kindCache) halt() {
	if c == nil || c.stop == nil {
		return
	}
	c.stop()
	if c.done != nil {
		<-c.done
	}
}

// servesVersion tells whether crd is established and serves version.
func servesVersion(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	if crd == nil || crd.DeletionTimestamp != nil {
		return false
	}
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	if !established {
		return false
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Served {
			return true
		}
	}
	return false
}

// fromOptionalCache reads one optional kind's objects from its running informer's
// cache; NotFound while the API is not served.
func fromOptionalCache[T any](k *optionalKind) func(namespace, name string) (T, error) {
	return func(ns, n string) (T, error) {
		indexer := k.cache()
		if indexer == nil {
			var zero T
			return zero, apierrors.NewNotFound(k.resource.GroupResource(), n)
		}
		return children.FromIndexer[T](indexer, k.resource.GroupResource())(ns, n)
	}
}
