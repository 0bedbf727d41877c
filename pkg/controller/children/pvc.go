package children

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// NewPVC builds the claim holding the server's data: storage.size or 10Gi, the storage
// class if one is named (else the cluster default applies), and the access modes or
// ReadWriteOnce.
func NewPVC(l *v1alpha2.LlamaStackDistribution) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "PersistentVolumeClaim"},
		ObjectMeta: llsd.ChildObjectMeta(l, llsd.PVCName(l)),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: StorageAccessModes(l),
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: StorageSize(l)},
			},
		},
	}
	if s := l.Spec.Workload.Storage; s != nil && s.StorageClassName != nil {
		pvc.Spec.StorageClassName = ptr.To(*s.StorageClassName)
	}
	return pvc
}

// StorageAccessModes are the claim's access modes: a copy of storage.accessModes, or
// ReadWriteOnce.
func StorageAccessModes(l *v1alpha2.LlamaStackDistribution) []corev1.PersistentVolumeAccessMode {
	if s := l.Spec.Workload.Storage; s != nil && len(s.AccessModes) > 0 {
		return slices.Clone(s.AccessModes)
	}
	return []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
}

// SharedReadWriteOnce tells whether single-node storage is combined with more than one
// pod: pods scheduled to another node cannot mount it.
func SharedReadWriteOnce(l *v1alpha2.LlamaStackDistribution, pvc *corev1.PersistentVolumeClaim) bool {
	modes := StorageAccessModes(l)
	if pvc != nil && len(pvc.Spec.AccessModes) > 0 {
		modes = pvc.Spec.AccessModes
	}
	single := slices.Contains(modes, corev1.ReadWriteOnce) || slices.Contains(modes, corev1.ReadWriteOncePod)
	return single && !slices.Contains(modes, corev1.ReadWriteMany) &&
		(llsd.SpecReplicas(l) > 1 || l.Spec.Workload.Autoscaling != nil)
}

// StorageSize is the requested size of the claim: a copy of storage.size, or 10Gi.
func StorageSize(l *v1alpha2.LlamaStackDistribution) resource.Quantity {
	if s := l.Spec.Workload.Storage; s != nil && s.Size != nil {
		return s.Size.DeepCopy()
	}
	return resource.MustParse(llsd.DefaultStorageSize)
}
