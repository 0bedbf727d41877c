package status

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
)

func TestExposedCondition(t *testing.T) {
	gw := gatewayv1.ParentReference{Name: "gw"}
	asks := newLLSD("app", exposedThrough("", "", v1alpha2.GatewayParentRef{Name: "gw"}))
	route := routeWithParents([]gatewayv1.ParentReference{gw}, parentStatus(gw, routeCond(gatewayv1.RouteConditionAccepted, metav1.ConditionTrue, "Accepted", "")))
	ingress := newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking = &v1alpha2.NetworkingSpec{Expose: &v1alpha2.ExposeSpec{}}
	})
	assert.Equal(t, dropped, exposedCondition(ingress, Observed{}), "an Ingress has no Exposed condition")
	assert.Equal(t, dropped, exposedCondition(newLLSD("app"), Observed{}))
	assert.Equal(t, keepAsIs, exposedCondition(asks, Observed{HTTPRouteAPI: children.APIUnknown}), "not known yet")
	assert.Equal(t, keepAsIs, exposedCondition(asks, Observed{HTTPRouteAPI: children.APIServed}), "served, but the route not seen (the sync stopped before)")
	absent := exposedCondition(asks, Observed{HTTPRouteAPI: children.APIAbsent})
	assert.Equal(t, metav1.ConditionFalse, absent.status)
	assert.Equal(t, v1alpha2.ReasonAPINotServed, absent.reason)
	assert.Contains(t, absent.message, "gateway.networking.k8s.io/v1")
	assert.Equal(t, setTo(metav1.ConditionTrue, v1alpha2.ReasonRouteAccepted, "HTTPRoute app-route is accepted by Gateway demo/gw"),
		exposedCondition(asks, Observed{HTTPRouteAPI: children.APIServed, HTTPRoute: route}))
}

// An HTTPRoute to a server that serves TLS, on a cluster without the BackendTLSPolicy
// API, is not exposed: the Gateway would speak HTTP to the HTTPS port. No routeURL is
// reported however the Gateway answers. The sync looks at the API only for a server
// that serves TLS (APIUnknown otherwise), and the HTTPRoute API missing comes first.
func TestExposedConditionOfATLSServer(t *testing.T) {
	gw := gatewayv1.ParentReference{Name: "gw"}
	asks := newLLSD("app", exposedThrough("llama.example.com", "", v1alpha2.GatewayParentRef{Name: "gw"}))
	route := routeWithParents([]gatewayv1.ParentReference{gw}, parentStatus(gw, routeCond(gatewayv1.RouteConditionAccepted, metav1.ConditionTrue, "Accepted", "")))

	noPolicy := Observed{HTTPRouteAPI: children.APIServed, HTTPRoute: route, BackendTLSPolicyAPI: children.APIAbsent}
	c := exposedCondition(asks, noPolicy)
	assert.Equal(t, metav1.ConditionFalse, c.status)
	assert.Equal(t, v1alpha2.ReasonBackendTLSNotServed, c.reason)
	assert.Contains(t, c.message, "gateway.networking.k8s.io/v1 BackendTLSPolicy")
	assert.Contains(t, c.message, "plain HTTP to the server's HTTPS port")
	assert.Contains(t, c.message, "v1.4 or later")
	assert.Equal(t, "", *routeURL(asks, noPolicy))

	assert.Equal(t, v1alpha2.ReasonAPINotServed,
		exposedCondition(asks, Observed{HTTPRouteAPI: children.APIAbsent, BackendTLSPolicyAPI: children.APIAbsent}).reason)
	for _, api := range []children.APIState{children.APIServed, children.APIUnknown} {
		obs := Observed{HTTPRouteAPI: children.APIServed, HTTPRoute: route, BackendTLSPolicyAPI: api}
		assert.Equal(t, v1alpha2.ReasonRouteAccepted, exposedCondition(asks, obs).reason)
		assert.Equal(t, "http://llama.example.com", *routeURL(asks, obs))
	}
}

