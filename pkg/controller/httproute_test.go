package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	core "k8s.io/client-go/testing"
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
			Name: "app-service", Port: ptr.To(gatewayv1.PortNumber(port))}}}}
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
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
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
				{Name: "shared", Namespace: ptr.To(gatewayv1.Namespace("infra")), SectionName: ptr.To(gatewayv1.SectionName("https"))},
				{Name: "gw"},
			}},
			Hostnames: []gatewayv1.Hostname{"llama.example.com"},
			Rules:     []gatewayv1.HTTPRouteRule{{Matches: prefix("/llama"), BackendRefs: backend(9000)}},
		},
		ann: map[string]string{"example.com/team": "ml"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			route := newHTTPRoute(tc.l)
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
			status, reason, message := httpRouteAcceptance(tc.route)
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
	assert.Equal(t, "http://llama.example.com", httpRouteURL(newLLSD("app", exposedThrough("llama.example.com", "", ref)), accepted, routeEndpoint{}))
	assert.Equal(t, "http://llama.example.com/v1", httpRouteURL(newLLSD("app", exposedThrough("llama.example.com", "/v1", ref)), accepted, routeEndpoint{}))
	assert.Empty(t, httpRouteURL(newLLSD("app", exposedThrough("", "", ref)), accepted, routeEndpoint{}), "no host name: the Gateway's address is not known")
	assert.Empty(t, httpRouteURL(newLLSD("app", exposedThrough("*.example.com", "", ref)), accepted, routeEndpoint{}), "a wildcard is no URL")
	assert.Empty(t, httpRouteURL(newLLSD("app", exposedThrough("llama.example.com", "", ref)), routeWithParents([]gatewayv1.ParentReference{gw}), routeEndpoint{}),
		"not accepted yet")
	assert.Empty(t, httpRouteURL(newLLSD("app", exposedThrough("llama.example.com", "", ref)), nil, routeEndpoint{}))
}

func TestExposedCondition(t *testing.T) {
	gw := gatewayv1.ParentReference{Name: "gw"}
	asks := newLLSD("app", exposedThrough("", "", v1alpha2.GatewayParentRef{Name: "gw"}))
	route := routeWithParents([]gatewayv1.ParentReference{gw}, parentStatus(gw, routeCond(gatewayv1.RouteConditionAccepted, metav1.ConditionTrue, "Accepted", "")))
	ingress := newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking = &v1alpha2.NetworkingSpec{Expose: &v1alpha2.ExposeSpec{}}
	})
	assert.Equal(t, dropped, exposedCondition(ingress, observed{}), "an Ingress has no Exposed condition")
	assert.Equal(t, dropped, exposedCondition(newLLSD("app"), observed{}))
	assert.Equal(t, keepAsIs, exposedCondition(asks, observed{httpRouteAPI: apiUnknown}), "not known yet")
	assert.Equal(t, keepAsIs, exposedCondition(asks, observed{httpRouteAPI: apiServed}), "served, but the route not seen (the sync stopped before)")
	absent := exposedCondition(asks, observed{httpRouteAPI: apiAbsent})
	assert.Equal(t, metav1.ConditionFalse, absent.status)
	assert.Equal(t, v1alpha2.ReasonAPINotServed, absent.reason)
	assert.Contains(t, absent.message, "gateway.networking.k8s.io/v1")
	assert.Equal(t, setTo(metav1.ConditionTrue, v1alpha2.ReasonRouteAccepted, "HTTPRoute app-route is accepted by Gateway demo/gw"),
		exposedCondition(asks, observed{httpRouteAPI: apiServed, httpRoute: route}))
}

