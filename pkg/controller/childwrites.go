package controller

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
)

// recordChildWrites records the collected writes of the sync of l: an Event for those
// created and one for those updated.
func (c *Controller) recordChildWrites(l *v1alpha2.LlamaStackDistribution, w *children.WriteLog) {
	for _, batch := range []struct {
		created bool
		whats   []string
	}{{true, w.Created}, {false, w.Updated}} {
		if len(batch.whats) > 0 {
			reason := children.WriteReason(batch.created)
			c.recorder.Event(l, corev1.EventTypeNormal, reason, reason+" "+strings.Join(batch.whats, ", "))
		}
	}
}
