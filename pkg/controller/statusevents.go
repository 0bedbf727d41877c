package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// statusWrite is the controller's last status write of a CR, kept until the cache has it.
type statusWrite struct {
	uid types.UID
	// over are the resourceVersions the writes since the cache last had one were made
	// over: a cached CR at one of them has not seen the last.
	over    []string
	written *v1alpha2.LlamaStackDistribution
}

// lastStatusWrites holds a statusWrite per CR (cache.ObjectName).
type lastStatusWrites struct{ m sync.Map }

// maxStatusWritesOver bounds the writes remembered while the cache has none of them:
// past it, a cached copy from before the oldest is taken for current again (as before
// the writes were kept), and a write over it meets a conflict and is retried.
const maxStatusWritesOver = 8

// stale tells whether cached is a copy of the CR from before w: at a resourceVersion the
// writes were made over. A store that does not version what it keeps (all "") tells it
// by the status instead.
func (w *statusWrite) stale(cached *v1alpha2.LlamaStackDistribution) bool {
	if w.uid != cached.UID || !slices.Contains(w.over, cached.ResourceVersion) {
		return false
	}
	return cached.ResourceVersion != "" || !equality.Semantic.DeepEqual(cached.Status, w.written.Status)
}

// sinceCached is a copy of cached or, when the cache has not seen the controller's last
// status write of the CR yet, of the CR that write returned. A sync that an event brings
// before the cache has the write must compare what it finds with what is stored: with the
// stale copy, a status that went back to what the copy shows (a Secret deleted, reported,
// then put back) would be taken for written, and stay unwritten, and a problem already
// told would be told again.
func (s *lastStatusWrites) sinceCached(cached *v1alpha2.LlamaStackDistribution) *v1alpha2.LlamaStackDistribution {
	key := cache.MetaObjectToName(cached)
	if v, ok := s.m.Load(key); ok {
		if w := v.(*statusWrite); w.stale(cached) {
			return w.written.DeepCopy()
		}
		s.m.CompareAndDelete(key, v)
	}
	return cached.DeepCopy()
}

// seen drops the write kept for the CR once the cache has it, or a later version, unless
// a newer write replaced it meanwhile. (An update event that comes before its write
// returns finds nothing: the entry then goes with the CR's next sync or its deletion.)
func (s *lastStatusWrites) seen(cached *v1alpha2.LlamaStackDistribution) {
	key := cache.MetaObjectToName(cached)
	if v, ok := s.m.Load(key); ok && !v.(*statusWrite).stale(cached) {
		s.m.CompareAndDelete(key, v)
	}
}

// remember keeps written, the CR that a status write over l returned, until the cache has
// it; l is the cached CR or, when the cache has not seen an earlier write, that write.
func (s *lastStatusWrites) remember(l, written *v1alpha2.LlamaStackDistribution) {
	key := cache.MetaObjectToName(l)
	over := []string{l.ResourceVersion}
	if v, ok := s.m.Load(key); ok {
		if w := v.(*statusWrite); w.uid == l.UID && w.written.ResourceVersion == l.ResourceVersion {
			over = append(slices.Clone(w.over), over...)
		}
	}
	if len(over) > maxStatusWritesOver {
		over = over[len(over)-maxStatusWritesOver:]
	}
	s.m.Store(key, &statusWrite{uid: l.UID, over: over, written: written})
}

// forget drops what is kept for the CR of key.
func (s *lastStatusWrites) forget(key cache.ObjectName) { s.m.Delete(key) }

// updateStatus writes the status when it differs from the CR's, then records the Events
// of a phase change and of each new problem: only once the write succeeded, so a
// conflict and its retry cannot record them twice. l is the CR as last written
// (lastStatusWrites.sinceCached).
func (c *Controller) updateStatus(ctx context.Context, l *v1alpha2.LlamaStackDistribution, st v1alpha2.LlamaStackDistributionStatus, problems []fault.Problem) error {
	if equality.Semantic.DeepEqual(l.Status, st) {
		return nil
	}
	updated := l.DeepCopy()
	updated.Status = st
	written, err := c.client.LlamastackV1alpha2().LlamaStackDistributions(l.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	written.ManagedFields = nil // the controller's next write of status sends none either
	c.statusWrites.remember(l, written)
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Updated status", "phase", st.Phase)

	old := status.ReportedProblem(l.Status.Conditions)
	if len(problems) > 0 && (old == nil || old.Message != fault.Message(problems)) {
		// One line per transition, at the default verbosity, for whoever reads the logs.
		logger.Info("LlamaStackDistribution cannot converge until its spec or environment changes",
			"reason", problems[0].Reason, "problems", fault.Message(problems))
		for _, p := range problems {
			c.recorder.Event(l, corev1.EventTypeWarning, p.Reason, p.Message)
		}
	} else if len(problems) == 0 && old != nil {
		logger.Info("LlamaStackDistribution's problem is resolved", "was", old.Reason)
	}
	// Warnings held in conditions: one Event (and log line) each time one appears or
	// changes. A pod's problem is one while the reason and the pod are the same: its
	// message (a scheduler's node counts, a crash's exit) is not a new one. A stuck pod
	// of a rollout (Progressing) is told once, by DeploymentReady when that says it too.
	podStuckInRollout := func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue && status.PodReason(c.Reason) }
	for _, w := range []struct {
		condType string
		bad      func(*metav1.Condition) bool
	}{
		{v1alpha2.ConditionStorageInSync, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionFalse }},
		{v1alpha2.ConditionStorageAccessWarning, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue }},
		{v1alpha2.ConditionVolumeMountWarning, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue }},
		{v1alpha2.ConditionExposed, func(c *metav1.Condition) bool { return c.Status == metav1.ConditionFalse }},
		{v1alpha2.ConditionDeploymentReady, func(c *metav1.Condition) bool { return status.DeploymentStuck([]metav1.Condition{*c}) != nil }},
		{v1alpha2.ConditionProgressing, func(c *metav1.Condition) bool {
			dr := meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionDeploymentReady)
			return podStuckInRollout(c) && (dr == nil || status.DeploymentStuck([]metav1.Condition{*dr}) == nil)
		}},
	} {
		now, was := meta.FindStatusCondition(st.Conditions, w.condType), meta.FindStatusCondition(l.Status.Conditions, w.condType)
		if now != nil && w.bad(now) && status.NewWarning(l.Status.Conditions, was, now, w.bad) {
			logger.Info("LlamaStackDistribution has a warning", "condition", w.condType, "reason", now.Reason, "message", now.Message)
			c.recorder.Event(l, corev1.EventTypeWarning, now.Reason, now.Message)
		} else if was != nil && w.bad(was) && (now == nil || !w.bad(now)) {
			logger.Info("LlamaStackDistribution's warning is resolved", "condition", w.condType, "was", was.Reason)
		}
	}
	if st.Phase != l.Status.Phase && st.Phase == v1alpha2.PhaseReady {
		msg := "LlamaStackDistribution is ready"
		if ready := meta.FindStatusCondition(st.Conditions, v1alpha2.ConditionReady); ready != nil {
			msg = ready.Message
		}
		c.recorder.Event(l, corev1.EventTypeNormal, v1alpha2.ReasonReady, msg)
	}
	return nil
}
