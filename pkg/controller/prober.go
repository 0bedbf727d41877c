package controller

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// ServerProbe configures how the controller reaches running llama-stack servers to read
// their health, version and providers.
type ServerProbe struct {
	// Endpoint returns how to reach a CR's server: ServiceEndpoints when the controller
	// runs in the cluster, ProxyEndpoints outside it. nil disables probing (HealthCheck is
	// then not reported).
	// tls is nil for a server that serves plain HTTP.
	Endpoint func(l *v1alpha2.LlamaStackDistribution, tls *ServerTLS) ServerEndpoint
	// Timeout of each request (default 5s).
	Timeout time.Duration
	// Interval is the base interval between probes of a ready server (default 1 minute):
	// a server whose answers do not change is probed less and less often, up to
	// maxProbeBackoff times this.
	Interval time.Duration
}

// maxProbeBackoff caps the wait between probes of a server whose answers do not change,
// as a multiple of the base interval: 8 minutes with the 1-minute default. The wait
// doubles after each unchanged answer (1, 2, 4, 8, 8, ... base intervals), so an idle
// server is asked about 10 times in its first hour and 7 to 8 times an hour after that,
// instead of 60. What users watch closely is covered otherwise: a server that stops fails
// its readiness probe, which changes its Deployment's status, and that brings the next
// probe at once. What is left to the back-off is a change that nothing else announces (a
// provider's health, the version of a server restarted in place), seen within 8 minutes
// instead of 1.
//
// A failed answer backs off like any other once it repeats: the first failure is a
// change (the wait starts over), but a server whose /v1/health keeps failing is taken
// out of its Service by its readiness probe within about 30 s, and then not probed at
// all until it is back (a change of its Deployment, so a probe at once). What keeps
// failing while the pods stay Ready is the controller's own way to the server: the API
// server's proxy refusing (as under make run, whose kwok pods serve nothing), a
// NetworkPolicy, a missing services/proxy grant. Nothing announces when that is fixed,
// and asking every interval would only cost requests.
const maxProbeBackoff = 8

// probeJitter is the fraction of a wait taken off at random, so that many servers made
// ready together do not stay probed in lockstep. It only shortens a wait: after a change
// the next probe still comes within one base interval.
const probeJitter = 0.1

// probeResult is the last answer of a CR's server.
type probeResult struct {
	uid  types.UID
	info serverInfo
}

// serverState is what a sync knows of a CR's server: when it changes the server may
// answer differently, so it is asked at once and the back-off starts over. It is the
// CR's generation and the Deployment's generation and replica counts, not the
// Deployment's resourceVersion, which also moves on writes that change nothing the
// server does (a label, an annotation, someone's metadata patch). A server that stops
// fails its readiness probe, which lowers the ready and available counts.
type serverState struct {
	generation        int64 // the CR's
	deployment        int64 // the Deployment's generation
	observed          int64 // the Deployment's status.observedGeneration
	replicas, updated int32
	ready, available  int32
	// tls is ServerTLS.key of how the server is reached: a server that turns to HTTPS,
	// or whose certificate authority changes, is reached anew.
	tls string
}

func serverStateOf(l *v1alpha2.LlamaStackDistribution, d *appsv1.Deployment, tls *ServerTLS) serverState {
	s := serverState{generation: l.Generation, tls: tls.key()}
	if d != nil {
		s.deployment, s.observed = d.Generation, d.Status.ObservedGeneration
		s.replicas, s.updated = d.Status.Replicas, d.Status.UpdatedReplicas
		s.ready, s.available = d.Status.ReadyReplicas, d.Status.AvailableReplicas
	}
	return s
}

// probeEntry is what the prober keeps of one CR's server.
type probeEntry struct {
	uid   types.UID
	state serverState
	ep    ServerEndpoint
	// ctx is the context of the sync that last reported on the server: its logger, and
	// cancelled when the controller stops.
	ctx context.Context
	// result is the last answer; nil before the first.
	result *probeResult
	// wait is the wait after the last answer, before jitter.
	wait  time.Duration
	timer clock.Timer
	// again asks for a probe as soon as the one running ends: the server changed while
	// it ran.
	again bool
}

