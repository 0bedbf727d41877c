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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// A manual change of a field the controller owns is repaired; a label, an annotation
// or a sidecar added by someone else stays.
func TestManualChangesRepairedOthersKept(t *testing.T) {
	ns := newNamespace(t)
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "FOO", Value: "1"}}
	}))
	waitReady(t, ns, "app")

	eventually(t, 10*time.Second, "the Deployment is edited by hand", func(ctx context.Context) (bool, error) {
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		d.Labels["team"] = "platform"
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations["example.com/owner"] = "someone"
		for i := range d.Spec.Template.Spec.Containers[0].Env {
			if d.Spec.Template.Spec.Containers[0].Env[i].Name == "FOO" {
				d.Spec.Template.Spec.Containers[0].Env[i].Value = "tampered"
			}
		}
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox:1"})
		_, err = env.kube.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		return err == nil, nil
	})
	d := waitDeployment(t, ns, "app", "FOO is repaired", func(d *appsv1.Deployment) bool {
		v, _ := envValue(server(d), "FOO")
		return v == "1"
	})
	assert.Equal(t, "platform", d.Labels["team"])
	assert.Equal(t, "someone", d.Annotations["example.com/owner"])
	require.Len(t, d.Spec.Template.Spec.Containers, 2)
	assert.Equal(t, "sidecar", d.Spec.Template.Spec.Containers[1].Name)

	// Manual scaling is a change of a field the controller owns (without autoscaling).
	eventually(t, 10*time.Second, "the Deployment is scaled by hand", func(ctx context.Context) (bool, error) {
		scale, err := env.kube.AppsV1().Deployments(ns).GetScale(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		scale.Spec.Replicas = 2
		_, err = env.kube.AppsV1().Deployments(ns).UpdateScale(ctx, "app", scale, metav1.UpdateOptions{FieldManager: "kubectl-scale"})
		return err == nil, nil
	})
	// Upstream's scenario allows 5 s; the controller reacts to the Deployment's event.
	eventually(t, 5*time.Second, "replicas reverted to 1", func(ctx context.Context) (bool, error) {
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 1, err
	})
	waitReady(t, ns, "app")
}

// An object with a child's name that the CR does not control stays untouched, and the
// CR reports it; once it is gone the CR converges.
func TestForeignObjectUntouched(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "app-service", Namespace: ns, Labels: map[string]string{"owner": "someone-else"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "other"},
			Ports:    []corev1.ServicePort{{Name: "web", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	foreign, err := env.kube.CoreV1().Services(ns).Create(ctx, foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	create(t, llsd(ns, "app"))

	l := waitCondition(t, ns, "app", v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonResourceNotOwned)
	assert.Equal(t, v1alpha1.PhaseFailed, l.Status.Phase)
	cond := findCondition(l, v1alpha1.ConditionDeploymentReady)
	assert.Contains(t, cond.Message, "Service "+ns+"/app-service")
	eventually(t, 10*time.Second, "a Warning Event names the Service", func(ctx context.Context) (bool, error) {
		evs, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == v1alpha1.ReasonResourceNotOwned && e.InvolvedObject.Name == "app" {
				return true, nil
			}
		}
		return false, nil
	})
	time.Sleep(2 * time.Second)
	now, err := env.kube.CoreV1().Services(ns).Get(ctx, "app-service", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, foreign.ResourceVersion, now.ResourceVersion, "the foreign Service was written")
	assert.Empty(t, now.OwnerReferences)

	require.NoError(t, env.kube.CoreV1().Services(ns).Delete(ctx, "app-service", metav1.DeleteOptions{}))
	// No event announces that someone else's object went away: the controller rechecks,
	// with a backoff that has grown to 32s by now.
	waitReadyWithin(t, ns, "app", 2*time.Minute)
}

// Deleting the CR garbage-collects every child (kube-controller-manager's collector).
func TestDeletionCollectsChildren(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	two := intstr.FromInt32(1)
	_, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ca"},
		Data:       map[string]string{"ca-bundle.crt": testCertificate(t, "gc-ca")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	createPV(t, ns+"-pv", "10Gi")
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 2}
		l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: &two}
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
		l.Spec.Server.TLSConfig = &v1alpha1.TLSConfig{CABundle: &v1alpha1.CABundleConfig{ConfigMapName: "ca"}}
		l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true}
	}))
	waitReady(t, ns, "app")
	require.NoError(t, env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Delete(ctx, "app", metav1.DeleteOptions{}))

	gone(t, "the Deployment", func(ctx context.Context) error {
		_, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		return err
	})
	gone(t, "the Service", func(ctx context.Context) error {
		_, err := env.kube.CoreV1().Services(ns).Get(ctx, "app-service", metav1.GetOptions{})
		return err
	})
	gone(t, "the HPA", func(ctx context.Context) error {
		_, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "app-hpa", metav1.GetOptions{})
		return err
	})
	gone(t, "the PDB", func(ctx context.Context) error {
		_, err := env.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "app-pdb", metav1.GetOptions{})
		return err
	})
	gone(t, "the Ingress", func(ctx context.Context) error {
		_, err := env.kube.NetworkingV1().Ingresses(ns).Get(ctx, "app-ingress", metav1.GetOptions{})
		return err
	})
	gone(t, "the CR", func(ctx context.Context) error {
		_, err := env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Get(ctx, "app", metav1.GetOptions{})
		return err
	})
	gone(t, "the PVC (with its owner, by the garbage collector; the controller never deletes it)", func(ctx context.Context) error {
		_, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "app-pvc", metav1.GetOptions{})
		return err
	})
	gone(t, "the CA bundle ConfigMap", func(ctx context.Context) error {
		_, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "app-ca-bundle", metav1.GetOptions{})
		return err
	})
	eventually(t, 30*time.Second, "the pods are gone", func(ctx context.Context) (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=app"})
		return err == nil && len(pods.Items) == 0, err
	})
}

func findCondition(l *v1alpha1.LlamaStackDistribution, t string) *metav1.Condition {
	for i := range l.Status.Conditions {
		if l.Status.Conditions[i].Type == t {
			return &l.Status.Conditions[i]
		}
	}
	return nil
}
