//go:build e2e

package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// kubectl apply -k artifacts/ installs everything, and the controller's own Deployment
// is admitted in its namespace, which enforces Pod Security "restricted" (kwok then
// reports its pod Running: the image is never pulled).
func TestArtifactsInstallUnderRestricted(t *testing.T) {
	ctx := context.Background()
	out := kubectl(t, "apply", "--server-side", "--force-conflicts", "-k", env.root+"/artifacts")
	t.Log(out)
	t.Cleanup(func() {
		_ = env.kube.AppsV1().Deployments(operatorNamespace).Delete(context.Background(), "llama-stack-controller", metav1.DeleteOptions{})
		_ = env.kube.PolicyV1().PodDisruptionBudgets(operatorNamespace).Delete(context.Background(), "llama-stack-controller", metav1.DeleteOptions{})
		_ = env.kube.CoreV1().ConfigMaps(operatorNamespace).Delete(context.Background(), "llama-stack-operator-config", metav1.DeleteOptions{})
	})
	ns, err := env.kube.CoreV1().Namespaces().Get(ctx, operatorNamespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])
	// Two replicas (leader and standby), each with the health probes, on different nodes.
	d := waitDeployment(t, operatorNamespace, "llama-stack-controller", "the controller's Deployment is Available", func(d *appsv1.Deployment) bool {
		return d.Status.AvailableReplicas == 2
	})
	c := d.Spec.Template.Spec.Containers[0]
	assert.Contains(t, c.Args, "--leader-elect=true")
	require.NotNil(t, c.LivenessProbe)
	require.NotNil(t, c.ReadinessProbe)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	pods, err := env.kube.CoreV1().Pods(operatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=llama-stack-controller"})
	require.NoError(t, err)
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			nodes[p.Spec.NodeName] = true
		}
	}
	assert.Len(t, nodes, 2, "the pods are spread over nodes")
	pdb, err := env.kube.PolicyV1().PodDisruptionBudgets(operatorNamespace).Get(ctx, "llama-stack-controller", metav1.GetOptions{})
	if assert.NoError(t, err, "the controller's PodDisruptionBudget") {
		assert.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue())
	}
	for _, name := range []string{"llama-stack-controller", "llamastackdistribution-editor", "llamastackdistribution-viewer"} {
		_, err := env.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		assert.NoError(t, err, "ClusterRole %s", name)
	}
	_, err = env.kube.RbacV1().Roles(operatorNamespace).Get(ctx, "llama-stack-controller-leader-election", metav1.GetOptions{})
	assert.NoError(t, err, "the leader election Role")
}

// Server pods meet Pod Security "restricted" by default: a CR in a namespace that
// enforces it becomes Ready.
func TestServerPodsRestricted(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	n, err := env.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	n.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	_, err = env.kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)

	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = &v1alpha1.StorageSpec{} }))
	createPV(t, ns+"-pv", "10Gi")
	waitReady(t, ns, "app")

	// The control: a pod that is not restricted is refused in that namespace.
	_, err = env.kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "privileged"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1"}}},
	}, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "violates PodSecurity")
}
