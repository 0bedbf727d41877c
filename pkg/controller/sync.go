package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/probe"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// sync converges one CR: it resolves its inputs, ensures every child in a fixed order,
// and writes the status when it changed.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	logger.V(4).Info("Started syncing")
	defer func() { logger.V(4).Info("Finished syncing", "duration", time.Since(start)) }()

	cached, err := c.llsdLister.LlamaStackDistributions(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return nil // deleted: its children go with it (garbage collection)
	}
	if err != nil {
		return err
	}
	// The status as last written: the cache may not have the write yet.
	l := c.statusWrites.sinceCached(cached)
	now := metav1.Now()
	// The ready gauge follows what the CR reports, whichever way the sync ends.
	reported := l.Status
	defer func() { setReadyGauge(key, reported) }()
	write := func(st v1alpha2.LlamaStackDistributionStatus, problems []fault.Problem) error {
		if err := c.updateStatus(ctx, l, st, problems); err != nil {
			return err
		}
		reported = st
		return nil
	}

	if l.DeletionTimestamp != nil {
		return write(c.calculateStatus(l, status.Observed{}, now), nil)
	}

	// The children's writes are recorded in one Event per verb, before the status
	// write's Events; the context that collects them goes no further than the children.
	childCtx, written := children.WithWriteLog(ctx)
	obs, err := c.ensureChildren(childCtx, l)
	c.recordChildWrites(l, written)
	if err != nil {
		if real := fault.WithoutConflicts(err); real != nil && !fault.NamespaceTerminating(err) && ctx.Err() == nil {
			// One failed request is retried quietly; one that keeps failing is reported,
			// as upstream did, while the retries go on.
			if c.failingFor(key, l.UID, c.clock.Now()) >= persistentErrorAfter {
				obs.Problems = append(obs.Problems, fault.Problem{Reason: v1alpha2.ReasonDeploymentFailed, Message: "Resource reconciliation failed: " + real.Error()})
				if serr := write(c.calculateStatus(l, obs, now), obs.Problems); serr != nil {
					logger.V(2).Info("Could not report the failure in status", "err", serr)
				}
			}
		}
		return err
	}
	c.failing.Delete(key)
	// Read also while the Deployment is available: a rollout's new pod may be stuck
	// while the old ones serve (rollout.Progress).
	obs.Pod = c.rollouts.PodProblemFor(l, obs.Deployment)
	if slices.ContainsFunc(obs.Problems, func(p fault.Problem) bool { return p.Reason == v1alpha2.ReasonResourceNotOwned }) {
		// No event announces that someone else's object went away: look again later.
		c.scheduleRecheck(key)
	} else {
		c.forgetRecheck(key)
	}
	firstAnswerDue := c.askServer(ctx, key, l, &obs)
	st := c.calculateStatus(l, obs, now)
	if firstAnswerDue && onlyTurnsReady(l.Status, st) {
		// The server's first answer is on its way (within the probe timeout) and brings
		// the CR back: Ready and the answer are written together, in one write.
		logger.V(4).Info("Waiting for the server's first answer to report Ready")
		return nil
	}
	return write(st, obs.Problems)
}

// askServer records in obs the server's last answer to the prober, and tells whether
// its first answer is still due. Only a serving server behind our own Service is asked.
func (c *Controller) askServer(ctx context.Context, key cache.ObjectName, l *v1alpha2.LlamaStackDistribution, obs *status.Observed) (firstAnswerDue bool) {
	if !c.prober.Enabled() {
		return false
	}
	switch {
	case !status.Serving(obs.Deployment):
		// Answers from before an outage say nothing of the server that comes back.
		c.prober.Forget(key)
	case obs.Service == nil || !llsd.IsControlledBy(obs.Service, l):
		// Only our own Service is asked: one of someone else's under its name is not
		// ours to call.
		c.prober.Forget(key)
	default:
		// The server answers for itself, off the workers, on the prober's schedule;
		// an answer that changes brings the CR back.
		tls := c.probeTLS(ctx, l, obs.Deployment)
		if res, ok := c.prober.Observe(ctx, key, l.UID, probeService(l), probe.StateOf(l.Generation, obs.Deployment, tls), tls); ok {
			obs.Probe = &res
		} else {
			return true
		}
	}
	return false
}

