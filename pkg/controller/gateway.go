package controller

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"
)

// The Gateways an HTTPRoute attaches to tell its URL: whether the listener serves HTTP
// or HTTPS, and on which port. They are read, never written, from an informer of their
// own while the cluster serves gateway.networking.k8s.io/v1 Gateways (an optional kind
// too), kept as little more than their listeners. A Gateway the controller cannot see
// (another namespace while it watches one) leaves the URL at plain HTTP on the
// default port.

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

// routeEndpoint is where a route is served: scheme and listener port (0: not known,
// the scheme's default).
type routeEndpoint struct {
	scheme string
	port   int32
}

// httpRouteEndpoint is where route is served, from the listeners of the first Gateway
// in its parentRefs that has accepted it and that the controller sees: of the
// listeners the route attaches to (the one its sectionName names, else those whose
// host name matches the route's), an HTTPS one if there is one, else HTTP. gateway
// reads a Gateway from the cache (nil when it has none).
func httpRouteEndpoint(route *gatewayv1.HTTPRoute, gateway func(namespace, name string) *gatewayv1.Gateway) routeEndpoint {
	plain := routeEndpoint{scheme: "http"}
	if route == nil || gateway == nil {
		return plain
	}
	host := ""
	if len(route.Spec.Hostnames) > 0 {
		host = string(route.Spec.Hostnames[0])
	}
	for _, ref := range route.Spec.ParentRefs {
		if ref.Kind != nil && *ref.Kind != "Gateway" || !acceptedBy(route, ref) {
			continue
		}
		ns := route.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		g := gateway(ns, string(ref.Name))
		if g == nil {
			continue
		}
		var found *routeEndpoint
		for _, l := range g.Spec.Listeners {
			if ref.SectionName != nil && l.Name != *ref.SectionName || !listenerServesHost(l, host) {
				continue
			}
			switch l.Protocol {
			case gatewayv1.HTTPSProtocolType:
				return routeEndpoint{scheme: "https", port: int32(l.Port)}
			case gatewayv1.HTTPProtocolType:
				if found == nil {
					found = &routeEndpoint{scheme: "http", port: int32(l.Port)}
				}
			}
		}
		if found != nil {
			return *found
		}
	}
	return plain
}

// acceptedBy tells whether the Gateway of ref has accepted route.
func acceptedBy(route *gatewayv1.HTTPRoute, ref gatewayv1.ParentReference) bool {
	for _, p := range route.Status.Parents {
		if sameParent(route.Namespace, p.ParentRef, ref) {
			if c := meta.FindStatusCondition(p.Conditions, string(gatewayv1.RouteConditionAccepted)); c != nil && c.Status == metav1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

// listenerServesHost tells whether a listener serves host: a listener without a host
// name serves every host; a wildcard one (*.example.com) the names below it.
func listenerServesHost(l gatewayv1.Listener, host string) bool {
	if l.Hostname == nil || host == "" {
		return true
	}
	h := string(*l.Hostname)
	if suffix, ok := strings.CutPrefix(h, "*"); ok {
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return h == host
}

// url renders the endpoint for host and path: the port only when it is not the
// scheme's default.
func (e routeEndpoint) url(host, path string) string {
	if e.port != 0 && !(e.scheme == "http" && e.port == 80) && !(e.scheme == "https" && e.port == 443) {
		host = fmt.Sprintf("%s:%d", host, e.port)
	}
	return e.scheme + "://" + host + path
}
