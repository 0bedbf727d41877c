package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
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

// routeCRD is OpenShift's Route CRD, established.
func routeCRD() *apiextensionsv1.CustomResourceDefinition {
	return establishedCRD(children.RouteResource, children.RouteKind)
}

func admittedBy(router, host, status, reason, message string) map[string]any {
	return map[string]any{"host": host, "routerName": router, "conditions": []any{
		map[string]any{"type": "Admitted", "status": status, "reason": reason, "message": message},
	}}
}

// storedRoute reads the CR's Route from the fake API; nil when there is none.
func (f *fixture) storedRoute(name string) *unstructured.Unstructured {
	return f.storedUnstructured(children.RouteResource, name)
}

// routeActions are the requests of actions to the Route API.
func routeActions(actions []core.Action) []core.Action {
	return actionsOn(children.RouteResource, actions)
}

// On a cluster that is not OpenShift, a CR asking for a Route gets everything else, no
// Ingress, and Exposed=False with a Warning Event saying what to do.
func TestRouteWithoutTheAPI(t *testing.T) {
	f := newFixture(t, newLLSD("app", exposedAsRoute("llama.apps.example.com", nil)))
	f.converge("app")
	for _, a := range routeActions(f.dynamicclient.Actions()) {
		t.Errorf("a Route request without the API: %s", describe([]core.Action{a}))
	}
	assert.Nil(t, f.stored(kindIngress, "app-ingress"), "type Route makes no Ingress")
	l := f.llsd("app")
	c := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionExposed)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha2.ReasonAPINotServed, c.Reason)
	assert.Contains(t, c.Message, "route.openshift.io/v1")
	assert.Equal(t, ptr.To(""), l.Status.RouteURL)
	assert.Contains(t, f.events(), "Warning APINotServed "+c.Message)
	require.NotNil(t, f.deployment("app"), "the rest is made as ever")
}

// With the API served: the Route is applied as its builder makes it, then kept; the
// router's admission shows in Exposed and routeURL; back to an Ingress, the Route goes.
func TestRouteLifecycle(t *testing.T) {
	f := newFixture(t, newLLSD("app", exposedAsRoute("", nil)))
	f.serveOpenShiftRoutes()
	applied := routeActions(mutating(f.sync("app")))
	require.Len(t, applied, 1, "%s", describe(applied))
	stored := f.storedRoute("app-route")
	require.NotNil(t, stored)
	assertControlledChild(t, stored, f.llsd("app"))
	assert.Equal(t, children.NewRoute(f.llsd("app"), children.Listening{}, nil).Object["spec"], stored.Object["spec"])
	f.converge("app")
	assert.Empty(t, mutating(f.sync("app")), "a converged sync writes nothing")
	c := meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionExposed)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionUnknown, c.Status)
	assert.Equal(t, v1alpha2.ReasonRoutePending, c.Reason)
	assert.Equal(t, ptr.To(""), f.llsd("app").Status.RouteURL)

	// The router admits it, with the host it picked.
	require.NoError(t, unstructured.SetNestedSlice(stored.Object, []any{admittedBy("default", "app-demo.apps.example.com", "True", "", "")}, "status", "ingress"))
	_, err := f.dynamicclient.Resource(children.RouteResource).Namespace(testNamespace).UpdateStatus(f.ctx, stored, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.refreshCaches()
	f.converge("app")
	st := f.llsd("app").Status
	c = meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionExposed)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
	assert.Equal(t, ptr.To("https://app-demo.apps.example.com"), st.RouteURL)
	assert.Empty(t, mutating(f.sync("app")))

	// Back to an Ingress: the Route is deleted, the Ingress made, Exposed dropped.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking.Expose = &v1alpha2.ExposeSpec{Hostname: "llama.example.com"}
	})
	f.converge("app")
	assert.Nil(t, f.storedRoute("app-route"), "the Route is deleted")
	assert.NotNil(t, f.stored(kindIngress, "app-ingress"))
	assert.Nil(t, meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionExposed))
}

