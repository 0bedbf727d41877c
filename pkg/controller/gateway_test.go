package controller

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
)

func listener(name, hostname string, port int32, protocol gatewayv1.ProtocolType) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: gatewayv1.PortNumber(port), Protocol: protocol}
	if hostname != "" {
		l.Hostname = ptr.To(gatewayv1.Hostname(hostname))
	}
	return l
}

func gatewayWith(ns, name string, listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gatewayv1.GatewaySpec{Listeners: listeners}}
}

// gatewayCRD is Gateway API's Gateway CRD, established.
func gatewayCRD() *apiextensionsv1.CustomResourceDefinition {
	return establishedCRD(gatewayResource, "Gateway")
}

// The Gateway's HTTPS listener makes routeURL https, once the Gateway accepts the
// route; the Gateway is only read.
func TestHTTPRouteURLFollowsTheGatewayListener(t *testing.T) {
	ref := v1alpha2.GatewayParentRef{Name: "gw"}
	f := newFixture(t, newLLSD("app", exposedThrough("llama.example.com", "", ref)))
	f.gateways = []*gatewayv1.Gateway{gatewayWith(testNamespace, "gw", listener("https", "llama.example.com", 8443, gatewayv1.HTTPSProtocolType))}
	f.serveHTTPRoutes()
	f.converge("app")
	route, err := f.gatewayclient.GatewayV1().HTTPRoutes(testNamespace).Get(f.ctx, "app-route", metav1.GetOptions{})
	require.NoError(t, err)
	route.Status.Parents = []gatewayv1.RouteParentStatus{parentStatus(route.Spec.ParentRefs[0],
		routeCond(gatewayv1.RouteConditionAccepted, metav1.ConditionTrue, "Accepted", ""))}
	_, err = f.gatewayclient.GatewayV1().HTTPRoutes(testNamespace).UpdateStatus(f.ctx, route, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.refreshCaches()
	f.converge("app")
	assert.Equal(t, "https://llama.example.com:8443", ptr.Deref(f.llsd("app").Status.RouteURL, "<nil>"))
	for _, a := range f.gatewayclient.Actions() {
		if a.GetResource().Resource == "gateways" {
			assert.Contains(t, []string{"list", "watch"}, a.GetVerb(), "a Gateway is only read")
		}
	}
}

func TestTransformGatewayKeepsTheListeners(t *testing.T) {
	g := gatewayWith(testNamespace, "gw", listener("https", "llama.example.com", 443, gatewayv1.HTTPSProtocolType))
	g.Generation, g.ResourceVersion = 3, "42"
	g.Annotations = map[string]string{"big": "annotation"}
	g.Spec.Listeners[0].TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "cert"}}}
	g.Status.Listeners = []gatewayv1.ListenerStatus{{Name: "https", AttachedRoutes: 7}}
	out, err := TransformGateway(g)
	require.NoError(t, err)
	kept := out.(*gatewayv1.Gateway)
	assert.Equal(t, int64(3), kept.Generation)
	assert.Equal(t, "42", kept.ResourceVersion)
	assert.Nil(t, kept.Annotations)
	assert.Empty(t, kept.Status.Listeners)
	assert.Equal(t, []gatewayv1.Listener{listener("https", "llama.example.com", 443, gatewayv1.HTTPSProtocolType)}, kept.Spec.Listeners)
}

