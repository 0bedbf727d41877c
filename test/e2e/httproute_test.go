//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

const (
	httpRouteCRDName = "httproutes.gateway.networking.k8s.io"
	gatewayCRDName   = "gateways.gateway.networking.k8s.io"
)

// gatewayAPIFile is a CRD file of Gateway API's standard channel, from the module the
// controller is built with (never from the network).
func gatewayAPIFile(t *testing.T, name string) string {
	t.Helper()
	path, err := localcluster.GatewayAPICRD(context.Background(), env.root, name)
	require.NoError(t, err)
	return path
}

// routedCR is a v1alpha2 CR exposed through an HTTPRoute attached to the listener
// "web" of the Gateway "gw" in its namespace.
func routedCR(ns, name string) *v1alpha2.LlamaStackDistribution {
	return &v1alpha2.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha2.LlamaStackDistributionSpec{
			Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Networking: &v1alpha2.NetworkingSpec{Expose: &v1alpha2.ExposeSpec{
				Type: v1alpha2.ExposeHTTPRoute, Hostname: name + ".example.com",
				HTTPRoute: &v1alpha2.HTTPRouteSpec{ParentRefs: []v1alpha2.GatewayParentRef{{Name: "gw", SectionName: "web"}}},
			}},
		},
	}
}

// Gateway API is an optional kind. Without its CRD (the suite starts without it, and
// the controller started without waiting for it), a CR asking for an HTTPRoute gets
// everything else and Exposed=False. Once the CRD is installed the controller finds it
// without a restart: the route appears, owned by the CR, Exposed follows the Gateway's
// acceptance and routeURL its hostname, and the route goes with the CR. When the CRD
// goes, the CRs still asking say so again, and keep serving.
func TestHTTPRouteFollowsTheGatewayAPI(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gw, err := gatewayclient.NewForConfig(env.cfg)
	require.NoError(t, err)
	for _, name := range []string{"routed", "kept"} {
		_, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, routedCR(ns, name), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, name := range []string{"routed", "kept"} {
		waitReady(t, ns, name)
		waitCondition(t, ns, name, v1alpha2.ConditionExposed, metav1.ConditionFalse, v1alpha2.ReasonAPINotServed)
	}
	_, err = env.kube.NetworkingV1().Ingresses(ns).Get(ctx, "routed-ingress", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "type HTTPRoute makes no Ingress: %v", err)

	// The CRDs appear, and the Gateway: its listener "web" serves HTTPS on 8443.
	kubectl(t, "apply", "--server-side", "-f", gatewayAPIFile(t, "gateway.networking.k8s.io_gateways.yaml"))
	t.Cleanup(func() { kubectl(t, "delete", "crd", gatewayCRDName, "--ignore-not-found", "--wait=true") })
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, env.cfg, gatewayCRDName, 30*time.Second))
	createHTTPSGateway(t, gw, ns)
	kubectl(t, "apply", "--server-side", "-f", gatewayAPIFile(t, "gateway.networking.k8s.io_httproutes.yaml"))
	deleteCRD := func() {
		kubectl(t, "delete", "crd", httpRouteCRDName, "--ignore-not-found", "--wait=true")
	}
	t.Cleanup(deleteCRD)
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, env.cfg, httpRouteCRDName, 30*time.Second))
	var route *gatewayv1.HTTPRoute
	appears(t, "the controller makes the HTTPRoute", func(ctx context.Context) (err error) {
		route, err = gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "routed-route", metav1.GetOptions{})
		return err
	})
	l := get(t, ns, "routed")
	ref := metav1.GetControllerOf(route)
	require.NotNil(t, ref)
	assert.Equal(t, l.UID, ref.UID, "the route is controlled by its CR")
	require.Len(t, route.Spec.ParentRefs, 1)
	assert.Equal(t, gatewayv1.ObjectName("gw"), route.Spec.ParentRefs[0].Name)
	assert.Equal(t, []gatewayv1.Hostname{"routed.example.com"}, route.Spec.Hostnames)
	require.Len(t, route.Spec.Rules, 1)
	require.Len(t, route.Spec.Rules[0].BackendRefs, 1)
	assert.Equal(t, gatewayv1.ObjectName("routed-service"), route.Spec.Rules[0].BackendRefs[0].Name)
	waitCondition(t, ns, "routed", v1alpha2.ConditionExposed, metav1.ConditionUnknown, v1alpha2.ReasonRoutePending)

	// The Gateway accepts it, as a Gateway controller reports it.
	eventually(t, 10*time.Second, "the Gateway's report is written", func(ctx context.Context) (bool, error) {
		r, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "routed-route", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		r.Status.Parents = []gatewayv1.RouteParentStatus{{
			ParentRef: r.Spec.ParentRefs[0], ControllerName: "example.com/gateway-controller",
			Conditions: []metav1.Condition{
				{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.Now(), ObservedGeneration: r.Generation},
				{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs", LastTransitionTime: metav1.Now(), ObservedGeneration: r.Generation},
			},
		}}
		_, err = gw.GatewayV1().HTTPRoutes(ns).UpdateStatus(ctx, r, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	l = waitCondition(t, ns, "routed", v1alpha2.ConditionExposed, metav1.ConditionTrue, v1alpha2.ReasonRouteAccepted)
	eventually(t, 10*time.Second, "routeURL is the route's host on the listener's scheme and port", func(ctx context.Context) (bool, error) {
		l := get(t, ns, "routed")
		return l.Status.RouteURL != nil && *l.Status.RouteURL == "https://routed.example.com:8443", nil
	})

	// The route goes with its CR.
	require.NoError(t, env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Delete(ctx, "routed", metav1.DeleteOptions{}))
	gone(t, "the HTTPRoute of the deleted CR", func(ctx context.Context) error {
		_, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "routed-route", metav1.GetOptions{})
		return err
	})

	// The CRD goes: the CR still asking says so again, and serves as ever.
	_, err = gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "kept-route", metav1.GetOptions{})
	require.NoError(t, err, "the other CR has its route too")
	deleteCRD()
	waitCondition(t, ns, "kept", v1alpha2.ConditionExposed, metav1.ConditionFalse, v1alpha2.ReasonAPINotServed)
	waitReady(t, ns, "kept")
}

// createHTTPSGateway creates the Gateway "gw" in ns, with one HTTPS listener "web" on 8443.
func createHTTPSGateway(t *testing.T, gw gatewayclient.Interface, ns string) {
	t.Helper()
	_, err := gw.GatewayV1().Gateways(ns).Create(context.Background(), &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: ns},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "example", Listeners: []gatewayv1.Listener{{
			Name: "web", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType,
			TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "cert"}}},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}
