package children

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
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

func TestHTTPRouteEndpoint(t *testing.T) {
	accepted := routeCond(gatewayv1.RouteConditionAccepted, metav1.ConditionTrue, "Accepted", "")
	refused := routeCond(gatewayv1.RouteConditionAccepted, metav1.ConditionFalse, "NotAllowedByListeners", "")
	gw := gatewayv1.ParentReference{Name: "gw"}
	onHTTPS := gatewayv1.ParentReference{Name: "gw", SectionName: ptr.To(gatewayv1.SectionName("https"))}
	other := gatewayv1.ParentReference{Name: "edge", Namespace: ptr.To(gatewayv1.Namespace("infra"))}
	both := gatewayWith(testNamespace, "gw", listener("http", "", 80, gatewayv1.HTTPProtocolType), listener("https", "", 443, gatewayv1.HTTPSProtocolType))
	gateways := map[string]*gatewayv1.Gateway{
		testNamespace + "/gw": both,
		"infra/edge":          gatewayWith("infra", "edge", listener("alt", "", 8080, gatewayv1.HTTPProtocolType)),
		testNamespace + "/hosts": gatewayWith(testNamespace, "hosts",
			listener("other", "other.example.com", 443, gatewayv1.HTTPSProtocolType),
			listener("wild", "*.example.com", 8443, gatewayv1.HTTPSProtocolType),
			listener("tcp", "", 9000, gatewayv1.TCPProtocolType)),
	}
	lookup := func(ns, name string) *gatewayv1.Gateway { return gateways[ns+"/"+name] }
	withHost := func(r *gatewayv1.HTTPRoute, host string) *gatewayv1.HTTPRoute {
		r.Spec.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(host)}
		return r
	}
	hosts := gatewayv1.ParentReference{Name: "hosts"}
	for name, tc := range map[string]struct {
		route *gatewayv1.HTTPRoute
		want  RouteEndpoint
	}{
		"HTTPS beside HTTP: HTTPS":  {route: routeWithParents([]gatewayv1.ParentReference{gw}, parentStatus(gw, accepted)), want: RouteEndpoint{"https", 443}},
		"the listener it names":     {route: routeWithParents([]gatewayv1.ParentReference{onHTTPS}, parentStatus(onHTTPS, accepted)), want: RouteEndpoint{"https", 443}},
		"not accepted: not known":   {route: routeWithParents([]gatewayv1.ParentReference{gw}, parentStatus(gw, refused)), want: RouteEndpoint{Scheme: "http"}},
		"not reported: not known":   {route: routeWithParents([]gatewayv1.ParentReference{gw}), want: RouteEndpoint{Scheme: "http"}},
		"a Gateway not seen":        {route: routeWithParents([]gatewayv1.ParentReference{{Name: "gone"}}, parentStatus(gatewayv1.ParentReference{Name: "gone"}, accepted)), want: RouteEndpoint{Scheme: "http"}},
		"another namespace, a port": {route: routeWithParents([]gatewayv1.ParentReference{other}, parentStatus(other, accepted)), want: RouteEndpoint{"http", 8080}},
		"the first that accepted": {route: routeWithParents([]gatewayv1.ParentReference{gw, other}, parentStatus(gw, refused), parentStatus(other, accepted)),
			want: RouteEndpoint{"http", 8080}},
		"the wildcard listener of its host": {route: withHost(routeWithParents([]gatewayv1.ParentReference{hosts}, parentStatus(hosts, accepted)), "llama.example.com"),
			want: RouteEndpoint{"https", 8443}},
		"no listener of its host": {route: withHost(routeWithParents([]gatewayv1.ParentReference{hosts}, parentStatus(hosts, accepted)), "llama.example.org"),
			want: RouteEndpoint{Scheme: "http"}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, HTTPRouteEndpoint(tc.route, lookup))
		})
	}
	assert.Equal(t, RouteEndpoint{Scheme: "http"}, HTTPRouteEndpoint(nil, lookup))
}

func TestRouteEndpointURL(t *testing.T) {
	assert.Equal(t, "https://llama.example.com/v1", RouteEndpoint{"https", 443}.URL("llama.example.com", "/v1"))
	assert.Equal(t, "http://llama.example.com", RouteEndpoint{"http", 80}.URL("llama.example.com", ""))
	assert.Equal(t, "http://llama.example.com", RouteEndpoint{Scheme: "http"}.URL("llama.example.com", ""))
	assert.Equal(t, "https://llama.example.com:8443", RouteEndpoint{"https", 8443}.URL("llama.example.com", ""))
	assert.Equal(t, "http://llama.example.com:443", RouteEndpoint{"http", 443}.URL("llama.example.com", ""))
}