// prober asks each CR's server for its health, version and providers, outside the
// workers, at most one probe per CR at a time. It keeps its own timer per CR for the
// next probe, and enqueues the CR only when an answer differs from the one before: an
// unchanged answer costs the probe and nothing else. Its state is guarded by mu.
type prober struct {
	cfg     ServerProbe
	client  *serverClient
	enqueue func(cache.ObjectName)
	clock   clock.WithDelayedExecution
	// jitter returns a number in [0, 1); tests replace it.
	jitter func() float64

	mu      sync.Mutex
	entries map[cache.ObjectName]*probeEntry
	// inFlight holds the CRs with a probe running, for whichever entry started it (one
	// of a CR forgotten meanwhile included: its answer is dropped).
	inFlight map[cache.ObjectName]bool
	stopped  bool
	wg       sync.WaitGroup
}

func newProber(cfg ServerProbe, enqueue func(cache.ObjectName)) *prober {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	return &prober{
		cfg: cfg, enqueue: enqueue, client: &serverClient{timeout: cfg.Timeout},
		clock: clock.RealClock{}, jitter: rand.Float64,
		entries: map[cache.ObjectName]*probeEntry{}, inFlight: map[cache.ObjectName]bool{},
	}
}

func (p *prober) enabled() bool { return p != nil && p.cfg.Endpoint != nil }

// observe is called by each sync of a CR whose server is available. It returns the last
// answer of this CR's server (same UID) and whether there is one. A server not asked
// yet, or whose state changed since it was last asked, is asked now (once the probe
// running, if any, ends), and its back-off starts over at the base interval. Otherwise
// nothing happens: the next probe stays when it was due, however often the CR is synced.
func (p *prober) observe(ctx context.Context, key cache.ObjectName, l *v1alpha2.LlamaStackDistribution, state serverState, tls *ServerTLS) (probeResult, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[key]
	if e != nil && e.uid == l.UID && e.state == state {
		if e.result == nil {
			return probeResult{}, false
		}
		return *e.result, true
	}
	if e == nil || e.uid != l.UID {
		p.stopTimer(e)
		e = &probeEntry{uid: l.UID}
		p.entries[key] = e
	}
	// The next answer, whatever it is, is followed by a wait of one base interval.
	e.state, e.ep, e.ctx, e.wait = state, p.cfg.Endpoint(l, tls), ctx, 0
	p.probeNow(key, e)
	if e.result == nil {
		return probeResult{}, false
	}
	return *e.result, true
}

// probeNow starts a probe of e, or asks for one when the running one ends. p.mu is held.
func (p *prober) probeNow(key cache.ObjectName, e *probeEntry) {
	if p.stopped || e.ctx.Err() != nil {
		return
	}
	if p.inFlight[key] {
		e.again = true
		return
	}
	p.stopTimer(e)
	e.again = false
	p.inFlight[key] = true
	p.wg.Add(1)
	go p.run(key, e, e.ctx, e.ep)
}

func (p *prober) stopTimer(e *probeEntry) {
	if e != nil && e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
}

// run probes e's server and records the answer, then arms the timer of the next probe.
func (p *prober) run(key cache.ObjectName, e *probeEntry, ctx context.Context, ep ServerEndpoint) {
	defer p.wg.Done()
	info := p.client.probe(ctx, ep)
	logger := klog.FromContext(ctx)

	p.mu.Lock()
	delete(p.inFlight, key)
	current := p.entries[key]
	if current != e {
		// Forgotten, or replaced by a CR of the same name, while it ran: the answer is
		// not of that server. A newer entry waiting for this probe to end starts its own.
		if current != nil && current.again {
			p.probeNow(key, current)
		}
		p.mu.Unlock()
		return
	}
	changed := e.result == nil || !sameAnswer(e.result.info, info)
	e.result = &probeResult{uid: e.uid, info: info}
	e.wait = nextProbeWait(e.wait, p.cfg.Interval, changed)
	var next time.Duration
	if e.again {
		p.probeNow(key, e)
	} else if !p.stopped && ctx.Err() == nil {
		next = jittered(e.wait, p.jitter())
		// The callback runs on its own goroutine: a fake clock calls it under its lock.
		e.timer = p.clock.AfterFunc(next, func() { go p.fire(key, e) })
	}
	p.mu.Unlock()

	logger.V(4).Info("Probed server", "server", ep, "healthy", info.healthy, "version", info.version,
		"changed", changed, "nextProbeIn", next)
	if changed && ctx.Err() == nil {
		p.enqueue(key)
	}
}

