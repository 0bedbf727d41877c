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
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

const backendTLSPolicyCRDName = "backendtlspolicies.gateway.networking.k8s.io"

// An HTTPRoute to a server that serves TLS. With the HTTPRoute CRD but not the
// BackendTLSPolicy one (Gateway API before 1.4), the CR says Exposed=False: the Gateway
// would speak HTTP to the HTTPS port. Once the BackendTLSPolicy CRD of Gateway API's
// standard channel is installed, the controller finds it without a restart and makes
// the policy of the Service's HTTPS port, verifying the name the server's certificate
// is issued for against the Secret's CA, in a ConfigMap it owns; the real API server
// takes both as written (a sync sends nothing more), and they go when TLS does.
func TestBackendTLSPolicyOfATLSServer(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gw, err := gatewayclient.NewForConfig(env.cfg)
	require.NoError(t, err)
	secret := servingSecret(t, "app-cert", "app-service."+ns+".svc")
	_, err = env.kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
	require.NoError(t, err)

	kubectl(t, "apply", "--server-side", "-f", gatewayAPIFile(t, "gateway.networking.k8s.io_httproutes.yaml"))
	t.Cleanup(func() { kubectl(t, "delete", "crd", httpRouteCRDName, "--ignore-not-found", "--wait=true") })
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, env.cfg, httpRouteCRDName, 30*time.Second))
	l := routedCR(ns, "app")
	l.Spec.Networking.TLS = &v1alpha2.TLSSpec{Enabled: true, SecretName: "app-cert"}
	_, err = env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, l, metav1.CreateOptions{})
	require.NoError(t, err)
	appears(t, "the controller makes the HTTPRoute", func(ctx context.Context) error {
		_, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "app-route", metav1.GetOptions{})
		return err
	})
	waitCondition(t, ns, "app", v1alpha2.ConditionExposed, metav1.ConditionFalse, v1alpha2.ReasonBackendTLSNotServed)
	assert.Equal(t, ptr.To(""), get(t, ns, "app").Status.RouteURL)

	kubectl(t, "apply", "--server-side", "-f", gatewayAPIFile(t, "gateway.networking.k8s.io_backendtlspolicies.yaml"))
	t.Cleanup(func() { kubectl(t, "delete", "crd", backendTLSPolicyCRDName, "--ignore-not-found", "--wait=true") })
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, env.cfg, backendTLSPolicyCRDName, 30*time.Second))
	var policy *gatewayv1.BackendTLSPolicy
	appears(t, "the controller makes the BackendTLSPolicy", func(ctx context.Context) (err error) {
		policy, err = gw.GatewayV1().BackendTLSPolicies(ns).Get(ctx, "app-backend-tls", metav1.GetOptions{})
		return err
	})
	owner := metav1.GetControllerOf(policy)
	require.NotNil(t, owner)
	assert.Equal(t, get(t, ns, "app").UID, owner.UID, "the policy is controlled by its CR")
	assert.Equal(t, []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{
		LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Group: "", Kind: "Service", Name: "app-service"},
		SectionName:                ptr.To(gatewayv1.SectionName("https")),
	}}, policy.Spec.TargetRefs)
	assert.Equal(t, gatewayv1.PreciseHostname("app-service."+ns+".svc"), policy.Spec.Validation.Hostname, "the name the certificate is issued for")
	assert.Equal(t, []gatewayv1.LocalObjectReference{{Group: "", Kind: "ConfigMap", Name: "app-backend-ca"}}, policy.Spec.Validation.CACertificateRefs)
	svc, err := env.kube.CoreV1().Services(ns).Get(ctx, "app-service", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "https", svc.Spec.Ports[0].Name, "the port the policy names")
	ca, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "app-backend-ca", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(secret.Data["ca.crt"]), ca.Data["ca.crt"], "the CA that signed the server's certificate")
	waitCondition(t, ns, "app", v1alpha2.ConditionExposed, metav1.ConditionUnknown, v1alpha2.ReasonRoutePending)

	// The API server's form of the policy is what the controller applies: a sync that
	// the CR's edit brings writes neither again.
	policy, err = gw.GatewayV1().BackendTLSPolicies(ns).Get(ctx, "app-backend-tls", metav1.GetOptions{})
	require.NoError(t, err)
	editHub(t, ns, "app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Labels = map[string]string{"touched": "yes"}
	})
	time.Sleep(3 * time.Second)
	after, err := gw.GatewayV1().BackendTLSPolicies(ns).Get(ctx, "app-backend-tls", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, policy.ResourceVersion, after.ResourceVersion, "no write without a change")
	caAfter, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "app-backend-ca", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, ca.ResourceVersion, caAfter.ResourceVersion, "no write without a change")

	// Without TLS, neither is needed: both go, the route stays.
	editHub(t, ns, "app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Networking.TLS = nil })
	gone(t, "the BackendTLSPolicy", func(ctx context.Context) error {
		_, err := gw.GatewayV1().BackendTLSPolicies(ns).Get(ctx, "app-backend-tls", metav1.GetOptions{})
		return err
	})
	gone(t, "the backend CA", func(ctx context.Context) error {
		_, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "app-backend-ca", metav1.GetOptions{})
		return err
	})
	_, err = gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "app-route", metav1.GetOptions{})
	assert.False(t, apierrors.IsNotFound(err), "the route stays: %v", err)
}
