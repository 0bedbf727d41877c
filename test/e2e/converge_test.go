//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A minimal CR converges: every child exists with the right owner and labels, the
// Deployment becomes Available on the kwok nodes, the CR reports Ready with a current
// observedGeneration, and kubectl wait sees it. Then the controller stays silent:
// no request other than its watches over several informer resyncs.
func TestConvergeThenIdle(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	l := create(t, llsd(ns, "minimal"))

	ready := waitReady(t, ns, "minimal")
	assert.Equal(t, int32(1), ready.Status.AvailableReplicas)
	assert.Equal(t, "http://minimal-service."+ns+".svc.cluster.local:8321", ready.Status.ServiceURL)
	assert.Equal(t, "starter", ready.Status.DistributionConfig.ActiveDistribution)
	assert.Nil(t, ready.Status.RouteURL)

	out := kubectl(t, "wait", "--for=condition=Ready", "--timeout=30s", "-n", ns, "llsd/minimal")
	assert.Contains(t, out, "condition met")
	out = kubectl(t, "get", "llsd", "-n", ns)
	assert.Contains(t, out, "Ready")

	d := deployment(t, ns, "minimal")
	svc, err := env.kube.CoreV1().Services(ns).Get(ctx, "minimal-service", metav1.GetOptions{})
	require.NoError(t, err)
	for _, obj := range []metav1.Object{d, svc} {
		ref := metav1.GetControllerOf(obj)
		require.NotNil(t, ref, obj.GetName())
		assert.Equal(t, "LlamaStackDistribution", ref.Kind)
		assert.Equal(t, l.UID, ref.UID)
		assert.Equal(t, map[string]string{
			"app": "llama-stack", "app.kubernetes.io/instance": "minimal",
			"app.kubernetes.io/managed-by": "llama-stack-operator", "app.kubernetes.io/part-of": "llama-stack",
		}, obj.GetLabels())
	}
	assert.Equal(t, map[string]string{"app": "llama-stack", "app.kubernetes.io/instance": "minimal"}, d.Spec.Selector.MatchLabels)
	assert.Equal(t, map[string]string{"app": "llama-stack", "app.kubernetes.io/instance": "minimal"}, svc.Spec.Selector)
	assert.Equal(t, "docker.io/llamastack/distribution-starter:latest", server(d).Image)
	for _, absent := range []func() error{
		func() error {
			_, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "minimal-pvc", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "minimal-hpa", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := env.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "minimal-pdb", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := env.kube.NetworkingV1().Ingresses(ns).Get(ctx, "minimal-ingress", metav1.GetOptions{})
			return err
		},
	} {
		assert.Error(t, absent())
	}

	// Server-side defaults must not make the controller re-apply: once converged,
	// nothing but watches, over three resync periods. Earlier tests' namespaces are
	// gone first: their deletion makes the controller try (and fail) to re-create
	// children that the namespace controller removes.
	waitOtherNamespacesGone(t, ns)
	settle(t)
	before := env.requests.snapshot()
	time.Sleep(3*resyncPeriod + time.Second)
	assert.Empty(t, env.requests.since(before), "requests sent while nothing changed")
}

// settle waits until the controller has sent no request other than watches for two
// seconds (other tests' namespaces may still be going away).
func settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		before := env.requests.snapshot()
		time.Sleep(2 * time.Second)
		if len(env.requests.since(before)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller never went quiet; last requests: %s", strings.Join(env.requests.since(before), ", "))
		}
	}
}

// waitOtherNamespacesGone waits until no test namespace but keep exists.
func waitOtherNamespacesGone(t *testing.T, keep string) {
	t.Helper()
	eventually(t, 3*time.Minute, "earlier tests' namespaces are deleted", func(ctx context.Context) (bool, error) {
		list, err := env.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, n := range list.Items {
			if strings.HasPrefix(n.Name, "e2e-") && n.Name != keep {
				return false, nil
			}
		}
		return true, nil
	})
}
