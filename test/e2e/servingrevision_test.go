//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// A TLS change whose pods crash-loop is rolled back: the pods serve plain HTTP again,
// and so do the Service's port, the Route (edge, to the http port) and serviceURL. For
// a minute after, the TLS Secret replaced as cert-manager would renew it, the
// Deployment's template stays the served ReplicaSet's: the failed spec never comes
// back, and there is one rollback. A v1alpha1 client's edit during the hold (scaling
// through the conversion webhook) scales the served pods and keeps the hold.
func TestRolledBackTLSChangeLeavesTheChildrenOnHTTP(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	kubectl(t, "apply", "--server-side", "-f", openShiftRouteCRD(t))
	t.Cleanup(func() { kubectl(t, "delete", "crd", routeCRDName, "--ignore-not-found", "--wait=true") })
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, env.cfg, routeCRDName, 30*time.Second))
	dyn, err := dynamic.NewForConfig(env.cfg)
	require.NoError(t, err)
	routes := dyn.Resource(openShiftRoutes).Namespace(ns)
	routeTLS := func() (termination, target string) {
		r, err := routes.Get(ctx, "app-route", metav1.GetOptions{})
		require.NoError(t, err)
		termination, _, _ = unstructured.NestedString(r.Object, "spec", "tls", "termination")
		target, _, _ = unstructured.NestedString(r.Object, "spec", "port", "targetPort")
		return termination, target
	}
	secret := servingSecret(t, "app-cert", "app-service."+ns+".svc")
	_, err = env.kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, routeExposedCR(ns, "app", "app.apps.example.com"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitReady(t, ns, "app")
	served := waitRollback(t, ns, "app", "the ReplicaSet that serves is remembered", func(rb *v1alpha2.RollbackStatus) bool {
		return rb != nil && rb.ServedReplicaSet != ""
	}).ServedReplicaSet
	plain, err := env.kube.CoreV1().Services(ns).Get(ctx, "app-service", metav1.GetOptions{})
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the Route", func(ctx context.Context) (bool, error) {
		_, err := routes.Get(ctx, "app-route", metav1.GetOptions{})
		return err == nil, nil
	})

	setMinReadySeconds(t, ns, "app", 500)
	editHub(t, ns, "app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking.TLS = &v1alpha2.TLSSpec{Enabled: true, SecretName: "app-cert"}
	})
	_, pod := newReplicaSetPod(t, ns, "app", served)
	termination, _ := routeTLS()
	assert.Equal(t, "reencrypt", termination, "while the change rolls out")
	crashLoop(t, ns, pod, "OSError: cannot load the certificate")
	waitCondition(t, ns, "app", v1alpha2.ConditionProgressing, metav1.ConditionFalse, v1alpha2.ReasonRolledBack)
	setMinReadySeconds(t, ns, "app", 0)
	waitDeployment(t, ns, "app", "the old pods available", func(d *appsv1.Deployment) bool {
		return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 1 && d.Status.UpdatedReplicas == 1 && d.Status.Replicas == 1
	})

	waitHub(t, ns, "app", "an http serviceURL", func(l *v1alpha2.LlamaStackDistribution) bool {
		return l.Status.ServiceURL == "http://app-service."+ns+".svc.cluster.local:8321"
	})
	svc, err := env.kube.CoreV1().Services(ns).Get(ctx, "app-service", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, plain.Spec.Ports, svc.Spec.Ports, "the Service's port is HTTP, as the served pods")
	termination, target := routeTLS()
	assert.Equal(t, "edge", termination, "the Route does not reencrypt to an HTTP server")
	assert.Equal(t, "http", target)

	// A v1alpha1 client scales the CR during the hold: its read-edit-write goes through
	// the conversion webhook and gives the controller back the whole v1alpha2 spec (the
	// Route, the TLS it asked for) with only the replicas changed. The pods scale; the
	// template stays the served one.
	before, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, "app", metav1.GetOptions{})
	require.NoError(t, err)
	edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Labels = map[string]string{"team": "a"}
		l.Spec.Replicas = 2
	})
	after, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, "app", metav1.GetOptions{})
	require.NoError(t, err)
	wantSpec := before.Spec.DeepCopy()
	wantSpec.Workload.Replicas = ptr.To[int32](2)
	assert.True(t, equality.Semantic.DeepEqual(*wantSpec, after.Spec), "only the replicas change:\n%s", cmp.Diff(*wantSpec, after.Spec))
	waitDeployment(t, ns, "app", "scaled by the v1alpha1 edit", func(d *appsv1.Deployment) bool {
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 2
	})

	// The certificate is renewed during the hold.
	renewed := servingSecret(t, "app-cert", "app-service."+ns+".svc")
	secret, err = env.kube.CoreV1().Secrets(ns).Get(ctx, "app-cert", metav1.GetOptions{})
	require.NoError(t, err)
	secret.Data = renewed.Data
	_, err = env.kube.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{})
	require.NoError(t, err)
	rs, err := env.kube.AppsV1().ReplicaSets(ns).Get(ctx, served, metav1.GetOptions{})
	require.NoError(t, err)
	want := rs.Spec.Template.DeepCopy()
	delete(want.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(3 * time.Second) {
		d := deployment(t, ns, "app")
		require.True(t, equality.Semantic.DeepEqual(*want, d.Spec.Template), "the Deployment runs the served template")
		svc, err := env.kube.CoreV1().Services(ns).Get(ctx, "app-service", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, plain.Spec.Ports, svc.Spec.Ports)
	}
	l, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, "app", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, v1alpha2.ReasonRolledBack, meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionProgressing).Reason)
	assert.Equal(t, int32(1), countCREvents(ctx, ns, "app", corev1.EventTypeWarning, v1alpha2.ReasonRolledBack), "one rollback")
}

