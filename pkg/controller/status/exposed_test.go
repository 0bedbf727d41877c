package status

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
