//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// Spec changes roll out to the children, and what is removed from the spec vanishes
// from them: env, image, storage, autoscaling, exposeRoute, PDB, and the NetworkPolicy
// feature flag.
func TestSpecChangesRollOut(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "FOO", Value: "1"}, {Name: "BAR", Value: "x"}}
	}))
	waitReady(t, ns, "app")

	t.Run("env", func(t *testing.T) {
		edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "FOO", Value: "2"}}
		})
		d := waitDeployment(t, ns, "app", "FOO=2 and no BAR", func(d *appsv1.Deployment) bool {
			foo, _ := envValue(server(d), "FOO")
			_, bar := envValue(server(d), "BAR")
			return foo == "2" && !bar
		})
		_, hf := envValue(server(d), "HF_HOME")
		assert.True(t, hf, "the controller's own env stays")
		waitReady(t, ns, "app")
	})

	t.Run("image", func(t *testing.T) {
		edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.Distribution = v1alpha1.DistributionType{Image: "quay.io/example/llama-stack:1.0"}
		})
		waitDeployment(t, ns, "app", "the new image", func(d *appsv1.Deployment) bool {
			return server(d).Image == "quay.io/example/llama-stack:1.0"
		})
		l := waitReady(t, ns, "app")
		assert.Equal(t, "custom", l.Status.DistributionConfig.ActiveDistribution)
	})

	t.Run("storage added", func(t *testing.T) {
		createPV(t, ns+"-pv", "10Gi")
		edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = &v1alpha1.StorageSpec{} })
		d := waitDeployment(t, ns, "app", "the PVC is mounted with Recreate", func(d *appsv1.Deployment) bool {
			return d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType && len(d.Spec.Template.Spec.Volumes) > 0 &&
				d.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim != nil
		})
		assert.Nil(t, d.Spec.Strategy.RollingUpdate)
		assert.Nil(t, d.Spec.Template.Spec.Volumes[0].EmptyDir, "the emptyDir is gone, not merged into the PVC volume")
		pvc, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "app-pvc", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, resource.MustParse("10Gi"), pvc.Spec.Resources.Requests[corev1.ResourceStorage])
		waitCondition(t, ns, "app", v1alpha1.ConditionStorageReady, metav1.ConditionTrue, v1alpha1.ReasonStorageReady)
		waitReady(t, ns, "app")
	})

	t.Run("autoscaling on and off", func(t *testing.T) {
		edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 3}
		})
		eventually(t, 30*time.Second, "the HPA exists", func(ctx context.Context) (bool, error) {
			_, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "app-hpa", metav1.GetOptions{})
			return err == nil, ignoreNotFound(err)
		})
		edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Autoscaling = nil })
		gone(t, "the HPA", func(ctx context.Context) error {
			_, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "app-hpa", metav1.GetOptions{})
			return err
		})
		waitReady(t, ns, "app")
	})

	t.Run("exposeRoute on and off", func(t *testing.T) {
		edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true}
		})
		eventually(t, 30*time.Second, "the Ingress exists and routeURL is set", func(ctx context.Context) (bool, error) {
			ing, err := env.kube.NetworkingV1().Ingresses(ns).Get(ctx, "app-ingress", metav1.GetOptions{})
			if err != nil {
				return false, ignoreNotFound(err)
			}
			l := get(t, ns, "app")
			return ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name == "app-service" && l.Status.RouteURL != nil, nil
		})
		edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Network = nil })
		gone(t, "the Ingress", func(ctx context.Context) error {
			_, err := env.kube.NetworkingV1().Ingresses(ns).Get(ctx, "app-ingress", metav1.GetOptions{})
			return err
		})
		eventually(t, 30*time.Second, "routeURL is cleared", func(ctx context.Context) (bool, error) {
			return get(t, ns, "app").Status.RouteURL == nil, nil
		})
	})

	t.Run("PDB on and off", func(t *testing.T) {
		two := intstr.FromInt32(2)
		edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: &two}
		})
		eventually(t, 30*time.Second, "the PDB exists", func(ctx context.Context) (bool, error) {
			pdb, err := env.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "app-pdb", metav1.GetOptions{})
			if err != nil {
				return false, ignoreNotFound(err)
			}
			return pdb.Spec.MaxUnavailable != nil && pdb.Spec.MaxUnavailable.IntValue() == 2, nil
		})
		edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.PodDisruptionBudget = nil })
		gone(t, "the PDB", func(ctx context.Context) error {
			_, err := env.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "app-pdb", metav1.GetOptions{})
			return err
		})
	})

	t.Run("NetworkPolicy flag on and off", func(t *testing.T) {
		setOperatorConfig(t, map[string]string{"featureFlags": "enableNetworkPolicy:\n  enabled: true\n"})
		eventually(t, 30*time.Second, "the NetworkPolicy exists", func(ctx context.Context) (bool, error) {
			_, err := env.kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "app-network-policy", metav1.GetOptions{})
			return err == nil, ignoreNotFound(err)
		})
		setOperatorConfig(t, map[string]string{"featureFlags": "enableNetworkPolicy:\n  enabled: false\n"})
		gone(t, "the NetworkPolicy", func(ctx context.Context) error {
			_, err := env.kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "app-network-policy", metav1.GetOptions{})
			return err
		})
	})

	waitReady(t, ns, "app")
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// createPV makes a volume a claim of that size can bind (there is no provisioner).
func createPV(t *testing.T, name, size string) {
	t.Helper()
	ctx := context.Background()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		},
	}
	_, err := env.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.kube.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// setOperatorConfig writes the operator ConfigMap; the test's cleanup removes it.
func setOperatorConfig(t *testing.T, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	_, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "llama-stack-operator-config", Namespace: operatorNamespace}, Data: data}
	cms := env.kube.CoreV1().ConfigMaps(operatorNamespace)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cms.Delete(context.Background(), cm.Name, metav1.DeleteOptions{}) })
	} else {
		require.NoError(t, err)
	}
}

// Upstream's TestRolloutWithStorage: with storage the Deployment uses Recreate, so a spec
// change replaces the pod without ever running two at once (a ReadWriteOnce volume cannot
// attach to two nodes), and the rollout ends with exactly one new pod.
func TestRolloutWithStorage(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	createPV(t, ns+"-pv", "10Gi")
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
	}))
	waitReady(t, ns, "app")
	require.Equal(t, appsv1.RecreateDeploymentStrategyType, deployment(t, ns, "app").Spec.Strategy.Type)
	before, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=app"})
	require.NoError(t, err)
	require.Len(t, before.Items, 1)

	// Count the live pods while the rollout runs.
	stop := make(chan struct{})
	most := make(chan int, 1)
	go func() {
		peak := 0
		for {
			select {
			case <-stop:
				most <- peak
				return
			case <-time.After(20 * time.Millisecond):
			}
			pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=app"})
			if err != nil {
				continue
			}
			n := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
					n++
				}
			}
			peak = max(peak, n)
		}
	}()
	edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "ROLLED", Value: "yes"}}
	})
	waitDeployment(t, ns, "app", "the rollout is done", func(d *appsv1.Deployment) bool {
		return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 1 && d.Status.Replicas == 1 && d.Status.AvailableReplicas == 1
	})
	waitReady(t, ns, "app")
	close(stop)
	assert.Equal(t, 1, <-most, "two pods ran at once during a Recreate rollout")
	after, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=app"})
	require.NoError(t, err)
	var live []string
	for _, p := range after.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p.Name)
		}
	}
	require.Len(t, live, 1)
	assert.NotEqual(t, before.Items[0].Name, live[0], "the pod was replaced")
}
