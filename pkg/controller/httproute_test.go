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
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
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

func parentStatus(ref gatewayv1.ParentReference, conds ...metav1.Condition) gatewayv1.RouteParentStatus {
	return gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: "example.com/gateway", Conditions: conds}
}

func routeCond(condType gatewayv1.RouteConditionType, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: string(condType), Status: status, Reason: reason, Message: message}
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
	f.gateways = []*gatewayv1.Gateway{gatewayWith(testNamespace, "gw")}
	f.serveHTTPRoutes()
	actions := f.sync("app")
	var applied []core.Action
	for _, a := range actions {
		if a.GetResource().Resource == "httproutes" {
			applied = append(applied, a)
		}
	}
	checkWrites(t, applied, []expectedWrite{{verb: "patch", resource: "httproutes", name: "app-route", object: children.NewHTTPRoute(l)}})
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
