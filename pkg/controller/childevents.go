package controller

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// A sync that creates or updates several children records one Event per verb for them
// ("Created PersistentVolumeClaim app-pvc, Service app-service, Deployment app"), not one
// per child: the same news in a third of the writes when a CR is new (the API server
// stores every Event), and one line in `kubectl describe`. The writes are collected in
// a context given to ensureChildren only (not to the prober or anything that outlives
// it) and recorded when ensureChildren returns, whichever way, before the status write
// and its Events.

// childWriteLog are the children one sync created and updated, in the order written.
type childWriteLog struct {
	created, updated []string
}

type childWriteLogKey struct{}

// withChildWriteLog returns a context that collects the child writes of one sync, and the
// collection to pass to recordChildWrites at its end.
func withChildWriteLog(ctx context.Context) (context.Context, *childWriteLog) {
	w := &childWriteLog{}
	return context.WithValue(ctx, childWriteLogKey{}, w), w
}

// childWritten records that the sync of l wrote a child: in the sync's collection (which
// recordChildWrites records on the same CR, the one the sync is for), or at once as its
// own Event when the context has none.
func childWritten(ctx context.Context, recorder record.EventRecorder, l *v1alpha2.LlamaStackDistribution, created bool, kind, name string) {
	w, _ := ctx.Value(childWriteLogKey{}).(*childWriteLog)
	what := kind + " " + name
	switch {
	case w == nil:
		recorder.Event(l, corev1.EventTypeNormal, childWriteReason(created), childWriteReason(created)+" "+what)
	case created:
		w.created = append(w.created, what)
	default:
		w.updated = append(w.updated, what)
	}
}

// recordChildWrites records the collected writes of the sync of l: an Event for those
// created and one for those updated.
func (c *Controller) recordChildWrites(l *v1alpha2.LlamaStackDistribution, w *childWriteLog) {
	for _, batch := range []struct {
		created bool
		whats   []string
	}{{true, w.created}, {false, w.updated}} {
		if len(batch.whats) > 0 {
			reason := childWriteReason(batch.created)
			c.recorder.Event(l, corev1.EventTypeNormal, reason, reason+" "+strings.Join(batch.whats, ", "))
		}
	}
}

func childWriteReason(created bool) string {
	if created {
		return "Created"
	}
	return "Updated"
}