// persistentErrorAfter is how long a child's writes keep failing before the CR reports
// it: a single 500, timeout or 429 does not flip Ready.
const persistentErrorAfter = 30 * time.Second

// failure is when the syncs of one CR (by UID) started failing.
type failure struct {
	uid   types.UID
	since time.Time
}

// failingFor records that the sync of key failed at now and returns for how long it has
// been failing without a success in between.
func (c *Controller) failingFor(key cache.ObjectName, uid types.UID, now time.Time) time.Duration {
	v, loaded := c.failing.LoadOrStore(key, failure{uid: uid, since: now})
	if f := v.(failure); loaded && f.uid == uid {
		return now.Sub(f.since)
	}
	c.failing.Store(key, failure{uid: uid, since: now})
	return 0
}

// forget drops everything kept for a CR that is gone: the recheck backoff, the server's
// answers, the CA bundle failure memory, the failure clock, its last status write and its
// ready gauge series.
func (c *Controller) forget(key cache.ObjectName) {
	c.forgetRecheck(key)
	c.prober.Forget(key)
	c.caFailures.Delete(key)
	c.failing.Delete(key)
	c.resolver.Forget(key)
	c.caTrust.Forget(key)
	c.rollouts.Forget(key)
	c.statusWrites.forget(key)
	readyGauge.DeleteLabelValues(key.Namespace, key.Name)
}

// setReadyGauge sets the CR's ready gauge from its reported status.
func setReadyGauge(key cache.ObjectName, st v1alpha2.LlamaStackDistributionStatus) {
	ready := 0.0
	if meta.IsStatusConditionTrue(st.Conditions, v1alpha2.ConditionReady) {
		ready = 1
	}
	readyGauge.WithLabelValues(key.Namespace, key.Name).Set(ready)
}

// ensureChildren resolves the CR's revision and ensures each child. A user error in
// the inputs leaves every child as it is, but for the replica count (scaleHeld); an
// object of someone else's under a child's name blocks only that child.
func (c *Controller) ensureChildren(ctx context.Context, l *v1alpha2.LlamaStackDistribution) (status.Observed, error) {
	var obs status.Observed
	f := &findings{}
	rev := c.resolveRevision(ctx, l, f)
	obs.Generation = generationForStatus(rev.Gen, l)
	c.writeConfigMaps(ctx, l, rev, f)
	f.add(rev.Problems...)
	if f.blocked() {
		// Keep what runs: observe the children without changing them, but scale.
		c.observeChildren(l, rev, &obs)
		c.scaleHeld(ctx, l, &obs, f)
	} else {
		c.applyChildren(ctx, l, rev, &obs, f)
	}
	obs.Problems = f.problems
	return obs, f.err()
}

// observeChildren records the children in obs as they are, for a sync that changes
// nothing.
func (c *Controller) observeChildren(l *v1alpha2.LlamaStackDistribution, rev *revision.Revision, obs *status.Observed) {
	// What runs decides what the children in front of it are asked to be.
	running := c.controlledDeployment(l)
	known := childInputs{cfg: rev.Config, listening: children.ListeningFrom(l, running, revision.ImageServerVersion(rev.Image))}
	c.table.claim.observe(l, known, obs)
	for _, child := range c.table.afterClaim() {
		child.observe(l, known, obs)
	}
}

