package children

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// exposedThrough returns a CR modifier exposing the server through an HTTPRoute
// attached to refs, for hostname (may be empty) and path (may be empty).
func exposedThrough(hostname, path string, refs ...v1alpha2.GatewayParentRef) func(*v1alpha2.LlamaStackDistribution) {
	return func(l *v1alpha2.LlamaStackDistribution) {
		if l.Spec.Networking == nil {
			l.Spec.Networking = &v1alpha2.NetworkingSpec{}
		}
		l.Spec.Networking.Expose = &v1alpha2.ExposeSpec{Type: v1alpha2.ExposeHTTPRoute, Hostname: hostname,
			HTTPRoute: &v1alpha2.HTTPRouteSpec{ParentRefs: refs, Path: path}}
	}
}

func TestNewHTTPRoute(t *testing.T) {
	backend := func(port int32) []gatewayv1.HTTPBackendRef {
		return []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
			Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")),
			Name: "app-service", Port: ptr.To(gatewayv1.PortNumber(port))}, Weight: ptr.To[int32](1)}}}
	}
	// A parent reference as the API server stores it, its group and kind defaulted.
	gateway := func(ref gatewayv1.ParentReference) gatewayv1.ParentReference {
		ref.Group, ref.Kind = ptr.To(gatewayv1.Group(gatewayv1.GroupName)), ptr.To(gatewayv1.Kind("Gateway"))
		return ref
	}
	prefix := func(path string) []gatewayv1.HTTPRouteMatch {
		return []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(path)}}}
	}
	for _, tc := range []struct {
		name string
		l    *v1alpha2.LlamaStackDistribution
		want gatewayv1.HTTPRouteSpec
		ann  map[string]string
	}{{
		name: "a Gateway of the CR's namespace, every host, every path",
		l:    newLLSD("app", exposedThrough("", "", v1alpha2.GatewayParentRef{Name: "gw"})),
		want: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{gateway(gatewayv1.ParentReference{Name: "gw"})}},
			Rules:           []gatewayv1.HTTPRouteRule{{Matches: prefix("/"), BackendRefs: backend(8321)}},
		},
	}, {
		name: "a listener of a Gateway elsewhere and another Gateway, a host, a path, the server's port, annotations",
		l: newLLSD("app", exposedThrough("llama.example.com", "/llama",
			v1alpha2.GatewayParentRef{Name: "shared", Namespace: "infra", SectionName: "https"}, v1alpha2.GatewayParentRef{Name: "gw"}),
			func(l *v1alpha2.LlamaStackDistribution) {
				l.Spec.Networking.Port = 9000
				l.Spec.Networking.Expose.Annotations = map[string]string{"example.com/team": "ml"}
			}),
		want: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{
				gateway(gatewayv1.ParentReference{Name: "shared", Namespace: ptr.To(gatewayv1.Namespace("infra")), SectionName: ptr.To(gatewayv1.SectionName("https"))}),
				gateway(gatewayv1.ParentReference{Name: "gw"}),
			}},
			Hostnames: []gatewayv1.Hostname{"llama.example.com"},
			Rules:     []gatewayv1.HTTPRouteRule{{Matches: prefix("/llama"), BackendRefs: backend(9000)}},
		},
		ann: map[string]string{"example.com/team": "ml"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			route := NewHTTPRoute(tc.l)
			assert.Equal(t, "app-route", route.Name)
			assert.Equal(t, testNamespace, route.Namespace)
			assert.Equal(t, llsd.ChildLabels(tc.l), route.Labels)
			assert.True(t, llsd.IsControlledBy(route, tc.l))
			assert.Equal(t, tc.want, route.Spec)
			assert.Equal(t, tc.ann, route.Annotations)
		})
	}
}

// routeWithParents is an HTTPRoute naming refs, with the parent statuses given.
func routeWithParents(refs []gatewayv1.ParentReference, parents ...gatewayv1.RouteParentStatus) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "app-route", Namespace: testNamespace}}
	r.Spec.ParentRefs = refs
	r.Status.Parents = parents
	return r
}

func parentStatus(ref gatewayv1.ParentReference, conds ...metav1.Condition) gatewayv1.RouteParentStatus {
	return gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: "example.com/gateway", Conditions: conds}
}

func routeCond(condType gatewayv1.RouteConditionType, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: string(condType), Status: status, Reason: reason, Message: message}
}

