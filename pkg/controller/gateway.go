package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"
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
