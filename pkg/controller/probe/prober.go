// Package probe asks the llama-stack servers the controller runs for their health,
// version and providers: through each CR's Service, or the API server's service proxy
// when the controller runs outside the cluster, one probe per server at a time, off
// the controller's workers, backing off while the answers do not change.
package probe

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Service is how the prober reaches a CR's server: through its Service, at a port.
type Service struct {
	Namespace, Name string
	Port            int32
}

// Config configures how the controller reaches running llama-stack servers to read
// their health, version and providers.
type Config struct {
	// Endpoint returns how to reach a CR's server: ServiceEndpoints when the controller
	// runs in the cluster, ProxyEndpoints outside it. nil disables probing (HealthCheck is
	// then not reported).
	// tls is nil for a server that serves plain HTTP.
	Endpoint func(svc Service, tls *TLS) Endpoint
	// Timeout of each request (default 5s).
	Timeout time.Duration
	// Interval is the base interval between probes of a ready server (default 1 minute):
	// a server whose answers do not change is probed less and less often, up to
	// maxProbeBackoff times this.
	Interval time.Duration
	// Clock runs the timers of the next probes; nil is the real clock.
	Clock clock.WithDelayedExecution
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

// Result is the last answer of a CR's server.
type Result struct {
	// UID is the CR's.
	UID  types.UID
	Info Info
}

// State is what a sync knows of a CR's server: when it changes the server may
// answer differently, so it is asked at once and the back-off starts over. It is the
// CR's generation and the Deployment's generation and replica counts, not the
// Deployment's resourceVersion, which also moves on writes that change nothing the
// server does (a label, an annotation, someone's metadata patch). A server that stops
// fails its readiness probe, which lowers the ready and available counts.
type State struct {
	generation        int64 // the CR's
	deployment        int64 // the Deployment's generation
	observed          int64 // the Deployment's status.observedGeneration
	replicas, updated int32
	ready, available  int32
	// tls is TLS.key of how the server is reached: a server that turns to HTTPS,
	// or whose certificate authority changes, is reached anew.
	tls string
}

// StateOf is the state of the server of a CR at generation, run by d.
func StateOf(generation int64, d *appsv1.Deployment, tls *TLS) State {
	s := State{generation: generation, tls: tls.key()}
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
	state State
	ep    Endpoint
	// ctx is the context of the sync that last reported on the server: its logger, and
	// cancelled when the controller stops.
	ctx context.Context
	// result is the last answer; nil before the first.
	result *Result
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
type Prober struct {
	cfg     Config
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

func New(cfg Config, enqueue func(cache.ObjectName)) *Prober {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Prober{
		cfg: cfg, enqueue: enqueue, client: &serverClient{timeout: cfg.Timeout},
		clock: cfg.Clock, jitter: rand.Float64,
		entries: map[cache.ObjectName]*probeEntry{}, inFlight: map[cache.ObjectName]bool{},
	}
}

func (p *Prober) Enabled() bool { return p != nil && p.cfg.Endpoint != nil }

// Observe is called by each sync of a CR whose server is available. It returns the last
// answer of this CR's server (same UID) and whether there is one. A server not asked
// yet, or whose state changed since it was last asked, is asked now (once the probe
// running, if any, ends), and its back-off starts over at the base interval. Otherwise
// nothing happens: the next probe stays when it was due, however often the CR is synced.
func (p *Prober) Observe(ctx context.Context, key cache.ObjectName, uid types.UID, svc Service, state State, tls *TLS) (Result, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[key]
	if e != nil && e.uid == uid && e.state == state {
		if e.result == nil {
			return Result{}, false
		}
		return *e.result, true
	}
	if e == nil || e.uid != uid {
		p.stopTimer(e)
		e = &probeEntry{uid: uid}
		p.entries[key] = e
	}
	// The next answer, whatever it is, is followed by a wait of one base interval.
	e.state, e.ep, e.ctx, e.wait = state, p.cfg.Endpoint(svc, tls), ctx, 0
	p.probeNow(key, e)
	if e.result == nil {
		return Result{}, false
	}
	return *e.result, true
}

// probeNow starts a probe of e, or asks for one when the running one ends. p.mu is held.
func (p *Prober) probeNow(key cache.ObjectName, e *probeEntry) {
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

func (p *Prober) stopTimer(e *probeEntry) {
	if e != nil && e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
}

// run probes e's server and records the answer, then arms the timer of the next probe.
func (p *Prober) run(key cache.ObjectName, e *probeEntry, ctx context.Context, ep Endpoint) {
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
	changed := e.result == nil || !sameAnswer(e.result.Info, info)
	e.result = &Result{UID: e.uid, Info: info}
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

	logger.V(4).Info("Probed server", "server", ep, "healthy", info.Healthy, "version", info.Version,
		"changed", changed, "nextProbeIn", next)
	if changed && ctx.Err() == nil {
		p.enqueue(key)
	}
}

// fire starts the probe e's timer was armed for, unless e was forgotten meanwhile.
func (p *Prober) fire(key cache.ObjectName, e *probeEntry) {
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
func sameAnswer(a, b Info) bool {
	return a.Healthy == b.Healthy && a.HealthMessage == b.HealthMessage && a.Version == b.Version &&
		a.ProvidersKnown == b.ProvidersKnown && equality.Semantic.DeepEqual(a.Providers, b.Providers)
}

// Forget drops what is known of a CR (deleted, or its server not available) and its
// next probe; the answer of a probe still running for it is dropped.
func (p *Prober) Forget(key cache.ObjectName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopTimer(p.entries[key])
	delete(p.entries, key)
}

// Kept is how many CRs the prober keeps anything of: an answer, a timer, a probe in
// flight.
func (p *Prober) Kept() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := len(p.entries)
	for key := range p.inFlight {
		if p.entries[key] == nil {
			kept++
		}
	}
	return kept
}

// Wait stops every timer, so no probe starts any more, and waits for the probes in
// flight (they end within their timeouts).
func (p *Prober) Wait() {
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