// An HTTPRoute whose Gateway does not exist is Exposed=False, GatewayNotFound, with one
// Warning Event; the Gateway's arrival syncs the CRs that ask for an HTTPRoute, and the
// condition follows: Pending until the Gateway reports on the route.
func TestHTTPRouteWaitsForItsGateway(t *testing.T) {
	other := newLLSD("plain")
	f := newFixture(t, newLLSD("app", exposedThrough("llama.example.com", "", v1alpha2.GatewayParentRef{Name: "gw", Namespace: "infra"})), other)
	f.serveHTTPRoutes()
	f.converge("app")
	l := f.llsd("app")
	c := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionExposed)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha2.ReasonGatewayNotFound, c.Reason)
	assert.Equal(t, "HTTPRoute app-route attaches to no Gateway: Gateway infra/gw does not exist. Create the Gateway, "+
		"or name an existing one in spec.networking.expose.httpRoute.parentRefs", c.Message)
	assert.Equal(t, ptr.To(""), l.Status.RouteURL)
	assert.Contains(t, f.events(), "Warning GatewayNotFound "+c.Message)
	_, err := f.gatewayclient.GatewayV1().HTTPRoutes(testNamespace).Get(f.ctx, "app-route", metav1.GetOptions{})
	require.NoError(t, err, "the route is made all the same")
	assert.Empty(t, mutating(f.sync("app")), "a converged sync writes nothing")

	// The Gateway comes: its handler syncs the CRs that ask for an HTTPRoute.
	gw := gatewayWith("infra", "gw", listener("http", "", 80, gatewayv1.HTTPProtocolType))
	f.gateways = append(f.gateways, gw)
	f.refreshCaches()
	f.queued()
	f.optionalKind("Gateway").handler.OnAdd(gw, false)
	assert.Equal(t, []cache.ObjectName{{Namespace: testNamespace, Name: "app"}}, f.queued())
	f.converge("app")
	c = meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionExposed)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionUnknown, c.Status)
	assert.Equal(t, v1alpha2.ReasonRoutePending, c.Reason)

	// It goes: GatewayNotFound again.
	f.gateways = nil
	f.refreshCaches()
	f.converge("app")
	assert.Equal(t, v1alpha2.ReasonGatewayNotFound, meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionExposed).Reason)
}

// With NetworkPolicies on, the policy of a CR exposed through an HTTPRoute admits the
// namespace of its Gateway, whether or not the Gateway exists yet; off, there is no policy.
func TestNetworkPolicyOfAnHTTPRoute(t *testing.T) {
	l := newLLSD("app", exposedThrough("llama.example.com", "", v1alpha2.GatewayParentRef{Name: "gw", Namespace: "infra"}))
	f := newFixture(t, l, operatorConfigMap(map[string]string{"featureFlags": featureFlagsOn}))
	f.serveHTTPRoutes()
	f.converge("app")
	admitted := false
	for _, p := range f.networkPolicy("app-network-policy").Spec.Ingress[0].From {
		if p.NamespaceSelector != nil && p.NamespaceSelector.MatchLabels[corev1.LabelMetadataName] == "infra" {
			admitted = true
		}
	}
	assert.True(t, admitted, "the Gateway's namespace is admitted to the API port")

	f.setOperatorConfig(map[string]string{"featureFlags": featureFlagsOff})
	f.converge("app")
	assert.Nil(t, f.stored(kindNetworkPolicy, "app-network-policy"), "NetworkPolicies off: none")
}

// The controller tells a missing Gateway only where it would see one: not in a
// namespace it does not watch, nor before the Gateway API is served.
func TestParentGatewaysOnlyWhereTheControllerLooks(t *testing.T) {
	l := newLLSD("app", exposedThrough("", "", v1alpha2.GatewayParentRef{Name: "gw"}, v1alpha2.GatewayParentRef{Name: "shared", Namespace: "infra"}))
	f := newFixture(t, l)
	gateways := f.optionalKind("Gateway")
	assert.Nil(t, lookUpParentGateways(l, gateways, ""), "the Gateway API not served")
	f.gateways = []*gatewayv1.Gateway{gatewayWith(testNamespace, "gw")}
	f.serveHTTPRoutes()
	assert.Equal(t, []string{"demo/gw true", "infra/shared false"}, describeParents(lookUpParentGateways(l, gateways, "")))
	assert.Nil(t, lookUpParentGateways(l, gateways, testNamespace), "infra is not watched")
	assert.Nil(t, lookUpParentGateways(newLLSD("plain"), gateways, ""), "no HTTPRoute")
}

func describeParents(parents []children.ParentGateway) []string {
	var out []string
	for _, p := range parents {
		out = append(out, fmt.Sprintf("%s %t", p.NamespacedName, p.Found))
	}
	return out
}
