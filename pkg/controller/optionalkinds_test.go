package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
)

// httpRouteCRD is the HTTPRoute CRD as the API server reports it once established,
// serving v1 when served is true.
func httpRouteCRD(served bool) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "httproutes.gateway.networking.k8s.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "gateway.networking.k8s.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "httproutes", Kind: "HTTPRoute"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: served, Storage: true}, {Name: "v1beta1", Served: true},
			},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
		}},
	}
}

// backendTLSPolicyCRD is Gateway API's BackendTLSPolicy CRD, established, serving v1.
func backendTLSPolicyCRD() *apiextensionsv1.CustomResourceDefinition {
	return establishedCRD(children.BackendTLSPolicyResource, "BackendTLSPolicy")
}

func TestServesVersion(t *testing.T) {
	assert.True(t, servesVersion(httpRouteCRD(true), "v1"))
	assert.False(t, servesVersion(httpRouteCRD(false), "v1"), "v1 not served")
	assert.False(t, servesVersion(nil, "v1"), "no CRD")
	notEstablished := httpRouteCRD(true)
	notEstablished.Status.Conditions[0].Status = apiextensionsv1.ConditionFalse
	assert.False(t, servesVersion(notEstablished, "v1"), "not established yet")
	deleting := httpRouteCRD(true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	assert.False(t, servesVersion(deleting, "v1"), "being deleted")
}

// The HTTPRoute kind follows its CRD while the controller runs: absent without it; once
// it is established, the kind's informer runs and fills its cache, and the CRs that
// ask for a route are synced; when v1 stops being served or the CRD goes, the informer
// stops and those CRs are synced again. The CRs that do not ask are never disturbed.
func TestHTTPRouteKindFollowsItsCRD(t *testing.T) {
	asks := newLLSD("asks", exposedThrough("", "", v1alpha2.GatewayParentRef{Name: "gw"}))
	f := newFixture(t, asks, newLLSD("plain"))
	f.crdclient = apiextensionsfake.NewClientset()
	f.newController()
	routes := f.routeKind()
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
	askedOnce := func(what string) {
		t.Helper()
		require.Eventually(t, func() bool { return f.c.queue.Len() > 0 }, 10*time.Second, 10*time.Millisecond, what)
		assert.Equal(t, []cache.ObjectName{{Namespace: testNamespace, Name: "asks"}}, f.queued(), what)
	}
	stateIs := func(want children.APIState, what string) {
		t.Helper()
		require.Eventually(t, func() bool { return routes.state() == want }, 10*time.Second, 10*time.Millisecond, what)
	}

	stateIs(children.APIAbsent, "no CRD")
	askedOnce("the CRs asking for a route hear that the API is not served")

	crds := f.crdclient.ApiextensionsV1().CustomResourceDefinitions()
	_, err := crds.Create(f.ctx, httpRouteCRD(true), metav1.CreateOptions{})
	require.NoError(t, err)
	stateIs(children.APIServed, "the CRD established")
	askedOnce("the CRs asking for a route are synced once the routes are cached")
	route := children.NewHTTPRoute(asks)
	_, err = f.gatewayclient.GatewayV1().HTTPRoutes(testNamespace).Create(f.ctx, route, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := fromOptionalCache[*gatewayv1.HTTPRoute](routes)(testNamespace, "asks-route")
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the running informer caches the routes")
	askedOnce("a change of the route syncs its CR")

	_, err = crds.Update(f.ctx, httpRouteCRD(false), metav1.UpdateOptions{})
	require.NoError(t, err)
	stateIs(children.APIAbsent, "v1 no longer served")
	assert.Nil(t, routes.cache(), "the informer is stopped")
	askedOnce("the CRs asking for a route hear the API went")

	_, err = crds.Update(f.ctx, httpRouteCRD(true), metav1.UpdateOptions{})
	require.NoError(t, err)
	stateIs(children.APIServed, "served again")
	askedOnce("served again")
	require.NoError(t, crds.Delete(f.ctx, "httproutes.gateway.networking.k8s.io", metav1.DeleteOptions{}))
	stateIs(children.APIAbsent, "the CRD deleted")
	askedOnce("the CRD deleted")

	cancel()
	<-done
	assert.Nil(t, routes.cache(), "stopped with the controller")
}

// Nothing waits for an optional kind: the controller's caches sync without the CRD
// watch, and until the CRD's list is in, the API is not known, so a CR asking for a
// route is neither given one nor told the API is missing.
func TestOptionalKindsNeverBlockStartUp(t *testing.T) {
	asks := newLLSD("app", exposedThrough("", "", v1alpha2.GatewayParentRef{Name: "gw"}))
	f := newFixture(t, asks)
	f.crdclient = apiextensionsfake.NewClientset()
	f.newController()
	routes := f.routeKind()
	assert.Equal(t, children.APIUnknown, routes.state(), "the CRD watch has not listed yet")
	assert.False(t, slices.ContainsFunc(f.c.childKinds, func(k children.Bound) bool { return k.Kind == "HTTPRoute" }),
		"the HTTPRoute informer is not one of the informers started with the others")
	f.sync("app")
	l := f.llsd("app")
	assert.Nil(t, findCondition(l, v1alpha2.ConditionExposed), "not known yet: nothing said")
	require.NotNil(t, f.deployment("app"), "the rest is made as ever")
}
