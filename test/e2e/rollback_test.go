//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// TestFailedRolloutIsRolledBack: a config change whose new pod crash-loops is rolled
// back by the controller to the image, config and env of the ReplicaSet that served,
// with RolledBack in Progressing (the pod's own words) and one Warning Event; the CR is
// Ready again on the old pods and the failed change is not tried again; a later change
// rolls forward. With and without storage (Recreate: nothing serves in between).
//
// kwok makes every pod ready at once, where a crash-looping server never would be: as a
// user may, the test gives the Deployment a minReadySeconds (a field the controller does
// not own) for the failing rollout, so that its pod is not available while the test
// plays the kubelet reporting its crash loop.
func TestFailedRolloutIsRolledBack(t *testing.T) {
	for name, storage := range map[string]bool{"emptydir": false, "pvc": true} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t)
			cr := vllmCR(t, ns, "gen", "http://vllm.models.svc:8000/v1", "not-a-real-key")
			if storage {
				cr.Spec.Workload.Storage = &v1alpha2.PVCStorageSpec{}
				createPV(t, ns+"-pv", "10Gi")
			}
			crs := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns)
			_, err := crs.Create(ctx, cr, metav1.CreateOptions{})
			require.NoError(t, err)
			waitReady(t, ns, "gen")
			served := waitRollback(t, ns, "gen", "the ReplicaSet that serves is remembered", func(rb *v1alpha2.RollbackStatus) bool {
				return rb != nil && rb.ServedReplicaSet != ""
			}).ServedReplicaSet
			good := deployment(t, ns, "gen")

			setMinReadySeconds(t, ns, "gen", 500)
			editHub(t, ns, "gen", func(l *v1alpha2.LlamaStackDistribution) {
				l.Spec.Providers.Inference[0].Endpoint = "http://vllm-next.models.svc:8000/v1"
				l.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}}
			})
			failedRS, pod := newReplicaSetPod(t, ns, "gen", served)
			crashLoop(t, ns, pod, "RuntimeError: cannot reach vllm-next.models.svc")

			waitCondition(t, ns, "gen", v1alpha2.ConditionProgressing, metav1.ConditionFalse, v1alpha2.ReasonRolledBack)
			l, err := crs.Get(ctx, "gen", metav1.GetOptions{})
			require.NoError(t, err)
			p := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionProgressing)
			require.NotNil(t, p)
			assert.Contains(t, p.Message, "Rolled back to ReplicaSet "+served)
			assert.Contains(t, p.Message, "pod "+pod+": container llama-stack: restarting after it exited with code 1 (Error): RuntimeError: cannot reach vllm-next.models.svc")
			rb := l.Status.Rollback
			require.NotNil(t, rb)
			assert.Equal(t, failedRS, rb.FailedReplicaSet)
			assert.Equal(t, v1alpha2.ReasonCrashLoopBackOff, rb.Reason)
			d := deployment(t, ns, "gen")
			assert.True(t, equality.Semantic.DeepEqual(good.Spec.Template, d.Spec.Template), "the template that served is back")
			eventually(t, 30*time.Second, "one Warning Event RolledBack", func(ctx context.Context) (bool, error) {
				return countCREvents(ctx, ns, "gen", corev1.EventTypeWarning, v1alpha2.ReasonRolledBack) == 1, nil
			})

			// The old pods serve again (the user's minReadySeconds gone); the failed change
			// is held back: the controller leaves the Deployment as it is.
			setMinReadySeconds(t, ns, "gen", 0)
			waitDeployment(t, ns, "gen", "the old pods available", func(d *appsv1.Deployment) bool {
				return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 1 && d.Status.UpdatedReplicas == 1 && d.Status.Replicas == 1
			})
			l = waitHubReady(t, ns, "gen")
			assert.Equal(t, v1alpha2.ReasonRolledBack, meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionProgressing).Reason)
			assert.Contains(t, meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionConfigGenerated).Message, "rolled back")
			settle(t)
			d = deployment(t, ns, "gen")
			assert.True(t, equality.Semantic.DeepEqual(good.Spec.Template, d.Spec.Template))
			assert.Equal(t, v1alpha2.ReasonRolledBack, printedColumns(t, ns, "gen", "v1alpha2")["Progressing"])
			assert.Equal(t, int32(1), countCREvents(ctx, ns, "gen", corev1.EventTypeWarning, v1alpha2.ReasonRolledBack))
			for _, v := range good.Spec.Template.Spec.Volumes {
				if v.ConfigMap != nil && v.Name == "user-config" {
					_, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
					assert.NoError(t, err, "the config that serves is kept")
				}
			}

			// A later change rolls forward.
			editHub(t, ns, "gen", func(l *v1alpha2.LlamaStackDistribution) {
				l.Spec.Providers.Inference[0].Endpoint = "http://vllm-fixed.models.svc:8000/v1"
			})
			waitDeployment(t, ns, "gen", "the new inputs roll out", func(d *appsv1.Deployment) bool {
				v, ok := envValue(server(d), "LOG_LEVEL")
				return ok && v == "debug"
			})
			waitCondition(t, ns, "gen", v1alpha2.ConditionProgressing, metav1.ConditionTrue, v1alpha2.ReasonRolloutComplete)
			waitReady(t, ns, "gen")
			rb = waitRollback(t, ns, "gen", "the new ReplicaSet serves", func(rb *v1alpha2.RollbackStatus) bool {
				return rb != nil && rb.ServedReplicaSet != served && rb.ServedReplicaSet != failedRS && rb.ServedReplicaSet != ""
			})
			assert.Empty(t, rb.FailedInputs)
			assert.NotContains(t, deployment(t, ns, "gen").Annotations, "llamastack.io/rolled-back")
		})
	}
}

