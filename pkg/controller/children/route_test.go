package children

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// exposedAsRoute exposes a CR through an OpenShift Route for hostname ("" lets the
// router pick one).
func exposedAsRoute(hostname string, route *v1alpha2.RouteSpec) func(*v1alpha2.LlamaStackDistribution) {
	return func(l *v1alpha2.LlamaStackDistribution) {
		if l.Spec.Networking == nil {
			l.Spec.Networking = &v1alpha2.NetworkingSpec{}
		}
		l.Spec.Networking.Expose = &v1alpha2.ExposeSpec{Type: v1alpha2.ExposeRoute, Hostname: hostname, Route: route}
	}
}

func TestNewRoute(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	tlsOn := func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking = &v1alpha2.NetworkingSpec{TLS: &v1alpha2.TLSSpec{Enabled: true, SecretName: "cert"}}
	}
	for name, tc := range map[string]struct {
		mods     []func(*v1alpha2.LlamaStackDistribution)
		serverCA []byte
		wantSpec map[string]any
	}{
		"plain server, the router's host: edge, redirected": {
			mods: []func(*v1alpha2.LlamaStackDistribution){exposedAsRoute("", nil)},
			wantSpec: map[string]any{
				"to":   map[string]any{"kind": "Service", "name": "app-service", "weight": int64(100)},
				"port": map[string]any{"targetPort": "http"},
				"tls":  map[string]any{"termination": "edge", "insecureEdgeTerminationPolicy": "Redirect"},
			},
		},
		"a host, plain HTTP allowed": {
			mods: []func(*v1alpha2.LlamaStackDistribution){exposedAsRoute("llama.apps.example.com",
				&v1alpha2.RouteSpec{InsecureEdgeTerminationPolicy: "Allow"})},
			wantSpec: map[string]any{
				"host": "llama.apps.example.com",
				"to":   map[string]any{"kind": "Service", "name": "app-service", "weight": int64(100)},
				"port": map[string]any{"targetPort": "http"},
				"tls":  map[string]any{"termination": "edge", "insecureEdgeTerminationPolicy": "Allow"},
			},
		},
		"TLS server: reencrypt to the https port, trusting the Secret's CA": {
			mods:     []func(*v1alpha2.LlamaStackDistribution){tlsOn, exposedAsRoute("", nil)},
			serverCA: ca,
			wantSpec: map[string]any{
				"to":   map[string]any{"kind": "Service", "name": "app-service", "weight": int64(100)},
				"port": map[string]any{"targetPort": "https"},
				"tls": map[string]any{"termination": "reencrypt", "insecureEdgeTerminationPolicy": "Redirect",
					"destinationCACertificate": string(ca)},
			},
		},
		"TLS server without ca.crt: the router's service CA": {
			mods: []func(*v1alpha2.LlamaStackDistribution){tlsOn, exposedAsRoute("", nil)},
			wantSpec: map[string]any{
				"to":   map[string]any{"kind": "Service", "name": "app-service", "weight": int64(100)},
				"port": map[string]any{"targetPort": "https"},
				"tls":  map[string]any{"termination": "reencrypt", "insecureEdgeTerminationPolicy": "Redirect"},
			},
		},
		"passthrough: the server's certificate, no CA": {
			mods: []func(*v1alpha2.LlamaStackDistribution){tlsOn, exposedAsRoute("", &v1alpha2.RouteSpec{
				Termination: v1alpha2.RouteTerminationPassthrough, InsecureEdgeTerminationPolicy: "None"})},
			serverCA: ca,
			wantSpec: map[string]any{
				"to":   map[string]any{"kind": "Service", "name": "app-service", "weight": int64(100)},
				"port": map[string]any{"targetPort": "https"},
				"tls":  map[string]any{"termination": "passthrough", "insecureEdgeTerminationPolicy": "None"},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := newLLSD("app", tc.mods...)
			before := l.DeepCopy()
			route := NewRoute(l, AskedListening(l, ""), tc.serverCA)
			assert.Equal(t, before, l, "the builder does not change the CR")
			assert.Equal(t, "route.openshift.io/v1", route.GetAPIVersion())
			assert.Equal(t, "Route", route.GetKind())
			assert.Equal(t, "app-route", route.GetName())
			assert.Equal(t, llsd.ChildLabels(l), route.GetLabels())
			assertControlledChild(t, route, l)
			assert.Equal(t, tc.wantSpec, route.Object["spec"])
		})
	}
	annotated := newLLSD("app", exposedAsRoute("", nil), func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking.Expose.Annotations = map[string]string{"haproxy.router.openshift.io/timeout": "5m"}
	})
	assert.Equal(t, map[string]string{"haproxy.router.openshift.io/timeout": "5m"}, NewRoute(annotated, Listening{}, nil).GetAnnotations())
}

// routeWithIngress is a Route as the routers report on it.
func routeWithIngress(ingress ...map[string]any) *unstructured.Unstructured {
	list := make([]any, len(ingress))
	for i, in := range ingress {
		list[i] = in
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "app-route"},
		"status":   map[string]any{"ingress": list},
	}}
}

func admittedBy(router, host, status, reason, message string) map[string]any {
	return map[string]any{"host": host, "routerName": router, "conditions": []any{
		map[string]any{"type": "Admitted", "status": status, "reason": reason, "message": message},
	}}
}

func TestRouteAdmission(t *testing.T) {
	for name, tc := range map[string]struct {
		route      *unstructured.Unstructured
		status     metav1.ConditionStatus
		reason     string
		messageHas string
		url        string
	}{
		"no router has reported": {route: routeWithIngress(), status: metav1.ConditionUnknown,
			reason: v1alpha2.ReasonRoutePending, messageHas: "waiting for a router"},
		"a report without a condition": {route: routeWithIngress(map[string]any{"host": "h", "routerName": "default"}),
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonRoutePending},
		"admitted": {route: routeWithIngress(admittedBy("default", "app.apps.example.com", "True", "", "")),
			status: metav1.ConditionTrue, reason: v1alpha2.ReasonRouteAccepted,
			messageHas: "admitted by router default for host app.apps.example.com", url: "https://app.apps.example.com"},
		"refused": {route: routeWithIngress(admittedBy("default", "taken.example.com", "False", "HostAlreadyClaimed", "a route in another namespace holds the host")),
			status: metav1.ConditionFalse, reason: v1alpha2.ReasonRouteNotAccepted,
			messageHas: "not admitted by router default, HostAlreadyClaimed: a route in another namespace holds the host"},
		"refused by one shard, admitted by another": {route: routeWithIngress(
			admittedBy("internal", "h.example.com", "False", "RouteNotAdmitted", "no"),
			admittedBy("default", "h.example.com", "True", "", "")),
			status: metav1.ConditionTrue, reason: v1alpha2.ReasonRouteAccepted, url: "https://h.example.com"},
		"a status not as the API writes it": {route: &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "app-route"}, "status": map[string]any{"ingress": []any{"junk", map[string]any{"conditions": []any{int64(7)}}}}}},
			status: metav1.ConditionUnknown, reason: v1alpha2.ReasonRoutePending},
	} {
		t.Run(name, func(t *testing.T) {
			status, reason, message := RouteAdmission(tc.route)
			assert.Equal(t, tc.status, status)
			assert.Equal(t, tc.reason, reason)
			assert.Contains(t, message, tc.messageHas)
			assert.Equal(t, tc.url, RouteHostURL(tc.route))
		})
	}
	assert.Empty(t, RouteHostURL(nil))
}
