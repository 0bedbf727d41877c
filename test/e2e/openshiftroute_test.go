//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

const routeCRDName = localcluster.RouteCRDName

var openShiftRoutes = schema.GroupVersionResource{Group: "route.openshift.io", Version: "v1", Resource: "routes"}

// openShiftRouteCRD writes the CRD of route.openshift.io/v1 Route made from the
// OpenShift API module's Go types (localcluster.RouteCRD) and returns its path.
func openShiftRouteCRD(t *testing.T) string {
	t.Helper()
	raw, err := localcluster.RouteCRD(context.Background())
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), routeCRDName+".yaml")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	return path
}

// routeExposedCR is a v1alpha2 CR exposed through an OpenShift Route.
func routeExposedCR(ns, name, hostname string) *v1alpha2.LlamaStackDistribution {
	return &v1alpha2.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha2.LlamaStackDistributionSpec{
			Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Networking:   &v1alpha2.NetworkingSpec{Expose: &v1alpha2.ExposeSpec{Type: v1alpha2.ExposeRoute, Hostname: hostname}},
		},
	}
}

// The OpenShift Route is an optional kind, as the HTTPRoute. Without its CRD a CR
// asking for a Route gets everything else and Exposed=False. Once the CRD is installed
// the controller finds it without a restart: the Route appears, owned by the CR, stored
// as sent (the module's types have every field it sets), Exposed follows the router's
// report and routeURL its host, nothing is written again, and the Route goes with its
// CR; when the CRD goes, the CRs still asking say so again and keep serving.
func TestOpenShiftRouteFollowsTheRouteAPI(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dyn, err := dynamic.NewForConfig(env.cfg)
	require.NoError(t, err)
	routes := dyn.Resource(openShiftRoutes).Namespace(ns)
	for name, host := range map[string]string{"edge": "edge.apps.example.com", "picked": ""} {
		_, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, routeExposedCR(ns, name, host), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, name := range []string{"edge", "picked"} {
		waitReady(t, ns, name)
		waitCondition(t, ns, name, v1alpha2.ConditionExposed, metav1.ConditionFalse, v1alpha2.ReasonAPINotServed)
	}
	_, err = env.kube.NetworkingV1().Ingresses(ns).Get(ctx, "edge-ingress", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "type Route makes no Ingress: %v", err)

	// The CRD appears.
	kubectl(t, "apply", "--server-side", "-f", openShiftRouteCRD(t))
	deleteCRD := func() { kubectl(t, "delete", "crd", routeCRDName, "--ignore-not-found", "--wait=true") }
	t.Cleanup(deleteCRD)
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, env.cfg, routeCRDName, 30*time.Second))
	var route *unstructured.Unstructured
	appears(t, "the controller makes the Route", func(ctx context.Context) (err error) {
		route, err = routes.Get(ctx, "edge-route", metav1.GetOptions{})
		return err
	})
	l := get(t, ns, "edge")
	ref := metav1.GetControllerOf(route)
	require.NotNil(t, ref)
	assert.Equal(t, l.UID, ref.UID, "the Route is controlled by its CR")
	assert.Equal(t, map[string]any{
		"host": "edge.apps.example.com",
		"to":   map[string]any{"kind": "Service", "name": "edge-service", "weight": int64(100)},
		"port": map[string]any{"targetPort": "http"},
		"tls":  map[string]any{"termination": "edge", "insecureEdgeTerminationPolicy": "Redirect"},
	}, route.Object["spec"], "stored as sent: the schema of the module's types prunes nothing")
	waitCondition(t, ns, "edge", v1alpha2.ConditionExposed, metav1.ConditionUnknown, v1alpha2.ReasonRoutePending)

	// The router reports: it admits one Route, with the host it picks for the other,
	// which another namespace holds.
	report := func(name, host, status, reason string) string {
		var rv string
		eventually(t, 10*time.Second, "the router's report on "+name+" is written", func(ctx context.Context) (bool, error) {
			r, err := routes.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cond := map[string]any{"type": "Admitted", "status": status, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
			if reason != "" {
				cond["reason"], cond["message"] = reason, "a route in another namespace holds "+host
			}
			if err := unstructured.SetNestedSlice(r.Object, []any{map[string]any{
				"host": host, "routerName": "default", "conditions": []any{cond},
			}}, "status", "ingress"); err != nil {
				return false, err
			}
			updated, err := routes.UpdateStatus(ctx, r, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				return false, nil
			}
			if err == nil {
				rv = updated.GetResourceVersion()
			}
			return err == nil, err
		})
		return rv
	}
	admitted := report("edge-route", "edge.apps.example.com", "True", "")
	report("picked-route", "picked-"+ns+".apps.example.com", "False", "HostAlreadyClaimed")
	waitCondition(t, ns, "edge", v1alpha2.ConditionExposed, metav1.ConditionTrue, v1alpha2.ReasonRouteAccepted)
	eventually(t, 10*time.Second, "routeURL is the admitted host", func(ctx context.Context) (bool, error) {
		l := get(t, ns, "edge")
		return l.Status.RouteURL != nil && *l.Status.RouteURL == "https://edge.apps.example.com", nil
	})
	refused := waitCondition(t, ns, "picked", v1alpha2.ConditionExposed, metav1.ConditionFalse, v1alpha2.ReasonRouteNotAccepted)
	c := findCondition(refused, v1alpha2.ConditionExposed)
	require.NotNil(t, c)
	assert.Contains(t, c.Message, "HostAlreadyClaimed")
	route, err = routes.Get(ctx, "edge-route", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, admitted, route.GetResourceVersion(), "the router's report is no reason to write the Route")

	// The Route goes with its CR.
	require.NoError(t, env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Delete(ctx, "edge", metav1.DeleteOptions{}))
	gone(t, "the Route of the deleted CR", func(ctx context.Context) error {
		_, err := routes.Get(ctx, "edge-route", metav1.GetOptions{})
		return err
	})

	// The CRD goes: the CR still asking says so again, and serves as ever.
	deleteCRD()
	waitCondition(t, ns, "picked", v1alpha2.ConditionExposed, metav1.ConditionFalse, v1alpha2.ReasonAPINotServed)
	waitReady(t, ns, "picked")
}
