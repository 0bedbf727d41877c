package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
)

// routedTLS is a CR whose server serves TLS with the Secret "serving", exposed through
// an HTTPRoute.
func routedTLS(name string) *v1alpha2.LlamaStackDistribution {
	return newLLSD(name, withServerTLS("serving"), exposedThrough("llama.example.com", "", v1alpha2.GatewayParentRef{Name: "gw"}))
}

// storedPolicy reads the CR's BackendTLSPolicy from the fake API; nil when there is none.
func (f *fixture) storedPolicy(name string) *gatewayv1.BackendTLSPolicy {
	f.t.Helper()
	p, err := f.gatewayclient.GatewayV1().BackendTLSPolicies(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(f.t, err)
	return p
}

// storedConfigMap reads a ConfigMap of the test namespace; nil when there is none.
func (f *fixture) storedConfigMap(name string) *corev1.ConfigMap {
	f.t.Helper()
	cm, err := f.kubeclient.CoreV1().ConfigMaps(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(f.t, err)
	return cm
}

// An HTTPRoute to a TLS server on a cluster that serves HTTPRoutes but not
// BackendTLSPolicies: the route is made, and the CR says the Gateway would speak HTTP to
// the HTTPS port (Exposed=False, no routeURL), with a Warning Event.
func TestBackendTLSWithoutTheAPI(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	f := newFixture(t, routedTLS("app"), serving.secret("serving"))
	f.serveHTTPRoutes()
	f.converge("app")
	for _, a := range f.gatewayclient.Actions() {
		if a.GetResource().Resource == "backendtlspolicies" {
			t.Errorf("a BackendTLSPolicy request without the API: %s", describe([]core.Action{a}))
		}
	}
	assert.Nil(t, f.storedConfigMap("app-backend-ca"), "no CA for a policy that cannot be made")
	l := f.llsd("app")
	c := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionExposed)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha2.ReasonBackendTLSNotServed, c.Reason)
	assert.Contains(t, c.Message, "plain HTTP to the server's HTTPS port")
	assert.Equal(t, ptr.To(""), l.Status.RouteURL)
	assert.Contains(t, f.events(), "Warning BackendTLSNotServed "+c.Message)
	_, err := f.gatewayclient.GatewayV1().HTTPRoutes(testNamespace).Get(f.ctx, "app-route", metav1.GetOptions{})
	assert.NoError(t, err, "the route is made as ever")
}

// With the API served: the policy of the Service's HTTPS port is applied as its builder
// makes it, after the ConfigMap of the CA that verifies the server (the Secret's
// ca.crt), then kept; without TLS the route stays and the policy and its CA go.
func TestBackendTLSLifecycle(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	l := routedTLS("app")
	f := newFixture(t, l, serving.secret("serving"))
	f.gateways = []*gatewayv1.Gateway{gatewayWith(testNamespace, "gw")}
	f.serveHTTPRoutes()
	f.serveBackendTLSPolicies()
	// The CA is there before the policy names it.
	caBeforePolicy := false
	f.gatewayclient.PrependReactor("patch", "backendtlspolicies", func(core.Action) (bool, runtime.Object, error) {
		caBeforePolicy = f.storedConfigMap("app-backend-ca") != nil
		return false, nil, nil
	})
	actions := f.sync("app")
	assert.True(t, caBeforePolicy, "the policy is written after its CA: %s", describe(actions))
	checkWrites(t, actionsOn(children.BackendTLSPolicyResource, actions),
		[]expectedWrite{{verb: "patch", resource: "backendtlspolicies", name: "app-backend-tls", object: children.NewBackendTLSPolicy(l, true)}})
	f.converge("app")
	cm := f.storedConfigMap("app-backend-ca")
	require.NotNil(t, cm)
	assert.Equal(t, string(serving.ca), cm.Data["ca.crt"], "the CA that signed the server's certificate")
	p := f.storedPolicy("app-backend-tls")
	require.NotNil(t, p)
	assert.Equal(t, gatewayv1.PreciseHostname("app-service.demo.svc"), p.Spec.Validation.Hostname)
	assert.Empty(t, mutating(f.sync("app")), "a converged sync writes nothing")

	// Not TLS any more: the route stays, the policy and its CA go.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Networking.TLS = nil })
	f.converge("app")
	assert.Nil(t, f.storedPolicy("app-backend-tls"))
	assert.Nil(t, f.storedConfigMap("app-backend-ca"))
	_, err := f.gatewayclient.GatewayV1().HTTPRoutes(testNamespace).Get(f.ctx, "app-route", metav1.GetOptions{})
	assert.NoError(t, err)
	c := meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionExposed)
	require.NotNil(t, c)
	assert.Equal(t, v1alpha2.ReasonRoutePending, c.Reason, "Exposed is what the Gateway says of the route")
}

// A Secret without ca.crt and no CA bundle: the controller knows no CA, so the policy
// has the Gateways use their well-known roots, and no CA ConfigMap is made.
func TestBackendTLSWithoutACA(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	secret := serving.secret("serving")
	delete(secret.Data, "ca.crt")
	l := routedTLS("app")
	f := newFixture(t, l, secret)
	f.serveHTTPRoutes()
	f.serveBackendTLSPolicies()
	f.converge("app")
	p := f.storedPolicy("app-backend-tls")
	require.NotNil(t, p)
	assert.Equal(t, children.NewBackendTLSPolicy(l, false).Spec, p.Spec)
	assert.Nil(t, f.storedConfigMap("app-backend-ca"))
}

// After a TLS change is rolled back, the pods serve plain HTTP again: the policy and its
// CA, made while the change rolled out, go, and none is asked for while the rollback
// holds; nor does the CR say Exposed=False for want of the API.
func TestBackendTLSFollowsARolledBackTLSChange(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	f := newRollbackFixture(t, newLLSD("app", exposedThrough("llama.example.com", "", v1alpha2.GatewayParentRef{Name: "gw"})),
		serving.secret("serving"))
	f.serveHTTPRoutes()
	f.serveBackendTLSPolicies()
	f.converge("app")
	require.Nil(t, f.storedPolicy("app-backend-tls"), "a plain server has none")

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking.TLS = &v1alpha2.TLSSpec{Enabled: true, SecretName: "serving"}
	})
	f.converge("app")
	require.NotNil(t, f.storedPolicy("app-backend-tls"), "the change rolls out with its policy")
	require.NotNil(t, f.storedConfigMap("app-backend-ca"))
	failed := f.rollOut()
	f.setDeploymentStatus("app", newPodFailing(true))
	f.crashLooping(failed+"-x1", failed, rollout.RollbackAfterRestarts)
	f.converge("app")
	require.Equal(t, v1alpha2.ReasonRolledBack, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)
	require.False(t, children.ServesTLS(f.deployment("app")), "the pods serve HTTP")

	assert.Nil(t, f.storedPolicy("app-backend-tls"), "no TLS to an HTTP server")
	assert.Nil(t, f.storedConfigMap("app-backend-ca"))
	assert.Empty(t, mutating(f.sync("app")), "held across syncs: nothing flips back")
}
