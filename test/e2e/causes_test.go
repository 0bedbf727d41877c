//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// TestMissingServiceAccountIsReported: a CR whose pods name a ServiceAccount that does
// not exist is not left Initializing with the cause only in a ReplicaSet Event: the
// Deployment's ReplicaFailure reaches the CR (Failed, reason and message, one Warning
// Event); once the ServiceAccount exists it becomes Ready, with one Ready Event.
func TestMissingServiceAccountIsReported(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{ServiceAccountName: "missing-sa"}
	}))
	l := waitCondition(t, ns, "app", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonReplicaFailure)
	assert.Equal(t, v1alpha1.PhaseFailed, l.Status.Phase)
	dr := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionDeploymentReady)
	require.NotNil(t, dr)
	assert.Equal(t, v1alpha1.ReasonReplicaFailure, dr.Reason)
	assert.Contains(t, dr.Message, `serviceaccount "missing-sa" not found`)
	eventually(t, 30*time.Second, "a Warning Event ReplicaFailure on the CR", func(ctx context.Context) (bool, error) {
		return countCREvents(ctx, ns, "app", corev1.EventTypeWarning, v1alpha1.ReasonReplicaFailure) >= 1, nil
	})

	_, err := env.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "missing-sa"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitReadyWithin(t, ns, "app", 2*time.Minute)
	settle(t)
	assert.Equal(t, int32(1), countCREvents(ctx, ns, "app", corev1.EventTypeWarning, v1alpha1.ReasonReplicaFailure), "one Warning for the one failure")
	assert.Equal(t, int32(1), countCREvents(ctx, ns, "app", corev1.EventTypeNormal, v1alpha1.ReasonReady), "one Ready Event for the one transition")
}

// countCREvents counts the Events of one type and reason on the CR, with their counts.
func countCREvents(ctx context.Context, ns, name, eventType, reason string) int32 {
	evs, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return -1
	}
	var n int32
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "LlamaStackDistribution" && e.InvolvedObject.Name == name && e.Type == eventType && e.Reason == reason {
			n += max(e.Count, 1)
		}
	}
	return n
}
