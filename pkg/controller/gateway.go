package controller

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// The Gateways an HTTPRoute attaches to tell its URL: whether the listener serves HTTP
// or HTTPS, and on which port. They are read, never written, from an informer of their
// own while the cluster serves gateway.networking.k8s.io/v1 Gateways (an optional kind
// too), kept as little more than their listeners; children.HTTPRouteEndpoint reads
// them. A Gateway the controller cannot see (another namespace while it watches one)
// leaves the URL at plain HTTP on the default port.

// gatewayResource is the resource of Gateways.
var gatewayResource = gatewayv1.SchemeGroupVersion.WithResource("gateways")

// newGatewayInformer is the informer of the Gateways of the watched namespaces.
func newGatewayInformer(client gatewayclient.Interface, namespace string) cache.SharedIndexInformer {
	informer := gatewayinformers.NewFilteredGatewayInformer(client, namespace, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil)
	// Only fails once the informer has started.
	_ = informer.SetTransform(TransformGateway)
	return informer
}

// TransformGateway keeps of a Gateway what the URL of a route needs: its name,
// namespace, generation and each listener's name, host name, port and protocol.
func TransformGateway(obj any) (any, error) {
	g, ok := obj.(*gatewayv1.Gateway)
	if !ok {
		return obj, nil
	}
	kept := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: g.Namespace, UID: g.UID,
		ResourceVersion: g.ResourceVersion, Generation: g.Generation}}
	for _, l := range g.Spec.Listeners {
		kept.Spec.Listeners = append(kept.Spec.Listeners, gatewayv1.Listener{Name: l.Name, Hostname: l.Hostname, Port: l.Port, Protocol: l.Protocol})
	}
	return kept, nil
}

// gatewayHandler syncs the CRs exposed through an HTTPRoute when a Gateway comes,
// goes, or changes its spec (its generation): their URL may change.
func gatewayHandler(changed func()) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { changed() },
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(metav1.Object)
			n, ok2 := cur.(metav1.Object)
			if !ok1 || !ok2 || o.GetGeneration() != n.GetGeneration() {
				changed()
			}
		},
		DeleteFunc: func(any) { changed() },
	}
}

// parentGateways is the table's entry, after the HTTPRoute's, that records for a CR
// exposed through an HTTPRoute which of the Gateways it attaches to the Gateway cache
// holds (status.Observed.ParentGateways: none found is Exposed=False,
// GatewayNotFound). It writes nothing; the Gateways' handler (gatewayHandler) syncs
// the CR again when one comes or goes.
type parentGateways struct {
	api            *optionalKind
	watchNamespace string
}

func (e parentGateways) sync(_ context.Context, l *v1alpha2.LlamaStackDistribution, in childInputs, obs *status.Observed) error {
	e.observe(l, in, obs)
	return nil
}

func (e parentGateways) observe(l *v1alpha2.LlamaStackDistribution, _ childInputs, obs *status.Observed) {
	obs.ParentGateways = lookUpParentGateways(l, e.api, e.watchNamespace)
}

// lookUpParentGateways tells, of each Gateway the CR's HTTPRoute attaches to, whether
// the Gateway cache holds it; nil when the CR asks for no HTTPRoute or the cache cannot
// tell: the Gateway API is not served or its cache not synced, a Gateway is in a
// namespace the controller does not watch (watchNamespace, "" for all), or the cache
// fails.
func lookUpParentGateways(l *v1alpha2.LlamaStackDistribution, api *optionalKind, watchNamespace string) []children.ParentGateway {
	if !children.WantsHTTPRoute(l) || api.state() != children.APIServed {
		return nil
	}
	cached := fromOptionalCache[*gatewayv1.Gateway](api)
	var out []children.ParentGateway
	for _, g := range children.HTTPRouteGateways(l) {
		if watchNamespace != "" && g.Namespace != watchNamespace {
			return nil
		}
		_, err := cached(g.Namespace, g.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil
		}
		out = append(out, children.ParentGateway{NamespacedName: g, Found: err == nil})
	}
	return out
}