// applyChildren ensures every child of the revision, in the table's order: the claim,
// then the Deployment's plan, then the others (childTable). The children in front of
// the pods follow what the plan makes them run (a rollback's template included), else
// what runs.
func (c *Controller) applyChildren(ctx context.Context, l *v1alpha2.LlamaStackDistribution, rev *revision.Revision, obs *status.Observed, f *findings) {
	in := childInputs{cfg: rev.Config, rev: rev}
	if rev.TLS != nil {
		in.serverCA = rev.TLS.CA
	}
	claimed := c.table.claim.sync(ctx, l, in, obs)
	f.report(claimed)
	dep := rev.DeploymentInputs(l, c.openShift)
	in.plan = c.planServer(ctx, l, dep, claimed == nil, obs, f)
	running := c.controlledDeployment(l)
	if in.plan != nil && in.plan.desired != nil {
		running = in.plan.desired
	}
	in.listening = children.ListeningFrom(l, running, dep.ServerVersion)
	if children.WantsBackendTLSPolicy(l, in.listening) {
		in.backendCA = c.serverRoots(ctx, l, running)
	}
	for _, child := range c.table.afterClaim() {
		f.reportEach(child.sync(ctx, l, in, obs))
	}
}

// planServer decides the Deployment before any child in front of it is written
// (planDeployment), once its mounts are checked and the claim it mounts is the CR's;
// nil when there is nothing to apply.
func (c *Controller) planServer(ctx context.Context, l *v1alpha2.LlamaStackDistribution, dep revision.Inputs, claimed bool, obs *status.Observed, f *findings) *deploymentPlan {
	obs.MountsChecked, obs.NestedMounts = true, children.PodNestedMounts(l, dep)
	if conflict := children.PodConflict(l, dep); conflict != nil {
		// The API server would reject the Deployment: say why, and keep what runs.
		f.add(conflict)
		return c.holdTemplate(l, f)
	}
	if !claimed {
		return c.holdTemplate(l, f)
	}
	plan, err := c.planDeployment(ctx, l, dep)
	if err != nil {
		f.report(err)
		return nil
	}
	return plan
}

// scaleHeld ensures, while a problem holds the Deployment's template, what follows the
// CR's replica count alone: the Deployment that serves, scaled (holdTemplate), and the
// HPA and PDB. Nothing while no Deployment of the CR's serves.
func (c *Controller) scaleHeld(ctx context.Context, l *v1alpha2.LlamaStackDistribution, obs *status.Observed, f *findings) {
	p := c.holdTemplate(l, f)
	if c.controlledDeployment(l) == nil {
		return
	}
	if p != nil {
		dep, _, err := c.applyDeployment(ctx, l, p)
		if err != nil {
			f.report(err)
			return
		}
		obs.Deployment = dep
	}
	for _, child := range c.table.scaling {
		f.reportEach(child.sync(ctx, l, childInputs{}, obs))
	}
}

// holdTemplate is the plan that only scales the Deployment that serves (planScale),
// and says in the last problem found that the template is held, and what reaches the
// Deployment nonetheless; nil when nothing serves or the HPA keeps the count. While the
// TLS Secret the running pods mount is gone, the count does not grow: a new pod could not
// mount it and would wait for it; it still shrinks.
func (c *Controller) holdTemplate(l *v1alpha2.LlamaStackDistribution, f *findings) *deploymentPlan {
	cur := c.controlledDeployment(l)
	if cur == nil {
		return nil
	}
	replicas, note := llsd.SpecReplicas(l), status.ReplicasNote(l)
	if l.Spec.Workload.Autoscaling == nil && cur.Spec.Replicas != nil && replicas > *cur.Spec.Replicas &&
		slices.ContainsFunc(f.problems, func(p fault.Problem) bool { return p.Reason == v1alpha2.ReasonTLSSecretNotFound }) &&
		mountsSecret(cur, revision.TLSSecretName(l)) {
		replicas = *cur.Spec.Replicas
		note = fmt.Sprintf("its replica count stays at %d until the TLS Secret is back: a new pod could not mount it", replicas)
	}
	if n := len(f.problems); n > 0 {
		f.problems[n-1].Message += "; the Deployment keeps its template, " + note
	}
	return c.planScale(l, replicas)
}

// mountsSecret reports whether the pods of d mount the Secret of that name.
func mountsSecret(d *appsv1.Deployment, name string) bool {
	return name != "" && slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == name
	})
}

// reportEach reports each of the errors err joins (findings.report).
func (f *findings) reportEach(err error) {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			f.report(e)
		}
		return
	}
	f.report(err)
}
