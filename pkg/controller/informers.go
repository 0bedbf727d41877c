package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// What the informers keep and how they are looked up: the selectors and transforms
// the caller gives each informer factory (only the fields the controller reads are
// cached), and the cache indexes.

// controllerUIDIndex indexes the ConfigMap cache by the UID of the CR that controls an
// entry (configMapEntry keeps only a LlamaStackDistribution's controller reference).
const controllerUIDIndex = "controllerUID"

func indexByControllerUID(obj any) ([]string, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil && ref.Kind == llsd.ControllerKind.Kind {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

// newConfigMapInformer makes the ConfigMap informer of a factory as the factory would,
// but without the namespace index: the cache is read by key and by controllerUIDIndex
// only, and that index would cost each ConfigMap of the cluster an entry.
func newConfigMapInformer(namespace string) func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
	return func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredConfigMapInformer(client, namespace, resync, cache.Indexers{}, nil)
	}
}

// configMapIndex indexes CRs by the "<namespace>/<name>" of every ConfigMap they reference.
const configMapIndex = "configMapRef"

// indexByConfigMap lists the ConfigMaps a CR references, as "<namespace>/<name>".
func indexByConfigMap(obj any) ([]string, error) {
	l, ok := obj.(*v1alpha2.LlamaStackDistribution)
	if !ok {
		return nil, nil
	}
	// Every CR watches its namespace's odh-trusted-ca-bundle, which is picked up when it appears.
	keys := []string{l.Namespace + "/" + revision.ODHTrustedCABundle}
	if uc := l.Spec.OverrideConfig; uc != nil {
		keys = append(keys, revision.UserConfigNamespace(l)+"/"+uc.ConfigMapName)
	}
	if bc := l.Spec.BaseConfig; bc != nil {
		keys = append(keys, l.Namespace+"/"+bc.ConfigMapName)
	}
	if tls := llsd.Networking(l).TLS; tls != nil && tls.CABundle != nil {
		ns := tls.CABundle.ConfigMapNamespace
		if ns == "" {
			ns = l.Namespace
		}
		keys = append(keys, ns+"/"+tls.CABundle.ConfigMapName)
	}
	return keys, nil
}

// TransformConfigMap is the informer transform of the ConfigMap cache: it turns each
// ConfigMap into its configMapEntry. Other objects only lose the managed fields of other
// managers.
func TransformConfigMap(obj any) (any, error) {
	switch o := obj.(type) {
	case *configMapEntry:
		return o, nil
	case *corev1.ConfigMap:
		return newConfigMapEntry(o), nil
	default:
		return children.TransformStripManagedFields(obj)
	}
}

// newHTTPRouteInformer is the informer of the HTTPRoute children (an optional kind,
// started while the cluster serves it): the controller's own routes only, kept without
// others' managed fields, never resynced (the CRs are).
func newHTTPRouteInformer(client gatewayclient.Interface, namespace string) cache.SharedIndexInformer {
	informer := gatewayinformers.NewFilteredHTTPRouteInformer(client, namespace, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(o *metav1.ListOptions) { o.LabelSelector = children.ManagedSelector() })
	// Only fails once the informer has started.
	_ = informer.SetTransform(children.TransformStripManagedFields)
	return informer
}

// newBackendTLSPolicyInformer is the informer of the BackendTLSPolicy children, as
// newHTTPRouteInformer is of the HTTPRoutes.
func newBackendTLSPolicyInformer(client gatewayclient.Interface, namespace string) cache.SharedIndexInformer {
	informer := gatewayinformers.NewFilteredBackendTLSPolicyInformer(client, namespace, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(o *metav1.ListOptions) { o.LabelSelector = children.ManagedSelector() })
	// Only fails once the informer has started.
	_ = informer.SetTransform(children.TransformStripManagedFields)
	return informer
}
