package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// newPVC builds the claim holding the server's data: storage.size or 10Gi, the storage
// class if one is named (else the cluster default applies), and the access modes or
// ReadWriteOnce.
func newPVC(l *v1alpha1.LlamaStackDistribution) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "PersistentVolumeClaim"},
		ObjectMeta: childObjectMeta(l, pvcName(l)),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: storageAccessModes(l),
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: storageSize(l)},
			},
		},
	}
	if s := l.Spec.Server.Storage; s != nil && s.StorageClassName != nil {
		pvc.Spec.StorageClassName = ptr.To(*s.StorageClassName)
	}
	return pvc
}

// storageAccessModes are the claim's access modes: a copy of storage.accessModes, or
// ReadWriteOnce.
func storageAccessModes(l *v1alpha1.LlamaStackDistribution) []corev1.PersistentVolumeAccessMode {
	if s := l.Spec.Server.Storage; s != nil && len(s.AccessModes) > 0 {
		return slices.Clone(s.AccessModes)
	}
	return []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
}

// sharedReadWriteOnce tells whether single-node storage is combined with more than one
// pod: pods scheduled to another node cannot mount it.
func sharedReadWriteOnce(l *v1alpha1.LlamaStackDistribution, pvc *corev1.PersistentVolumeClaim) bool {
	modes := storageAccessModes(l)
	if pvc != nil && len(pvc.Spec.AccessModes) > 0 {
		modes = pvc.Spec.AccessModes
	}
	single := slices.Contains(modes, corev1.ReadWriteOnce) || slices.Contains(modes, corev1.ReadWriteOncePod)
	return single && !slices.Contains(modes, corev1.ReadWriteMany) &&
		(l.Spec.Replicas > 1 || l.Spec.Server.Autoscaling != nil)
}

// storageSync is the StorageInSync condition found by ensurePVC.
type storageSync struct {
	inSync          bool
	reason, message string
}

// ensurePVC creates the claim, and later only expands it: a claim never shrinks, its
// class and access modes never change, and the controller never deletes it (it holds the
// user's data). What cannot be applied is reported in the StorageInSync condition.
// previous is the CR's current StorageInSync condition: an expansion the API server
// refused is not tried again until the requested size changes.
func (c *Controller) ensurePVC(ctx context.Context, l *v1alpha1.LlamaStackDistribution, previous *metav1.Condition) (*corev1.PersistentVolumeClaim, storageSync, error) {
	ok := storageSync{inSync: true, reason: v1alpha1.ReasonStorageInSync, message: "The PersistentVolumeClaim matches spec.server.storage"}
	name := pvcName(l)
	cur, found, err := c.pvcs.current(ctx, l.Namespace, name)
	if err != nil {
		return nil, ok, err
	}
	desired := newPVC(l)
	if !found {
		ac, err := toApplyConfiguration[coreac.PersistentVolumeClaimApplyConfiguration](desired)
		if err != nil {
			return nil, ok, err
		}
		pvc, err := c.pvcs.write(ctx, c, l, ac, l.Namespace, name, false)
		return pvc, ok, err
	}
	if !isControlledBy(cur, l) {
		return cur, ok, &notOwnedError{kind: "PersistentVolumeClaim", namespace: l.Namespace, name: name}
	}
	owned, err := c.pvcs.extract(cur, FieldManager)
	if err != nil {
		return nil, ok, fmt.Errorf("extracting our fields of PersistentVolumeClaim %s/%s: %w", l.Namespace, name, err)
	}

	state := ok
	// Class and access modes are immutable: keep what the claim was made with.
	var ownedClass *string
	var ownedModes []corev1.PersistentVolumeAccessMode
	if owned.Spec != nil {
		ownedClass, ownedModes = owned.Spec.StorageClassName, owned.Spec.AccessModes
	}
	if !slices.Equal(ownedModes, desired.Spec.AccessModes) ||
		desired.Spec.StorageClassName != nil && ptr.Deref(cur.Spec.StorageClassName, "") != *desired.Spec.StorageClassName {
		state = storageSync{reason: v1alpha1.ReasonStorageFieldImmutable, message: fmt.Sprintf(
			"storageClassName and accessModes cannot change once the claim exists; PersistentVolumeClaim %s keeps class %q and access modes %v (delete it to make a new one, which loses its data)",
			name, ptr.Deref(cur.Spec.StorageClassName, ""), cur.Spec.AccessModes)}
	}
	desired.Spec.StorageClassName, desired.Spec.AccessModes = ownedClass, ownedModes
	if len(ownedModes) == 0 {
		desired.Spec.AccessModes = cur.Spec.AccessModes
	}

	// The size only grows.
	want := storageSize(l)
	have := cur.Spec.Resources.Requests[corev1.ResourceStorage]
	if want.Cmp(have) < 0 {
		state = storageSync{reason: v1alpha1.ReasonShrinkRefused, message: fmt.Sprintf(
			"storage.size %s is smaller than PersistentVolumeClaim %s (%s): a claim cannot shrink, so it keeps %s",
			want.String(), name, have.String(), have.String())}
		desired.Spec.Resources.Requests[corev1.ResourceStorage] = have.DeepCopy()
	}

	ac, err := toApplyConfiguration[coreac.PersistentVolumeClaimApplyConfiguration](desired)
	if err != nil {
		return nil, ok, err
	}
	if equality.Semantic.DeepEqual(owned, ac) {
		return cur, resizeState(cur, state), nil
	}
	refusedPrefix := fmt.Sprintf("Expanding PersistentVolumeClaim %s to %s was refused", name, want.String())
	if previous != nil && previous.Reason == v1alpha1.ReasonResizeRefused && strings.HasPrefix(previous.Message, refusedPrefix) {
		return cur, storageSync{reason: previous.Reason, message: previous.Message}, nil
	}
	pvc, err := c.pvcs.write(ctx, c, l, ac, l.Namespace, name, true)
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		// The API server's own words only, not our wrapping of them.
		why := err.Error()
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			why = status.Status().Message
		}
		hint := " (does its StorageClass allow volume expansion?)"
		if strings.Contains(why, "exceeded quota") {
			hint = " (a ResourceQuota)"
		}
		return cur, storageSync{reason: v1alpha1.ReasonResizeRefused, message: fmt.Sprintf(
			"%s%s: %s", refusedPrefix, hint, why)}, nil
	}
	if err != nil {
		return nil, ok, err
	}
	return pvc, resizeState(pvc, state), nil
}

// resizeState reports an expansion still under way (requested above the capacity).
func resizeState(pvc *corev1.PersistentVolumeClaim, state storageSync) storageSync {
	if !state.inSync {
		return state
	}
	requested := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity, known := pvc.Status.Capacity[corev1.ResourceStorage]
	if known && pvc.Status.Phase == corev1.ClaimBound && capacity.Cmp(requested) < 0 {
		return storageSync{reason: v1alpha1.ReasonResizing, message: fmt.Sprintf(
			"PersistentVolumeClaim %s is being expanded to %s (now %s)", pvc.Name, requested.String(), capacity.String())}
	}
	return state
}

// storageSize is the requested size of the claim: a copy of storage.size, or 10Gi.
func storageSize(l *v1alpha1.LlamaStackDistribution) resource.Quantity {
	if s := l.Spec.Server.Storage; s != nil && s.Size != nil {
		return s.Size.DeepCopy()
	}
	return resource.MustParse(defaultStorageSize)
}
