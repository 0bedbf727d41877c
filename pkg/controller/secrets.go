package controller

import (
	"unique"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// The Secret cache: so that a TLS Secret deleted, replaced or renewed reaches its CRs in
// seconds, the controller watches Secrets, but only their metadata (the metadata API:
// the API server sends no data, and no key reaches the controller through the watch),
// and keeps of each only its name, namespace, UID and resourceVersion (TransformSecret):
// a few hundred bytes per Secret of the cluster, whatever it holds
// (BenchmarkSecretCache). A CR's own Secret is read with a GET when the version the
// cache holds is not the one it read (revision.Resolver.SecretVersion). The other way,
// a watch narrowed to each name in use, would cost a watch (a connection's stream, a
// reflector and its goroutines) per referenced Secret and open and close them as CRs
// change, for a saving of the same few hundred bytes per unrelated Secret.

// secretsResource is the resource of Secrets.
var secretsResource = corev1.SchemeGroupVersion.WithResource("secrets")

// newSecretInformer is the informer of the Secret cache: metadata only, transformed by
// TransformSecret, without the namespace index (the cache is read by key only, and the
// index would cost each Secret of the cluster an entry), never resynced.
func newSecretInformer(client metadata.Interface, namespace string) cache.SharedIndexInformer {
	informer := metadatainformer.NewFilteredMetadataInformer(client, secretsResource, namespace, 0, cache.Indexers{}, nil).Informer()
	// Only fails once the informer has started.
	_ = informer.SetTransform(TransformSecret)
	return informer
}

// TransformSecret is the informer transform of the Secret cache: it keeps of a Secret
// (its metadata, or a whole Secret) a PartialObjectMetadata with its name, namespace
// (one copy per namespace), UID and resourceVersion. Tombstones pass unchanged.
func TransformSecret(obj any) (any, error) {
	o, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: o.GetName(), Namespace: unique.Make(o.GetNamespace()).Value(),
		UID: o.GetUID(), ResourceVersion: o.GetResourceVersion(),
	}}, nil
}

// secretIndex indexes CRs by the "<namespace>/<name>" of the Secret of their server's
// certificate.
const secretIndex = "secretRef"

// indexBySecret lists the TLS Secret a CR references, as "<namespace>/<name>".
func indexBySecret(obj any) ([]string, error) {
	l, ok := obj.(*v1alpha2.LlamaStackDistribution)
	if !ok {
		return nil, nil
	}
	if name := revision.TLSSecretName(l); name != "" {
		return []string{l.Namespace + "/" + name}, nil
	}
	return nil, nil
}

// secretHandler enqueues the CRs whose server's certificate is in a Secret that was
// created, changed (a new resourceVersion: resyncs are skipped) or deleted.
func (c *Controller) secretHandler() cache.ResourceEventHandler {
	handle := func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		s, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		objs, err := c.llsdIndexer.ByIndex(secretIndex, s.GetNamespace()+"/"+s.GetName())
		if err != nil {
			utilruntime.HandleError(err)
			return
		}
		for _, o := range objs {
			c.enqueue(o)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: handle, UpdateFunc: unlessResync(handle), DeleteFunc: handle}
}

// cachedSecretVersion is the version (revision.SecretVersion) of the Secret the cache
// holds under that name; "" when it holds none.
func (c *Controller) cachedSecretVersion(namespace, name string) string {
	obj, exists, err := c.secretCache.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return ""
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return ""
	}
	return revision.SecretVersion(o)
}
