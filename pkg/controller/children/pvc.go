package children

import (
	"fmt"
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

// StorageSync is the StorageInSync condition the controller's ensure of the claim
// found: whether the claim is as the spec asks, else why not.
type StorageSync struct {
	InSync          bool
	Reason, Message string
}

// FitPVC makes desired applicable to the existing claim cur: its class and access modes
// are immutable, so desired keeps cur's, and its size only grows. It returns the
// StorageInSync state: what of the spec could not be applied.
func FitPVC(l *v1alpha2.LlamaStackDistribution, desired, cur *corev1.PersistentVolumeClaim, ownClass bool) StorageSync {
	name := cur.Name
	state := StorageSync{InSync: true, Reason: v1alpha2.ReasonStorageInSync, Message: "The PersistentVolumeClaim matches spec.workload.storage (v1alpha1 spec.server.storage)"}
	// Compared with the claim itself, not with what our manager owns: a claim made by
	// another manager (the upstream operator) with the same class and modes is in sync.
	if !slices.Equal(cur.Spec.AccessModes, desired.Spec.AccessModes) ||
		desired.Spec.StorageClassName != nil && ptr.Deref(cur.Spec.StorageClassName, "") != *desired.Spec.StorageClassName {
		state = StorageSync{Reason: v1alpha2.ReasonStorageFieldImmutable, Message: fmt.Sprintf(
			"storageClassName and accessModes cannot change once the claim exists; PersistentVolumeClaim %s keeps class %q and access modes %v (delete it to make a new one, which loses its data)",
			name, ptr.Deref(cur.Spec.StorageClassName, ""), cur.Spec.AccessModes)}
	}
	// Applying the claim's own values changes nothing, whoever set them. The class is
	// applied only when asked for or already ours: one we stopped applying would be
	// removed, which the API server refuses; one the default StorageClass admission set
	// is left to it.
	desired.Spec.AccessModes = slices.Clone(cur.Spec.AccessModes)
	if desired.Spec.StorageClassName != nil || ownClass {
		desired.Spec.StorageClassName = nil
		if cur.Spec.StorageClassName != nil {
			desired.Spec.StorageClassName = ptr.To(*cur.Spec.StorageClassName)
		}
	}

	want := StorageSize(l)
	have := cur.Spec.Resources.Requests[corev1.ResourceStorage]
	if want.Cmp(have) < 0 {
		state = StorageSync{Reason: v1alpha2.ReasonShrinkRefused, Message: fmt.Sprintf(
			"storage.size %s is smaller than PersistentVolumeClaim %s (%s): a claim cannot shrink, so it keeps %s",
			want.String(), name, have.String(), have.String())}
		desired.Spec.Resources.Requests[corev1.ResourceStorage] = have.DeepCopy()
	}
	return state
}