// fire starts the probe e's timer was armed for, unless e was forgotten meanwhile.
func (p *prober) fire(key cache.ObjectName, e *probeEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.entries[key] != e {
		return
	}
	e.timer = nil
	p.probeNow(key, e)
}

// nextProbeWait is the wait after an answer: the base interval after a changed answer,
// or the first since the server changed (last 0), else twice the last wait, up to
// maxProbeBackoff base intervals.
func nextProbeWait(last, base time.Duration, reset bool) time.Duration {
	if reset || last < base {
		return base
	}
	return min(2*last, maxProbeBackoff*base)
}

// jittered takes up to probeJitter of d off, r in [0, 1) saying how much.
func jittered(d time.Duration, r float64) time.Duration {
	return d - time.Duration(float64(d)*probeJitter*r)
}

// sameAnswer tells whether two answers would report the same status.
func sameAnswer(a, b serverInfo) bool {
	return a.healthy == b.healthy && a.healthMsg == b.healthMsg && a.version == b.version &&
		a.providersKnown == b.providersKnown && equality.Semantic.DeepEqual(a.providers, b.providers)
}

// forget drops what is known of a CR (deleted, or its server not available) and its
// next probe; the answer of a probe still running for it is dropped.
func (p *prober) forget(key cache.ObjectName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopTimer(p.entries[key])
	delete(p.entries, key)
}

// wait stops every timer, so no probe starts any more, and waits for the probes in
// flight (they end within their timeouts).
func (p *prober) wait() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.stopped = true
	for _, e := range p.entries {
		p.stopTimer(e)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// readinessConditions are the conditions a Deployment becoming available changes, and
// StorageReady: a pod with a claim is scheduled only once the claim is bound, so the
// claim's binding and the Deployment's availability often reach one sync together.
var readinessConditions = []string{v1alpha2.ConditionReady, v1alpha2.ConditionDeploymentReady,
	v1alpha2.ConditionProgressing, v1alpha2.ConditionHealthCheck, v1alpha2.ConditionStorageReady}

// onlyTurnsReady tells whether going from status old to st makes the CR Ready and
// changes nothing else but what follows from its Deployment becoming available: the
// phase, the replica counts and readinessConditions. Such a write can wait for the
// server's first answer; anything else (a problem, a warning, a new generation, a
// Service URL) is written at once. A problem the CR reported already may move from
// DeploymentReady to Progressing, as the Deployment serving makes it a change refused.
func onlyTurnsReady(old, st v1alpha2.LlamaStackDistributionStatus) bool {
	if st.Phase != v1alpha2.PhaseReady || old.Phase == v1alpha2.PhaseReady {
		return false
	}
	if p := reportedProblem(st.Conditions); p != nil {
		if was := reportedProblem(old.Conditions); was == nil || was.Message != p.Message {
			return false
		}
	}
	masked := *st.DeepCopy()
	masked.Phase, masked.Replicas, masked.AvailableReplicas = old.Phase, old.Replicas, old.AvailableReplicas
	for _, t := range readinessConditions {
		if was := meta.FindStatusCondition(old.Conditions, t); was != nil {
			meta.SetStatusCondition(&masked.Conditions, *was)
			// SetStatusCondition keeps the transition time of an unchanged status.
			meta.FindStatusCondition(masked.Conditions, t).LastTransitionTime = was.LastTransitionTime
		} else {
			meta.RemoveStatusCondition(&masked.Conditions, t)
		}
	}
	return equality.Semantic.DeepEqual(old, masked)
}