// On a cluster that does not serve Gateway API, a CR asking for an HTTPRoute gets
// everything else, no Ingress, and Exposed=False with a Warning Event saying what to do.
func TestHTTPRouteWithoutTheAPI(t *testing.T) {
	f := newFixture(t, newLLSD("app", exposedThrough("llama.example.com", "", v1alpha2.GatewayParentRef{Name: "gw"})))
	f.converge("app")
	for _, a := range f.gatewayclient.Actions() {
		t.Errorf("a Gateway API request without the API: %s", describe([]core.Action{a}))
	}
	assert.Nil(t, f.stored(kindIngress, "app-ingress"), "type HTTPRoute makes no Ingress")
	l := f.llsd("app")
	c := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionExposed)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha2.ReasonAPINotServed, c.Reason)
	assert.Equal(t, ptr.To(""), l.Status.RouteURL)
	assert.Contains(t, f.events(), "Warning APINotServed "+c.Message)
	require.NotNil(t, f.deployment("app"), "the rest is made as ever")
}

// With the API served: the route is applied as its builder makes it, then kept; the
// Gateway's acceptance shows in Exposed and routeURL; back to an Ingress, the route goes.
func TestHTTPRouteLifecycle(t *testing.T) {
	ref := v1alpha2.GatewayParentRef{Name: "gw", SectionName: "http"}
	l := newLLSD("app", exposedThrough("llama.example.com", "/llama", ref))
	f := newFixture(t, l)
	f.serveHTTPRoutes()
	actions := f.sync("app")
	var applied []core.Action
	for _, a := range actions {
		if a.GetResource().Resource == "httproutes" {
			applied = append(applied, a)
		}
	}
	checkWrites(t, applied, []expectedWrite{{verb: "patch", resource: "httproutes", name: "app-route", object: newHTTPRoute(l)}})
	f.converge("app")
	assert.Empty(t, mutating(f.sync("app")), "a converged sync writes nothing")
	assert.Nil(t, f.stored(kindIngress, "app-ingress"))
	c := meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionExposed)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionUnknown, c.Status)
	assert.Equal(t, v1alpha2.ReasonRoutePending, c.Reason)
	assert.Equal(t, ptr.To(""), f.llsd("app").Status.RouteURL)

	// The Gateway accepts the route.
	route, err := f.gatewayclient.GatewayV1().HTTPRoutes(testNamespace).Get(f.ctx, "app-route", metav1.GetOptions{})
	require.NoError(t, err)
	route.Status.Parents = []gatewayv1.RouteParentStatus{parentStatus(route.Spec.ParentRefs[0],
		routeCond(gatewayv1.RouteConditionAccepted, metav1.ConditionTrue, "Accepted", ""))}
	_, err = f.gatewayclient.GatewayV1().HTTPRoutes(testNamespace).UpdateStatus(f.ctx, route, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.refreshCaches()
	f.converge("app")
	st := f.llsd("app").Status
	c = meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionExposed)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
	assert.Equal(t, ptr.To("http://llama.example.com/llama"), st.RouteURL)
	assert.Empty(t, mutating(f.sync("app")))

	// Back to an Ingress: the route is deleted, the Ingress made, Exposed dropped.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking.Expose = &v1alpha2.ExposeSpec{Hostname: "llama.example.com"}
	})
	f.converge("app")
	_, err = f.gatewayclient.GatewayV1().HTTPRoutes(testNamespace).Get(f.ctx, "app-route", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the route is deleted: %v", err)
	assert.NotNil(t, f.stored(kindIngress, "app-ingress"))
	assert.Nil(t, meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionExposed))
}

// A route of that name that the CR does not control is never written: reported instead.
func TestHTTPRouteOfSomeoneElse(t *testing.T) {
	f := newFixture(t, newLLSD("app", exposedThrough("", "", v1alpha2.GatewayParentRef{Name: "gw"})))
	theirs := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "app-route", Namespace: testNamespace,
		Labels: map[string]string{llsd.LabelManagedBy: ManagedByValue}}}
	_, err := f.gatewayclient.GatewayV1().HTTPRoutes(testNamespace).Create(f.ctx, theirs, metav1.CreateOptions{})
	require.NoError(t, err)
	f.serveHTTPRoutes()
	for _, a := range mutating(f.sync("app")) {
		if a.GetResource().Resource != "httproutes" {
			continue
		}
		t.Errorf("a write of someone else's route: %s", describe([]core.Action{a}))
	}
	ready := meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, v1alpha2.ReasonResourceNotOwned, ready.Reason)
	assert.Contains(t, ready.Message, "HTTPRoute")
}
