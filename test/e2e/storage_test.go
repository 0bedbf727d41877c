//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// storage.size grows the claim when its StorageClass allows expansion, a smaller size is
// refused with a condition, and a class that does not allow expansion is reported.
func TestStorageExpansion(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	class := ns + "-expandable"
	_, err := env.kube.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: class},
		Provisioner:          "kubernetes.io/no-provisioner",
		AllowVolumeExpansion: ptrTo(true),
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.kube.StorageV1().StorageClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-pv"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              class,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
		},
	}
	_, err = env.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})

	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{Size: ptrTo(resource.MustParse("10Gi")), StorageClassName: ptrTo(class)}
	}))
	waitReady(t, ns, "app")

	edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage.Size = ptrTo(resource.MustParse("15Gi"))
	})
	eventually(t, 30*time.Second, "the claim asks for 15Gi", func(ctx context.Context) (bool, error) {
		pvc, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "app-pvc", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		return size.Cmp(resource.MustParse("15Gi")) == 0, nil
	})
	// There is no volume resizer here: the claim stays at 10Gi and the CR says so.
	l := waitCondition(t, ns, "app", v1alpha1.ConditionStorageInSync, metav1.ConditionFalse, v1alpha1.ReasonResizing)
	assert.Contains(t, findCondition(l, v1alpha1.ConditionStorageInSync).Message, "15Gi")

	edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage.Size = ptrTo(resource.MustParse("5Gi"))
	})
	waitCondition(t, ns, "app", v1alpha1.ConditionStorageInSync, metav1.ConditionFalse, v1alpha1.ReasonShrinkRefused)
	pvc, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "app-pvc", metav1.GetOptions{})
	require.NoError(t, err)
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	assert.Equal(t, "15Gi", size.String())
}

// Without a StorageClass that allows expansion, the API server refuses to grow the claim:
// the CR reports it once and the controller does not retry on every sync.
func TestStorageExpansionRefusedByTheServer(t *testing.T) {
	ns := newNamespace(t)
	createPV(t, ns+"-pv", "10Gi")
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
	}))
	waitReady(t, ns, "app")
	edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage.Size = ptrTo(resource.MustParse("20Gi"))
	})
	l := waitCondition(t, ns, "app", v1alpha1.ConditionStorageInSync, metav1.ConditionFalse, v1alpha1.ReasonResizeRefused)
	t.Log(findCondition(l, v1alpha1.ConditionStorageInSync).Message)
	assert.Equal(t, v1alpha1.PhaseReady, l.Status.Phase, "the server keeps running")
}