// crashLoop plays the kubelet reporting that the pod's server keeps exiting with
// message (three restarts: past the controller's threshold).
func crashLoop(t *testing.T, ns, pod, message string) {
	t.Helper()
	setPodStatus(t, ns, pod, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		setPodCondition(p, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady")
		setPodCondition(p, corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady")
		for i := range p.Status.ContainerStatuses {
			s := &p.Status.ContainerStatuses[i]
			s.Ready, s.Started, s.RestartCount = false, nil, 3
			s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: "back-off 40s restarting failed container"}}
			s.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
				Message: message, StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}
		}
	})
}

// waitHubReady waits until the CR, read in v1alpha2, is Ready for its current generation.
func waitHubReady(t *testing.T, ns, name string) *v1alpha2.LlamaStackDistribution {
	t.Helper()
	var l *v1alpha2.LlamaStackDistribution
	eventually(t, 60*time.Second, ns+"/"+name+" is Ready", func(ctx context.Context) (bool, error) {
		var err error
		l, err = env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return l.Status.ObservedGeneration == l.Generation && meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha2.ConditionReady), nil
	})
	return l
}

// waitRollback waits until the CR's status.rollback satisfies cond, and returns it.
func waitRollback(t *testing.T, ns, name, what string, cond func(*v1alpha2.RollbackStatus) bool) *v1alpha2.RollbackStatus {
	t.Helper()
	var rb *v1alpha2.RollbackStatus
	eventually(t, 60*time.Second, what, func(ctx context.Context) (bool, error) {
		l, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rb = l.Status.Rollback
		return cond(rb), nil
	})
	return rb
}

// setMinReadySeconds sets the Deployment's minReadySeconds as a user would, with a
// field manager of their own.
func setMinReadySeconds(t *testing.T, ns, name string, seconds int) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"minReadySeconds":%d}}`, seconds)
	_, err := env.kube.AppsV1().Deployments(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: "e2e-user"})
	require.NoError(t, err)
}

// newReplicaSetPod waits for a pod of a ReplicaSet of the CR's Deployment other than
// old, and returns the ReplicaSet and the pod.
func newReplicaSetPod(t *testing.T, ns, name, old string) (string, string) {
	t.Helper()
	var rs, pod string
	eventually(t, 60*time.Second, "a pod of the new ReplicaSet", func(ctx context.Context) (bool, error) {
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + name})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "ReplicaSet" && ref.Name != old && p.DeletionTimestamp == nil &&
				len(p.Status.ContainerStatuses) > 0 {
				rs, pod = ref.Name, p.Name
				return true, nil
			}
		}
		return false, nil
	})
	return rs, pod
}
