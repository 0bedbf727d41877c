package children

import (
	"context"

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

// WriteLog are the children one sync created and updated, in the order written.
type WriteLog struct {
	Created, Updated []string
}

type childWriteLogKey struct{}

// WithWriteLog returns a context that collects the child writes of one sync, and the
// collection to record at its end.
func WithWriteLog(ctx context.Context) (context.Context, *WriteLog) {
	w := &WriteLog{}
	return context.WithValue(ctx, childWriteLogKey{}, w), w
}

// childWritten records that the sync of l wrote a child: in the sync's collection
// (recorded on the same CR, the one the sync is for), or at once as its own Event
// when the context has none.
func childWritten(ctx context.Context, recorder record.EventRecorder, l *v1alpha2.LlamaStackDistribution, created bool, kind, name string) {
	w, _ := ctx.Value(childWriteLogKey{}).(*WriteLog)
	what := kind + " " + name
	switch {
	case w == nil:
		recorder.Event(l, corev1.EventTypeNormal, WriteReason(created), WriteReason(created)+" "+what)
	case created:
		w.Created = append(w.Created, what)
	default:
		w.Updated = append(w.Updated, what)
	}
}

// WriteReason is the reason of the Event of a child created, or updated.
func WriteReason(created bool) string {
	if created {
		return "Created"
	}
	return "Updated"
}
