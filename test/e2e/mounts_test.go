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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// emptyDirAt adds a podOverrides emptyDir volume mounted at path.
func emptyDirAt(name, path string) func(*v1alpha1.LlamaStackDistribution) {
	return func(l *v1alpha1.LlamaStackDistribution) {
		if l.Spec.Server.PodOverrides == nil {
			l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{}
		}
		o := l.Spec.Server.PodOverrides
		o.Volumes = append(o.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		o.VolumeMounts = append(o.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path})
	}
}

// warningEvent waits for a Warning Event of the CR with that reason and returns it.
func warningEvent(t *testing.T, ns, name, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	eventually(t, 10*time.Second, "a Warning Event "+reason, func(ctx context.Context) (bool, error) {
		evs, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && e.InvolvedObject.Name == name {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// Storage at /.llama/ and a podOverrides mount at /.llama are one directory. The API
// server compares mount paths as strings and accepts such a Deployment (one volume would
// hide the other, and the CR would go Ready); the controller reports it instead.
func TestSameMountDirectoryIsReported(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()

	// What the API server itself accepts.
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "probe"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "x:1", VolumeMounts: []corev1.VolumeMount{
						{Name: "a", MountPath: "/.llama/"}, {Name: "b", MountPath: "/.llama"},
					}}},
					Volumes: []corev1.Volume{
						{Name: "a", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "b", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
	_, err := env.kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err, "the API server refuses mounts at /.llama/ and /.llama: the controller's check would be redundant")

	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{MountPath: "/.llama/"}
	}, emptyDirAt("scratch", "/.llama")))

	l := waitCondition(t, ns, "app", v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonResourceInvalid)
	assert.Equal(t, v1alpha1.PhaseFailed, l.Status.Phase)
	assert.False(t, meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha1.ConditionReady))
	want := `two volumes would be mounted at one directory, /.llama, of the server container: ` +
		`the storage volume "lls-storage" at "/.llama/" (spec.workload.storage.mountPath; v1alpha1 spec.server.storage.mountPath) and ` +
		`spec.workload.overrides.volumeMounts[0] (volume "scratch"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "/.llama"`
	assert.Contains(t, findCondition(l, v1alpha1.ConditionDeploymentReady).Message, want)
	assert.Contains(t, warningEvent(t, ns, "app", v1alpha1.ReasonResourceInvalid).Message, want)
	_, err = env.kube.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a Deployment was made: %v", err)
}

// A podOverrides mount inside the storage directory is legal: the CR becomes Ready with
// both mounts, and VolumeMountWarning says what is hidden until the mount moves out.
func TestNestedMountIsAWarning(t *testing.T) {
	ns := newNamespace(t)
	create(t, llsd(ns, "app", emptyDirAt("data", "/.llama/data")))

	waitReady(t, ns, "app")
	l := waitCondition(t, ns, "app", v1alpha1.ConditionVolumeMountWarning, metav1.ConditionTrue, v1alpha1.ReasonNestedMountPaths)
	want := `spec.workload.overrides.volumeMounts[0] (volume "data"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "/.llama/data" hides the path "data" inside the storage volume "lls-storage" at "/.llama"`
	assert.Contains(t, findCondition(l, v1alpha1.ConditionVolumeMountWarning).Message, want)
	assert.Contains(t, warningEvent(t, ns, "app", v1alpha1.ReasonNestedMountPaths).Message, want)
	var paths []string
	for _, m := range server(deployment(t, ns, "app")).VolumeMounts {
		paths = append(paths, m.MountPath)
	}
	assert.Equal(t, []string{"/.llama", "/.llama/data"}, paths)

	edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.PodOverrides.VolumeMounts[0].MountPath = "/data"
	})
	eventually(t, 30*time.Second, "VolumeMountWarning is removed", func(ctx context.Context) (bool, error) {
		l, err := env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return l.Status.ObservedGeneration == l.Generation && findCondition(l, v1alpha1.ConditionVolumeMountWarning) == nil, nil
	})
	waitReady(t, ns, "app")
}
