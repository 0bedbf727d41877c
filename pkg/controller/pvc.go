package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// newPVC builds the ReadWriteOnce claim holding the server's data, of storage.size or 10Gi.
// No storage class is set, so the cluster default applies.
func newPVC(l *v1alpha1.LlamaStackDistribution) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "PersistentVolumeClaim"},
		ObjectMeta: childObjectMeta(l, pvcName(l)),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: storageSize(l)},
			},
		},
	}
}

// storageSize is the requested size of the claim: a copy of storage.size, or 10Gi.
func storageSize(l *v1alpha1.LlamaStackDistribution) resource.Quantity {
	if s := l.Spec.Server.Storage; s != nil && s.Size != nil {
		return s.Size.DeepCopy()
	}
	return resource.MustParse(defaultStorageSize)
}
