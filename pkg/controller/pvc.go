package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// ensurePVC creates the claim, and later only expands it: a claim never shrinks, its
// class and access modes never change, and the controller never deletes it (it holds the
// user's data). What cannot be applied is reported in the StorageInSync condition.
// previous is the CR's current StorageInSync condition: an expansion the API server
// refused is not tried again until the CR's spec changes.
func (c *Controller) ensurePVC(ctx context.Context, l *v1alpha2.LlamaStackDistribution, previous *metav1.Condition) (*corev1.PersistentVolumeClaim, children.StorageSync, error) {
	ok := children.StorageSync{InSync: true, Reason: v1alpha2.ReasonStorageInSync, Message: "The PersistentVolumeClaim matches spec.workload.storage (v1alpha1 spec.server.storage)"}
	state := ok
	refused, existed := false, false
	pvc, err := c.pvcs.EnsureWith(ctx, l, children.EnsureOptions[*corev1.PersistentVolumeClaim]{
		Name: llsd.PVCName(l),
		Build: func(_ context.Context, cur *corev1.PersistentVolumeClaim, found bool) (metav1.Object, error) {
			desired := children.NewPVC(l)
			if !found {
				return desired, nil
			}
			existed = true
			owned, err := c.pvcs.Extract(cur, FieldManager)
			if err != nil {
				return nil, fmt.Errorf("extracting our fields of PersistentVolumeClaim %s/%s: %w", cur.Namespace, cur.Name, err)
			}
			state = children.FitPVC(l, desired, cur, owned.Spec != nil && owned.Spec.StorageClassName != nil)
			if previous != nil && previous.Reason == v1alpha2.ReasonResizeRefused && previous.ObservedGeneration == l.Generation &&
				!pvcRequestFits(desired, cur) {
				// Refused for this very spec: not asked again until it changes.
				refused = true
				state = children.StorageSync{Reason: previous.Reason, Message: previous.Message}
				return nil, nil
			}
			return desired, nil
		},
	})
	if refused {
		return pvc, state, nil
	}
	if existed && (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) {
		// An expansion refused. The API server's own words only, not our wrapping of them.
		why := err.Error()
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			why = status.Status().Message
		}
		hint := " (does its StorageClass allow volume expansion?)"
		if strings.Contains(why, "exceeded quota") {
			hint = " (a ResourceQuota)"
		}
		want := children.StorageSize(l)
		return pvc, children.StorageSync{Reason: v1alpha2.ReasonResizeRefused, Message: fmt.Sprintf(
			"Expanding PersistentVolumeClaim %s to %s was refused%s: %s", llsd.PVCName(l), want.String(), hint, why)}, nil
	}
	if err != nil {
		return pvc, ok, err
	}
	return pvc, resizeState(pvc, state), nil
}

// pvcRequestFits tells whether the claim already requests the size desired asks for.
func pvcRequestFits(desired, cur *corev1.PersistentVolumeClaim) bool {
	want := desired.Spec.Resources.Requests[corev1.ResourceStorage]
	have := cur.Spec.Resources.Requests[corev1.ResourceStorage]
	return want.Cmp(have) <= 0
}

// resizeState reports an expansion still under way (requested above the capacity).
func resizeState(pvc *corev1.PersistentVolumeClaim, state children.StorageSync) children.StorageSync {
	if !state.InSync {
		return state
	}
	requested := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity, known := pvc.Status.Capacity[corev1.ResourceStorage]
	if known && pvc.Status.Phase == corev1.ClaimBound && capacity.Cmp(requested) < 0 {
		return children.StorageSync{Reason: v1alpha2.ReasonResizing, Message: fmt.Sprintf(
			"PersistentVolumeClaim %s is being expanded to %s (now %s)", pvc.Name, requested.String(), capacity.String())}
	}
	return state
}
