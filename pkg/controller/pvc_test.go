package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

func TestNewPVC(t *testing.T) {
	tests := map[string]struct {
		storage  *v1alpha1.StorageSpec
		wantSize string
	}{
		"size given": {
			storage:  &v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("20Gi"))},
			wantSize: "20Gi",
		},
		"decimal size given": {
			storage:  &v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("500M"))},
			wantSize: "500M",
		},
		"no size defaults to 10Gi": {
			storage:  &v1alpha1.StorageSpec{MountPath: "/data"},
			wantSize: "10Gi",
		},
		"no storage defaults to 10Gi": {
			storage:  nil,
			wantSize: "10Gi",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := childTestCR(func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = tc.storage })
			before := l.DeepCopy()

			got := newPVC(l)

			assert.Equal(t, wantChildMeta("demo-pvc"), got.ObjectMeta)
			require.Len(t, got.Spec.Resources.Requests, 1)
			size := got.Spec.Resources.Requests[corev1.ResourceStorage]
			assert.Equal(t, 0, size.Cmp(resource.MustParse(tc.wantSize)), "size %s, want %s", size.String(), tc.wantSize)
			assert.Equal(t, tc.wantSize, size.String())

			// Everything else is exactly: ReadWriteOnce, no class, mode, selector or limits.
			spec := got.Spec.DeepCopy()
			spec.Resources.Requests = nil
			assert.Equal(t, &corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			}, spec)
			assert.Zero(t, got.Status)

			// The size is a copy: growing the child's leaves the CR's as it was.
			size.Add(resource.MustParse("1Gi"))
			got.Spec.Resources.Requests[corev1.ResourceStorage] = size
			assert.Equal(t, before, l, "the CR must not be mutated")
		})
	}
}
