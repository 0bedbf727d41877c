package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// ServerProbe configures how the controller reaches running llama-stack servers to read
// their health, version and providers.
type ServerProbe struct {
	// Endpoint returns how to reach a CR's server: ServiceEndpoints when the controller
	// runs in the cluster, ProxyEndpoints outside it. nil disables probing (HealthCheck is
	// then not reported).
	Endpoint func(l *v1alpha2.LlamaStackDistribution) ServerEndpoint
	// Timeout of each request (default 5s).
	Timeout time.Duration
	// Interval between probes of a ready server (default 1 minute).
	Interval time.Duration
}

// probeResult is the last answer of a CR's server.
type probeResult struct {
	uid  types.UID
	at   time.Time
	info serverInfo
}

// prober runs at most one probe per CR at a time, outside the workers, and feeds each
// result back through the queue. Its state is guarded by mu: the workers only read
// results and ask for probes.
type prober struct {
	cfg      ServerProbe
	client   *serverClient
	enqueue  func(cache.ObjectName)
	mu       sync.Mutex
	results  map[cache.ObjectName]probeResult
	inFlight map[cache.ObjectName]bool
	// stale marks probes in flight whose CR was forgotten meanwhile: their answers are
	// dropped.
	stale map[cache.ObjectName]bool
	wg    sync.WaitGroup
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
		results: map[cache.ObjectName]probeResult{}, inFlight: map[cache.ObjectName]bool{}, stale: map[cache.ObjectName]bool{},
	}
}

func (p *prober) enabled() bool { return p != nil && p.cfg.Endpoint != nil }

// result returns the last probe of this CR (same UID), and whether it is due again: when
// there is none or it is older than the interval. A due probe is started unless one is
// already running.
func (p *prober) result(ctx context.Context, key cache.ObjectName, l *v1alpha2.LlamaStackDistribution) (probeResult, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	res, ok := p.results[key]
	if ok && res.uid != l.UID {
		ok = false
	}
	if (!ok || time.Since(res.at) >= p.cfg.Interval) && !p.inFlight[key] {
		p.inFlight[key] = true
		p.wg.Add(1)
		go p.run(ctx, key, l.UID, p.cfg.Endpoint(l))
	}
	return res, ok
}

func (p *prober) run(ctx context.Context, key cache.ObjectName, uid types.UID, ep ServerEndpoint) {
	defer p.wg.Done()
	info := p.client.probe(ctx, ep)
	klog.FromContext(ctx).V(4).Info("Probed server", "server", ep, "healthy", info.healthy, "version", info.version)
	p.mu.Lock()
	delete(p.inFlight, key)
	if p.stale[key] {
		delete(p.stale, key)
	} else {
		p.results[key] = probeResult{uid: uid, at: time.Now(), info: info}
	}
	p.mu.Unlock()
	if ctx.Err() == nil {
		p.enqueue(key)
	}
}

// forget drops what is known of a CR (deleted, or its server not available), and the
// answer of a probe still in flight for it.
func (p *prober) forget(key cache.ObjectName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.results, key)
	if p.inFlight[key] {
		p.stale[key] = true
	}
}

// wait waits for the probes in flight (they end within their timeouts).
func (p *prober) wait() {
	if p != nil {
		p.wg.Wait()
	}
}
