//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// The scale subresource: kubectl scale llsd changes spec.replicas, and status.replicas
// and status.selector tell an HPA or KEDA what runs.
func TestScaleSubresource(t *testing.T) {
	ns := newNamespace(t)
	create(t, llsd(ns, "app"))
	waitReady(t, ns, "app")
	kubectl(t, "scale", "-n", ns, "llsd/app", "--replicas=2")
	waitDeployment(t, ns, "app", "two replicas", func(d *appsv1.Deployment) bool {
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 2
	})
	l := waitReady(t, ns, "app")
	assert.Equal(t, int32(2), l.Spec.Replicas)
	assert.Equal(t, int32(2), l.Status.Replicas)
	assert.Equal(t, "app=llama-stack,app.kubernetes.io/instance=app", l.Status.Selector)

	scale, err := env.client.LlamastackV1alpha1().RESTClient().Get().
		Namespace(ns).Resource("llamastackdistributions").Name("app").SubResource("scale").DoRaw(context.Background())
	require.NoError(t, err)
	assert.Contains(t, string(scale), `"replicas":2`)
	assert.Contains(t, string(scale), `"selector":"app=llama-stack,app.kubernetes.io/instance=app"`)
}

// Ingress options: class, host, TLS and annotations reach the Ingress, routeURL uses
// https; a field the controller does not set, edited by someone else, survives.
func TestIngressOptions(t *testing.T) {
	ns := newNamespace(t)
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true}
	}))
	waitReady(t, ns, "app")

	// Someone else sets the class of the plain Ingress; it survives the next changes.
	eventually(t, 10*time.Second, "the class is set by hand", func(ctx context.Context) (bool, error) {
		ing, err := env.kube.NetworkingV1().Ingresses(ns).Get(ctx, "app-ingress", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ing.Spec.IngressClassName = ptrTo("by-hand")
		_, err = env.kube.NetworkingV1().Ingresses(ns).Update(ctx, ing, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		return err == nil, nil
	})
	edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Network.Ingress = &v1alpha1.IngressSpec{
			Host: "llama.example.com", TLSSecretName: "llama-tls",
			Annotations: map[string]string{"example.com/tier": "gold"},
		}
	})
	var ing *networkingv1.Ingress
	eventually(t, 30*time.Second, "the options reach the Ingress", func(ctx context.Context) (bool, error) {
		var err error
		ing, err = env.kube.NetworkingV1().Ingresses(ns).Get(ctx, "app-ingress", metav1.GetOptions{})
		return err == nil && len(ing.Spec.TLS) == 1, err
	})
	assert.Equal(t, "llama.example.com", ing.Spec.Rules[0].Host)
	assert.Equal(t, "llama-tls", ing.Spec.TLS[0].SecretName)
	assert.Equal(t, "gold", ing.Annotations["example.com/tier"])
	require.NotNil(t, ing.Spec.IngressClassName)
	assert.Equal(t, "by-hand", *ing.Spec.IngressClassName, "a field the controller does not set was overwritten")
	eventually(t, 30*time.Second, "routeURL uses https", func(ctx context.Context) (bool, error) {
		l := get(t, ns, "app")
		return l.Status.RouteURL != nil && *l.Status.RouteURL == "https://llama.example.com", nil
	})
}
