//go:build e2e

package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/test/upstream"
)

// A CR whose children the upstream operator made (same names, a controller reference
// to the CR, upstream's labels; each object created with a plain Create and then
// server-side applied with the CR's name as field manager, as upstream does) is taken
// over: the same objects (no duplicate, the PVC kept), at most one rollout, the fields
// only upstream set are gone, and nothing is written once converged.
func TestMigrationFromUpstream(t *testing.T) {
	s := newScenario(t, 1)
	ns := s.namespaces[0]
	ctx := context.Background()
	from := time.Now()

	l := &v1alpha1.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: "upstream", Namespace: ns},
		Spec: v1alpha1.LlamaStackDistributionSpec{
			Replicas: 1,
			Server: v1alpha1.ServerSpec{
				Distribution:  v1alpha1.DistributionType{Name: "starter"},
				ContainerSpec: v1alpha1.ContainerSpec{Env: []corev1.EnvVar{{Name: "INFERENCE_MODEL", Value: "llama3.2:1b"}}},
				Storage:       &v1alpha1.StorageSpec{},
			},
		},
	}
	providePV(t, l)
	// Created in v1alpha2: no controller, and so no conversion webhook, runs yet.
	created, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, toHub(t, l), metav1.CreateOptions{})
	require.NoError(t, err)
	l = fromHub(t, created)

	// What upstream made of it, made as upstream makes it.
	require.NoError(t, upstream.Make(ctx, env.kube, l, upstream.Options{}))

	var before *appsv1.Deployment
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		before, err = env.kube.AppsV1().Deployments(ns).Get(ctx, "upstream", metav1.GetOptions{})
		return err == nil && before.Status.AvailableReplicas == 1, nil
	})
	require.NoError(t, err, "the upstream Deployment becomes available")
	pvcBefore, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "upstream-pvc", metav1.GetOptions{})
	require.NoError(t, err)
	svcBefore, err := env.kube.CoreV1().Services(ns).Get(ctx, "upstream-service", metav1.GetOptions{})
	require.NoError(t, err)
	s.pvcs[ns+"/upstream-pvc"] = pvcBefore.UID

	// The controller takes over, watched from the start: at no point does the CR report
	// a problem with upstream's claim (StorageFieldImmutable advises deleting it, which
	// loses its data), and no Warning Event is recorded for it.
	w, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + l.Name, ResourceVersion: l.ResourceVersion,
	})
	require.NoError(t, err)
	defer w.Stop()
	startController(t, "m")
	s.edits[ns+"/upstream"] = 1 // at most one rollout
	s.waitConverged(2 * time.Minute)
	s.check(from)
	statuses := 0
drain:
	for {
		select {
		case ev := <-w.ResultChan():
			hub, ok := ev.Object.(*v1alpha2.LlamaStackDistribution)
			if !ok {
				continue
			}
			got := fromHub(t, hub)
			statuses++
			assert.NotEqual(t, v1alpha1.PhaseFailed, got.Status.Phase, "during the takeover: %+v", got.Status.Conditions)
			for _, c := range got.Status.Conditions {
				if c.Type == v1alpha1.ConditionStorageInSync {
					assert.Equal(t, metav1.ConditionTrue, c.Status, "during the takeover: %s: %s", c.Reason, c.Message)
				}
				assert.NotEqual(t, v1alpha1.ReasonStorageFieldImmutable, c.Reason)
			}
		default:
			break drain
		}
	}
	assert.Positive(t, statuses, "the CR's status was watched")
	evs, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "LlamaStackDistribution" {
			assert.NotEqual(t, corev1.EventTypeWarning, e.Type, "Warning Event during the takeover: %s: %s", e.Reason, e.Message)
			t.Logf("Event: %s %s: %s", e.Type, e.Reason, e.Message)
		}
	}

	after, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "upstream", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.UID, after.UID, "the same Deployment")
	svcAfter, err := env.kube.CoreV1().Services(ns).Get(ctx, "upstream-service", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, svcBefore.UID, svcAfter.UID, "the same Service")
	assert.Equal(t, svcBefore.Spec.ClusterIP, svcAfter.Spec.ClusterIP, "the Service keeps its address")
	assert.Equal(t, ptr.To(true), after.Spec.Template.Spec.SecurityContext.RunAsNonRoot, "the pods now run restricted")
	assert.Empty(t, after.Spec.Template.Spec.ServiceAccountName, "upstream's per-CR ServiceAccount is no longer used")
	for _, mf := range after.ManagedFields {
		assert.NotEqual(t, l.Name, mf.Manager, "upstream's field manager owns nothing any more")
	}
	t.Logf("managers of the Deployment after the takeover: %v", managers(after.ManagedFields))

	// Converged means quiet: no write in the next 10 s.
	quiet := time.Now()
	time.Sleep(10 * time.Second)
	for _, e := range controllerRequests(t, quiet) {
		if e.ObjectRef != nil && e.ObjectRef.Namespace == ns {
			assert.False(t, e.mutating(), "write after convergence: %s %s %s", e.Verb, e.resource(), e.ObjectRef.Name)
		}
	}
	t.Logf("requests by the controller:\n%s", summarize(controllerRequests(t, from)))
}

func managers(entries []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
	}
	return out
}
