//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// mountsClaim tells whether a pod template mounts the named claim.
func mountsClaim(spec corev1.PodSpec, claim string) bool {
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}

// A pre-existing claim named <n>-pvc that is someone else's is never mounted by any pod
// template (Deployment or ReplicaSet), and never written: neither for a new CR nor for a
// running one that asks for storage.
func TestForeignPVCNeverMounted(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	newClaim := func(name string) *corev1.PersistentVolumeClaim {
		c, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"owner": "another-app"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return c
	}
	fresh := newClaim("fresh-pvc")
	running := newClaim("running-pvc")

	create(t, llsd(ns, "fresh", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = &v1alpha1.StorageSpec{} }))
	create(t, llsd(ns, "running"))
	waitReady(t, ns, "running")
	edit(t, ns, "running", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = &v1alpha1.StorageSpec{} })

	for _, name := range []string{"fresh", "running"} {
		l := waitCondition(t, ns, name, v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonResourceNotOwned)
		assert.Contains(t, meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionDeploymentReady).Message,
			"PersistentVolumeClaim "+ns+"/"+name+"-pvc")
	}
	// Give the controller every chance to get it wrong: several syncs and rechecks.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		_, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "fresh", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "a Deployment was made for a CR whose claim is someone else's (%v)", err)
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "running", metav1.GetOptions{})
		require.NoError(t, err)
		assert.False(t, mountsClaim(d.Spec.Template.Spec, "running-pvc"), "the running Deployment mounts someone else's claim")
		time.Sleep(500 * time.Millisecond)
	}
	rss, err := env.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, rs := range rss.Items {
		for _, claim := range []string{"fresh-pvc", "running-pvc"} {
			assert.False(t, mountsClaim(rs.Spec.Template.Spec, claim), "ReplicaSet %s mounts %s", rs.Name, claim)
		}
	}
	// The running server keeps running.
	assert.Equal(t, int32(1), deployment(t, ns, "running").Status.AvailableReplicas)
	// Never touched: same resourceVersion, no owner, no label of ours.
	for _, c := range []*corev1.PersistentVolumeClaim{fresh, running} {
		now, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, c.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, c.ResourceVersion, now.ResourceVersion, "%s was written", c.Name)
		assert.Empty(t, now.OwnerReferences)
		assert.Equal(t, map[string]string{"owner": "another-app"}, now.Labels)
	}
}

// A spec change rolls the pods while the Deployment keeps its replica available: Ready
// and DeploymentReady never flip, Ready's lastTransitionTime stays, and Progressing shows
// the rollout until it is complete.
func TestRolloutKeepsReady(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	create(t, llsd(ns, "app"))
	l := waitReady(t, ns, "app")
	readySince := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionReady).LastTransitionTime

	w, err := env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=app", ResourceVersion: l.ResourceVersion,
	})
	require.NoError(t, err)
	defer w.Stop()

	edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "ROLL", Value: "1"}}
	})
	sawRollingOut := false
	timeout := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "the watch ended")
			if ev.Type != watch.Modified {
				continue
			}
			got := ev.Object.(*v1alpha1.LlamaStackDistribution)
			for _, ct := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionDeploymentReady} {
				c := meta.FindStatusCondition(got.Status.Conditions, ct)
				require.NotNil(t, c)
				assert.Equal(t, metav1.ConditionTrue, c.Status, "%s flipped during the rollout: %s", ct, c.Message)
			}
			assert.Equal(t, readySince, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).LastTransitionTime)
			assert.Equal(t, v1alpha1.PhaseReady, got.Status.Phase)
			p := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionProgressing)
			require.NotNil(t, p)
			if p.Reason == v1alpha1.ReasonRollingOut {
				sawRollingOut = true
			}
			done = got.Status.ObservedGeneration == got.Generation && p.Reason == v1alpha1.ReasonRolloutComplete && sawRollingOut
		case <-timeout:
			t.Fatal("the rollout did not complete within 60s")
		}
	}
	d := deployment(t, ns, "app")
	v, _ := envValue(server(d), "ROLL")
	assert.Equal(t, "1", v)
	assert.Equal(t, d.Generation, d.Status.ObservedGeneration)
	assert.True(t, d.Status.UpdatedReplicas == 1 && d.Status.AvailableReplicas >= 1, "%+v", d.Status)
}
