package children

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

			got := NewPVC(hub(l))

			// Exactly: the size, ReadWriteOnce, no class, mode, selector or limits.
			want := &corev1.PersistentVolumeClaim{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: wantChildMeta("demo-pvc"),
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(tc.wantSize)},
					},
				},
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("NewPVC() mismatch (-want +got):\n%s", d)
			}
			// cmp compares quantities by value (Quantity.Equal): the size keeps its format too.
			size := got.Spec.Resources.Requests[corev1.ResourceStorage]
			assert.Equal(t, tc.wantSize, size.String())

			// The size is a copy: growing the child's leaves the CR's as it was.
			size.Add(resource.MustParse("1Gi"))
			got.Spec.Resources.Requests[corev1.ResourceStorage] = size
			assert.Equal(t, before, l, "the CR must not be mutated")
		})
	}
}
