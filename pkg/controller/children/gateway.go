package children

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// The Gateways an HTTPRoute attaches to tell its URL: whether the listener serves HTTP
// or HTTPS, and on which port. The controller reads them from an informer of their own
// (its gateway.go); a Gateway it cannot see leaves the URL at plain HTTP on the default
// port.

// HTTPRouteGateways are the Gateways the CR's HTTPRoute attaches to, from
// networking.expose.httpRoute.parentRefs (a ref without a namespace names a Gateway of
// the CR's namespace), sorted, each once; none when the CR asks for no HTTPRoute.
func HTTPRouteGateways(l *v1alpha2.LlamaStackDistribution) []types.NamespacedName {
	if !WantsHTTPRoute(l) {
		return nil
	}
	var out []types.NamespacedName
	for _, ref := range llsd.Networking(l).Expose.HTTPRoute.ParentRefs {
		g := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
		if g.Namespace == "" {
			g.Namespace = l.Namespace
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return slices.Compact(out)
}

// ParentGateway is a Gateway the CR's HTTPRoute attaches to, and whether the
// controller's Gateway cache holds it.
type ParentGateway struct {
	types.NamespacedName
	Found bool
}

// RouteEndpoint is where a route is served: scheme and listener port (0: not known,
// the scheme's default).
type RouteEndpoint struct {
	Scheme string
	Port   int32
}

// HTTPRouteEndpoint is where route is served, from the listeners of the first Gateway
// in its parentRefs that has accepted it and that the controller sees: of the
// listeners the route attaches to (the one its sectionName names, else those whose
// host name matches the route's), an HTTPS one if there is one, else HTTP. gateway
// reads a Gateway from the cache (nil when it has none).
func HTTPRouteEndpoint(route *gatewayv1.HTTPRoute, gateway func(namespace, name string) *gatewayv1.Gateway) RouteEndpoint {
	plain := RouteEndpoint{Scheme: "http"}
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
		var found *RouteEndpoint
		for _, l := range g.Spec.Listeners {
			if ref.SectionName != nil && l.Name != *ref.SectionName || !listenerServesHost(l, host) {
				continue
			}
			switch l.Protocol {
			case gatewayv1.HTTPSProtocolType:
				return RouteEndpoint{Scheme: "https", Port: int32(l.Port)}
			case gatewayv1.HTTPProtocolType:
				if found == nil {
					found = &RouteEndpoint{Scheme: "http", Port: int32(l.Port)}
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

// URL renders the endpoint for host and path: the port only when it is not the
// scheme's default.
func (e RouteEndpoint) URL(host, path string) string {
	if e.Port != 0 && !(e.Scheme == "http" && e.Port == 80) && !(e.Scheme == "https" && e.Port == 443) {
		host = fmt.Sprintf("%s:%d", host, e.Port)
	}
	return e.Scheme + "://" + host + path
}