func TestHTTPRouteAcceptance(t *testing.T) {
	gw := gatewayv1.ParentReference{Name: "gw"}
	shared := gatewayv1.ParentReference{Name: "shared", Namespace: ptr.To(gatewayv1.Namespace("infra")), SectionName: ptr.To(gatewayv1.SectionName("https"))}
	accepted := routeCond(gatewayv1.RouteConditionAccepted, metav1.ConditionTrue, "Accepted", "")
	resolved := routeCond(gatewayv1.RouteConditionResolvedRefs, metav1.ConditionTrue, "ResolvedRefs", "")
	for _, tc := range []struct {
		name    string
		route   *gatewayv1.HTTPRoute
		status  metav1.ConditionStatus
		reason  string
		message string
	}{{
		name:    "no Gateway has reported",
		route:   routeWithParents([]gatewayv1.ParentReference{gw}),
		status:  metav1.ConditionUnknown,
		reason:  v1alpha2.ReasonRoutePending,
		message: "HTTPRoute app-route is waiting for Gateway demo/gw to accept it",
	}, {
		name:    "every Gateway accepted it",
		route:   routeWithParents([]gatewayv1.ParentReference{gw, shared}, parentStatus(gw, accepted, resolved), parentStatus(shared, accepted)),
		status:  metav1.ConditionTrue,
		reason:  v1alpha2.ReasonRouteAccepted,
		message: "HTTPRoute app-route is accepted by Gateway demo/gw, infra/shared/https",
	}, {
		name:   "one has, the other has not reported",
		route:  routeWithParents([]gatewayv1.ParentReference{gw, shared}, parentStatus(gw, accepted)),
		status: metav1.ConditionUnknown, reason: v1alpha2.ReasonRoutePending,
		message: "HTTPRoute app-route is waiting for Gateway infra/shared/https to accept it",
	}, {
		name: "a report on another listener of the Gateway is not one on this one",
		route: routeWithParents([]gatewayv1.ParentReference{shared},
			parentStatus(gatewayv1.ParentReference{Name: "shared", Namespace: ptr.To(gatewayv1.Namespace("infra"))}, accepted)),
		status: metav1.ConditionUnknown, reason: v1alpha2.ReasonRoutePending,
		message: "HTTPRoute app-route is waiting for Gateway infra/shared/https to accept it",
	}, {
		name: "refused: the Gateway's reason and message",
		route: routeWithParents([]gatewayv1.ParentReference{gw, shared}, parentStatus(gw, accepted),
			parentStatus(shared, routeCond(gatewayv1.RouteConditionAccepted, metav1.ConditionFalse, "NotAllowedByListeners", "namespace demo is not allowed"))),
		status: metav1.ConditionFalse, reason: v1alpha2.ReasonRouteNotAccepted,
		message: "Gateway infra/shared/https (example.com/gateway) reports Accepted=False, NotAllowedByListeners: namespace demo is not allowed",
	}, {
		name: "accepted, but its backend not resolved",
		route: routeWithParents([]gatewayv1.ParentReference{gw}, parentStatus(gw, accepted,
			routeCond(gatewayv1.RouteConditionResolvedRefs, metav1.ConditionFalse, "BackendNotFound", "service demo/app-service not found"))),
		status: metav1.ConditionFalse, reason: v1alpha2.ReasonRouteNotAccepted,
		message: "Gateway demo/gw (example.com/gateway) reports ResolvedRefs=False, BackendNotFound: service demo/app-service not found",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			status, reason, message := HTTPRouteAcceptance(tc.route)
			assert.Equal(t, tc.status, status)
			assert.Equal(t, tc.reason, reason)
			assert.Equal(t, tc.message, message)
		})
	}
}

func TestHTTPRouteURL(t *testing.T) {
	gw := gatewayv1.ParentReference{Name: "gw"}
	accepted := routeWithParents([]gatewayv1.ParentReference{gw}, parentStatus(gw, routeCond(gatewayv1.RouteConditionAccepted, metav1.ConditionTrue, "Accepted", "")))
	ref := v1alpha2.GatewayParentRef{Name: "gw"}
	assert.Equal(t, "http://llama.example.com", HTTPRouteURL(newLLSD("app", exposedThrough("llama.example.com", "", ref)), accepted, RouteEndpoint{}))
	assert.Equal(t, "http://llama.example.com/v1", HTTPRouteURL(newLLSD("app", exposedThrough("llama.example.com", "/v1", ref)), accepted, RouteEndpoint{}))
	assert.Empty(t, HTTPRouteURL(newLLSD("app", exposedThrough("", "", ref)), accepted, RouteEndpoint{}), "no host name: the Gateway's address is not known")
	assert.Empty(t, HTTPRouteURL(newLLSD("app", exposedThrough("*.example.com", "", ref)), accepted, RouteEndpoint{}), "a wildcard is no URL")
	assert.Empty(t, HTTPRouteURL(newLLSD("app", exposedThrough("llama.example.com", "", ref)), routeWithParents([]gatewayv1.ParentReference{gw}), RouteEndpoint{}),
		"not accepted yet")
	assert.Empty(t, HTTPRouteURL(newLLSD("app", exposedThrough("llama.example.com", "", ref)), nil, RouteEndpoint{}))
}
