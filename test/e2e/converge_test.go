//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/llamastack/llama-stack-controller/cmd/controller/app"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// A minimal CR converges: every child exists with the right owner and labels, the
// Deployment becomes Available on the kwok nodes, the CR reports Ready with a current
// observedGeneration, and kubectl wait sees it. Then the controller stays silent:
// no request other than its watches over several informer resyncs, and its Lease
// renewals.
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
	var err error
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
	assert.Equal(t, "docker.io/ogxai/distribution-starter:1.3.0", server(d).Image, "the pinned image")
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

	// A second CR with every kind of child, so that server-side defaults of each kind are
	// proven not to cause re-applies.
	shared := newNamespace(t)
	_, err = env.kube.CoreV1().ConfigMaps(shared).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg", Annotations: map[string]string{"llamastack.io/allowed-namespaces": ns}},
		Data:       map[string]string{"config.yaml": starterConfig},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ca"},
		Data:       map[string]string{"ca-bundle.crt": testCertificate(t, "idle-ca")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	setOperatorConfig(t, map[string]string{"featureFlags": "enableNetworkPolicy:\n  enabled: true\n"})
	createPV(t, ns+"-pv", "10Gi")
	one := intstr.FromInt32(1)
	create(t, llsd(ns, "full", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "FOO", Value: "1"}}
		l.Spec.Server.ContainerSpec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
		l.Spec.Server.Workers = ptrTo(int32(2))
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 3, TargetMemoryUtilizationPercentage: ptrTo(int32(70))}
		l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: &one}
		l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "cfg", ConfigMapNamespace: shared}
		l.Spec.Server.TLSConfig = &v1alpha1.TLSConfig{CABundle: &v1alpha1.CABundleConfig{ConfigMapName: "ca"}}
		l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{
			TerminationGracePeriodSeconds: ptrTo(int64(60)),
			Volumes:                       []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			VolumeMounts:                  []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
		}
		l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true, AllowedFrom: &v1alpha1.AllowedFromSpec{
			Namespaces: []string{"monitoring"}, Labels: []v1alpha1.LabelKey{"team/allowed"},
		}, Ingress: &v1alpha1.IngressSpec{Host: "full.example.com", TLSSecretName: "tls"}}
	}))
	waitReady(t, ns, "full")
	for _, check := range []func(context.Context) error{
		func(ctx context.Context) error {
			_, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "full-hpa", metav1.GetOptions{})
			return err
		},
		func(ctx context.Context) error {
			_, err := env.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "full-pdb", metav1.GetOptions{})
			return err
		},
		func(ctx context.Context) error {
			_, err := env.kube.NetworkingV1().Ingresses(ns).Get(ctx, "full-ingress", metav1.GetOptions{})
			return err
		},
		func(ctx context.Context) error {
			_, err := env.kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "full-network-policy", metav1.GetOptions{})
			return err
		},
		func(ctx context.Context) error {
			_, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "full-pvc", metav1.GetOptions{})
			return err
		},
		func(ctx context.Context) error {
			_, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, userConfigCopy("full", map[string]string{"config.yaml": starterConfig}), metav1.GetOptions{})
			return err
		},
		func(ctx context.Context) error {
			_, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "full-ca-bundle", metav1.GetOptions{})
			return err
		},
	} {
		require.NoError(t, check(ctx))
	}

	// Server-side defaults must not make the controller re-apply: once converged,
	// nothing but watches, over three resync periods. Earlier tests' namespaces are
	// gone first: their deletion makes the controller try (and fail) to re-create
	// children that the namespace controller removes.
	waitOtherNamespacesGone(t, ns, shared)
	settle(t)
	before := env.requests.snapshot()
	idle := 3*resyncPeriod + time.Second
	time.Sleep(idle)
	assert.Empty(t, env.requests.since(before), "requests sent while nothing changed")
	// Leading costs one Lease update per retry period (2s), and nothing else.
	lease := env.requests.leaseSince(before)
	renewals := lease["PUT"]
	delete(lease, "PUT")
	assert.Empty(t, lease, "Lease requests other than renewals")
	assert.InDelta(t, idle/app.DefaultRetryPeriod, renewals, 2, "Lease renewals in %v", idle)
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

// waitOtherNamespacesGone waits until no test namespace but those in keep exists.
func waitOtherNamespacesGone(t *testing.T, keep ...string) {
	t.Helper()
	eventually(t, 3*time.Minute, "earlier tests' namespaces are deleted", func(ctx context.Context) (bool, error) {
		list, err := env.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, n := range list.Items {
			if strings.HasPrefix(n.Name, "e2e-") && !slices.Contains(keep, n.Name) {
				return false, nil
			}
		}
		return true, nil
	})
}
