package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
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