// An HTTPRoute none of whose Gateways exists is Exposed=False, GatewayNotFound, naming
// them, without a routeURL (even when a deleted Gateway's acceptance is still in the
// route's status); one Gateway found, or the sync unable to tell (no Gateway API,
// another namespace unwatched: ParentGateways nil), leaves the route's own report.
func TestExposedConditionWithoutItsGateway(t *testing.T) {
	gw := gatewayv1.ParentReference{Name: "gw"}
	accepted := routeWithParents([]gatewayv1.ParentReference{gw}, parentStatus(gw, routeCond(gatewayv1.RouteConditionAccepted, metav1.ConditionTrue, "Accepted", "")))
	pending := routeWithParents([]gatewayv1.ParentReference{gw})
	asks := newLLSD("app", exposedThrough("llama.example.com", "", v1alpha2.GatewayParentRef{Name: "gw"}))
	parent := func(ns, name string, found bool) children.ParentGateway {
		return children.ParentGateway{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Found: found}
	}
	tests := map[string]struct {
		obs        Observed
		wantStatus metav1.ConditionStatus
		wantReason string
		wantURL    string
		message    string
	}{
		"the one Gateway missing, the route pending": {
			obs:        Observed{HTTPRouteAPI: children.APIServed, HTTPRoute: pending, ParentGateways: []children.ParentGateway{parent("demo", "gw", false)}},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha2.ReasonGatewayNotFound,
			message: "HTTPRoute app-route attaches to no Gateway: Gateway demo/gw does not exist. Create the Gateway, " +
				"or name an existing one in spec.networking.expose.httpRoute.parentRefs",
		},
		"the Gateway gone after it accepted the route": {
			obs:        Observed{HTTPRouteAPI: children.APIServed, HTTPRoute: accepted, ParentGateways: []children.ParentGateway{parent("demo", "gw", false)}},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha2.ReasonGatewayNotFound,
		},
		"not written yet (the route not seen)": {
			obs:        Observed{HTTPRouteAPI: children.APIServed, ParentGateways: []children.ParentGateway{parent("demo", "gw", false)}},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha2.ReasonGatewayNotFound,
		},
		"two Gateways, both missing": {
			obs: Observed{HTTPRouteAPI: children.APIServed, HTTPRoute: pending,
				ParentGateways: []children.ParentGateway{parent("demo", "gw", false), parent("infra", "shared", false)}},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha2.ReasonGatewayNotFound,
			message: "HTTPRoute app-route attaches to no Gateway: none of its Gateways exists (demo/gw, infra/shared). " +
				"Create the Gateway, or name an existing one in spec.networking.expose.httpRoute.parentRefs",
		},
		"one of two found: the route's own report": {
			obs: Observed{HTTPRouteAPI: children.APIServed, HTTPRoute: accepted,
				ParentGateways: []children.ParentGateway{parent("demo", "gw", true), parent("infra", "shared", false)}},
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha2.ReasonRouteAccepted, wantURL: "http://llama.example.com",
		},
		"found": {
			obs:        Observed{HTTPRouteAPI: children.APIServed, HTTPRoute: pending, ParentGateways: []children.ParentGateway{parent("demo", "gw", true)}},
			wantStatus: metav1.ConditionUnknown, wantReason: v1alpha2.ReasonRoutePending,
		},
		"cannot tell": {
			obs:        Observed{HTTPRouteAPI: children.APIServed, HTTPRoute: accepted},
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha2.ReasonRouteAccepted, wantURL: "http://llama.example.com",
		},
		"no HTTPRoute API comes first": {
			obs:        Observed{HTTPRouteAPI: children.APIAbsent, ParentGateways: []children.ParentGateway{parent("demo", "gw", false)}},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha2.ReasonAPINotServed,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := exposedCondition(asks, tc.obs)
			assert.Equal(t, tc.wantStatus, c.status)
			assert.Equal(t, tc.wantReason, c.reason)
			if tc.message != "" {
				assert.Equal(t, tc.message, c.message)
			}
			assert.Equal(t, tc.wantURL, *routeURL(asks, tc.obs))
		})
	}
}