// A server that serves TLS is reached through a reencrypting Route that trusts the CA
// of its certificate's Secret; a renewed CA reaches the Route.
func TestRouteReencryptsToATLSServer(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	f := newFixture(t, newLLSD("app", withServerTLS("cert"), exposedAsRoute("", nil)), serving.secret("cert"))
	f.serveOpenShiftRoutes()
	f.converge("app")
	stored := f.storedRoute("app-route")
	require.NotNil(t, stored)
	tls, _, _ := unstructured.NestedStringMap(stored.Object, "spec", "tls")
	assert.Equal(t, "reencrypt", tls["termination"])
	assert.Equal(t, string(serving.ca), tls["destinationCACertificate"])
	target, _, _ := unstructured.NestedString(stored.Object, "spec", "port", "targetPort")
	assert.Equal(t, "https", target)
}

// A Route of that name that the CR does not control is never written: reported instead.
func TestRouteOfSomeoneElse(t *testing.T) {
	theirs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "route.openshift.io/v1", "kind": "Route",
		"metadata": map[string]any{"name": "app-route", "namespace": testNamespace,
			"labels": map[string]any{llsd.LabelManagedBy: ManagedByValue}},
		"spec": map[string]any{"to": map[string]any{"kind": "Service", "name": "other"}},
	}}
	f := newFixture(t, newLLSD("app", exposedAsRoute("", nil)))
	_, err := f.dynamicclient.Resource(children.RouteResource).Namespace(testNamespace).Create(f.ctx, theirs, metav1.CreateOptions{})
	require.NoError(t, err)
	f.serveOpenShiftRoutes()
	for _, a := range routeActions(mutating(f.sync("app"))) {
		t.Errorf("a write of someone else's Route: %s", describe([]core.Action{a}))
	}
	ready := meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, v1alpha2.ReasonResourceNotOwned, ready.Reason)
	assert.Contains(t, ready.Message, "Route")
	to, _, _ := unstructured.NestedString(f.storedRoute("app-route").Object, "spec", "to", "name")
	assert.Equal(t, "other", to, "theirs is untouched")
}

// On OpenShift, Routes are served by OpenShift's own API server, not a CRD: when
// discovery found route.openshift.io/v1 at start and no Route CRD exists, the kind is
// served as soon as its informer has synced, and stays so; a Route CRD (MicroShift's)
// is followed as any optional kind's.
func TestRouteKindServedByAnAggregatedAPI(t *testing.T) {
	for name, tc := range map[string]struct {
		discovered bool
		crd        bool
		want       children.APIState
	}{
		"discovered, no CRD: OpenShift's API server": {discovered: true, want: children.APIServed},
		"discovered with a CRD (MicroShift)":         {discovered: true, crd: true, want: children.APIServed},
		"not discovered, no CRD":                     {want: children.APIAbsent},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, newLLSD("asks", exposedAsRoute("", nil)))
			f.crdclient = apiextensionsfake.NewClientset()
			if tc.crd {
				f.crdclient = apiextensionsfake.NewClientset(routeCRD())
			}
			f.newController()
			routes := f.optionalKind(children.RouteKind)
			routes.discovered = tc.discovered
			ctx, cancel := context.WithCancel(f.ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				routes.run(ctx)
			}()
			defer func() {
				cancel()
				<-done
			}()
			require.Eventually(t, func() bool { return routes.state() == tc.want }, 10*time.Second, 10*time.Millisecond)
			require.Eventually(t, func() bool { return f.c.queue.Len() > 0 }, 10*time.Second, 10*time.Millisecond,
				"the CR asking for a Route hears what is known")
			if tc.crd {
				require.NoError(t, f.crdclient.ApiextensionsV1().CustomResourceDefinitions().Delete(f.ctx, routeCRD().Name, metav1.DeleteOptions{}))
				require.Eventually(t, func() bool { return routes.state() == children.APIAbsent }, 10*time.Second, 10*time.Millisecond,
					"a CRD that goes takes the kind with it")
			}
		})
	}
}