// A served ConfigMap deleted before a rollout fails: the rollback would leave pods
// waiting for it for ever, so it is not made, and Progressing names what is gone.
func TestServedConfigMapDeletedBeforeAFailedRolloutIsReported(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	_, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx,
		vllmCR(t, ns, "gen", "http://vllm.models.svc:8000/v1", "not-a-real-key"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitReady(t, ns, "gen")
	served := waitRollback(t, ns, "gen", "the ReplicaSet that serves is remembered", func(rb *v1alpha2.RollbackStatus) bool {
		return rb != nil && rb.ServedReplicaSet != ""
	}).ServedReplicaSet
	servedConfig := configMapOf(deployment(t, ns, "gen"))
	require.NotEmpty(t, servedConfig)

	setMinReadySeconds(t, ns, "gen", 500)
	editHub(t, ns, "gen", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Providers.Inference[0].Endpoint = "http://vllm-next.models.svc:8000/v1"
	})
	failed := waitDeployment(t, ns, "gen", "the new config rolls out", func(d *appsv1.Deployment) bool {
		return configMapOf(d) != servedConfig
	})
	require.NoError(t, env.kube.CoreV1().ConfigMaps(ns).Delete(ctx, servedConfig, metav1.DeleteOptions{}))
	_, pod := newReplicaSetPod(t, ns, "gen", served)
	crashLoop(t, ns, pod, "RuntimeError: cannot reach vllm-next.models.svc")

	l := waitHub(t, ns, "gen", "the failure reported", func(l *v1alpha2.LlamaStackDistribution) bool {
		c := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionProgressing)
		return c != nil && c.Reason == v1alpha2.ReasonCrashLoopBackOff
	})
	assert.Contains(t, meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionProgressing).Message,
		"not rolled back: ConfigMap "+servedConfig+", which ReplicaSet "+served+" needs, no longer exists")
	settle(t)
	d := deployment(t, ns, "gen")
	assert.True(t, equality.Semantic.DeepEqual(failed.Spec.Template, d.Spec.Template), "not rolled back")
	assert.NotContains(t, d.Annotations, "llamastack.io/rolled-back")
	assert.Zero(t, countCREvents(ctx, ns, "gen", corev1.EventTypeWarning, v1alpha2.ReasonRolledBack))
	_, err = env.kube.CoreV1().ConfigMaps(ns).Get(ctx, servedConfig, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "not made again: %v", err)
}

// configMapOf is the ConfigMap the Deployment mounts as the server's config.
func configMapOf(d *appsv1.Deployment) string {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "user-config" && v.ConfigMap != nil {
			return v.ConfigMap.Name
		}
	}
	return ""
}
