//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llamastack/llama-stack-controller/cmd/controller/app"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// settings are the loads and windows of a run; the defaults are the issue's.
type settings struct {
	quick bool
	// sizes are the numbers of CRs, each converged from empty on a cluster of its own.
	sizes []int
	// tail is how long requests are still counted after the last CR is Ready.
	tail time.Duration
	// idle is the window with nothing changing, measured at the largest size (at every
	// size with idleEvery).
	idle      time.Duration
	idleEvery bool
	// resync is the controller's informer resync period in the bench (short, so that
	// the idle window spans several resyncs).
	resync time.Duration
	// Unrelated objects of the heap measurement.
	configMaps, configMapBytes, deployments int

	workers int
	// probes are the controller's --server-probe modes to run the scenario with, each on
	// a cluster of its own: "off" and "service" (the in-cluster mode: each server's
	// Service DNS name, which nothing answers on kwok) by default.
	probes []string
	// hostDNS leaves the controller's name lookups to the host's resolver.
	hostDNS bool
	// limits are the controller's client limits to converge with, each on a cluster of
	// its own; the whole scenario (unchanged syncs, idle, heap) runs with the first.
	limits []limits
	// benchCount is -count of the Go benchmarks; 0 skips them.
	benchCount int
	// convergeOnly skips the unchanged syncs, the idle window and the heap.
	convergeOnly bool
}

func loadSettings(t *testing.T) settings {
	s := settings{
		tail: 30 * time.Second, idle: 6 * time.Minute, resync: time.Minute,
		configMaps: 2000, configMapBytes: 100 << 10, deployments: 1000,
		workers: app.DefaultWorkers, benchCount: 5,
		sizes:  []int{50, 200, 1000},
		limits: []limits{defaultLimits, unlimitedLimits},
		probes: []string{probeOff, probeService},
	}
	if os.Getenv("LLSC_BENCH_QUICK") != "" {
		s.quick = true
		s.sizes = []int{20, 50}
		s.tail, s.idle, s.resync = 10*time.Second, time.Minute, 20*time.Second
		s.configMaps, s.deployments = 200, 100
		s.benchCount = 1
	}
	if v := os.Getenv("LLSC_BENCH_SIZES"); v != "" {
		s.sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("LLSC_BENCH_SIZES=%q: want a comma-separated list of positive numbers", v)
			}
			s.sizes = append(s.sizes, n)
		}
	}
	if v := os.Getenv("LLSC_BENCH_LIMITS"); v != "" {
		s.limits = nil
		for _, f := range strings.Split(v, ",") {
			lim, err := parseLimits(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("LLSC_BENCH_LIMITS=%q: %v", v, err)
			}
			s.limits = append(s.limits, lim)
		}
	}
	if v := os.Getenv("LLSC_BENCH_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LLSC_BENCH_WORKERS=%q: want a positive number", v)
		}
		s.workers = n
	}
	if v := os.Getenv("LLSC_BENCH_PROBES"); v != "" {
		s.probes = nil
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains([]string{probeOff, probeService, probeProxy}, f) || slices.Contains(s.probes, f) {
				t.Fatalf("LLSC_BENCH_PROBES=%q: want a comma-separated list of distinct off, service, proxy", v)
			}
			s.probes = append(s.probes, f)
		}
	}
	s.idleEvery = os.Getenv("LLSC_BENCH_IDLE_EVERY") != ""
	s.hostDNS = os.Getenv("LLSC_BENCH_HOST_DNS") != ""
	if os.Getenv("LLSC_BENCH_SKIP_GO") != "" {
		s.benchCount = 0
	}
	s.convergeOnly = os.Getenv("LLSC_BENCH_CONVERGE_ONLY") != ""
	if v := os.Getenv("LLSC_BENCH_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("LLSC_BENCH_IDLE=%q: %v", v, err)
		}
		s.idle = d
	}
	return s
}

// The controller's --server-probe modes the bench runs with.
const (
	probeOff     = "off"
	probeService = "service"
	probeProxy   = "proxy"
)

// probeLabel names a probe mode in the table.
func probeLabel(mode string) string {
	switch mode {
	case probeOff:
		return "probes off"
	case probeService:
		return "probes on (service)"
	default:
		return "probes on (" + mode + ")"
	}
}

// Fake node capacity (test/localcluster) and what a bench CR's server pod requests (the
// controller's default: one CPU per server worker, one worker).
const (
	nodeCPU  = 32
	nodePods = 110
	podCPU   = 1
	// minNodes keeps the small sizes on the 10 nodes of the earlier reference runs.
	minNodes = 10
)

// nodesFor is the number of kwok nodes for n CRs: room for every server pod (one per CR;
// the HPAs have no metrics on kwok, so they never scale up) plus a fifth to spare, so
// that no pod waits Pending for a fake node's CPU.
func nodesFor(n int) int {
	perNode := min(nodeCPU/podCPU, nodePods)
	return max(minNodes, (n*6/5+perNode-1)/perNode)
}

// benchEnv is what every run shares.
type benchEnv struct {
	s      settings
	root   string
	out    string
	binDir string
	stages string
}

// limits are the controller's client rate limits of a run.
type limits struct {
	label string
	short string
	qps   float64
	burst int
}

var (
	// defaultLimits are cmd/controller's defaults (--kube-api-qps, --kube-api-burst).
	defaultLimits = limits{label: fmt.Sprintf("QPS %d, burst %d (default)", app.DefaultQPS, app.DefaultBurst), short: "default", qps: app.DefaultQPS, burst: app.DefaultBurst}
	// unlimitedLimits are so high that the client never waits.
	unlimitedLimits = limits{label: "unlimited QPS", short: "unlimited", qps: 1e6, burst: 1e6}
)

// parseLimits reads "unlimited" or "<qps>/<burst>".
func parseLimits(s string) (limits, error) {
	if s == unlimitedLimits.short {
		return unlimitedLimits, nil
	}
	q, b, ok := strings.Cut(s, "/")
	qps, err1 := strconv.ParseFloat(q, 64)
	burst, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || qps <= 0 || burst < 1 {
		return limits{}, fmt.Errorf("%q is not unlimited or <qps>/<burst>", s)
	}
	if qps == defaultLimits.qps && burst == defaultLimits.burst {
		return defaultLimits, nil
	}
	return limits{label: fmt.Sprintf("QPS %g, burst %d", qps, burst), short: fmt.Sprintf("qps%g", qps), qps: qps, burst: burst}, nil
}

// runResult is what one run (one cluster, one size, one set of limits) measured.
type runResult struct {
	n     int
	lim   limits
	probe string
	nodes int
	// createTook is how long the driver took to create the CRs; toReady is from the
	// first create to the last CR Ready; written from the first create to the last
	// write of a child by the controller.
	createTook, toReady, written time.Duration
	// eventsWritten is from the first create to the last Event written while converging.
	eventsWritten      time.Duration
	children, expected map[string]int
	converge           requestCounts
	convergeSyncs      float64
	// convergeCPU is the controller's CPU time from the first create to tail after the
	// last Ready.
	convergeCPU float64
	// latency is how the converging requests' time was spent.
	latency requestTime
	// heapEmpty is the controller's heap after GC, caches synced, before the first CR;
	// heapConverged the same once the N CRs converged.
	heapEmpty, heapConverged heapStats

	unchanged *unchangedResult
	idle      *idleResult
	heap      *heapResult
}

// requestTime is how long the controller's requests took in a window: in all, and
// waiting for its clients' rate limiters (part of the total).
type requestTime struct {
	requests, total, waited float64
}

// answered is the mean time from sending a request to its answer, the limiter's wait
// left out; waiting the mean wait for the limiter.
func (q requestTime) answered() time.Duration {
	if q.requests == 0 {
		return 0
	}
	return time.Duration((q.total - q.waited) / q.requests * float64(time.Second))
}

func (q requestTime) waiting() time.Duration {
	if q.requests == 0 {
		return 0
	}
	return time.Duration(q.waited / q.requests * float64(time.Second))
}

type unchangedResult struct {
	syncs    float64
	requests requestCounts
}

type idleResult struct {
	took       time.Duration
	resyncs    int
	requests   requestCounts
	syncs, cpu float64
}

type heapResult struct {
	before, after heapStats
	// during are the controller's requests while the unrelated objects were created.
	during requestCounts
}

func TestBench(t *testing.T) {
	ctx := context.Background()
	s := loadSettings(t)
	root, err := localcluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	env := &benchEnv{s: s, root: root, out: os.Getenv("LLSC_BENCH_OUT")}
	if env.out == "" {
		env.out = filepath.Join(root, "bin", "bench")
	}
	if err := cleanOut(env.out); err != nil {
		t.Fatal(err)
	}
	rep := &report{started: time.Now(), s: s, loadBefore: loadAverage()}

	// The Go benchmarks first, while no control plane competes for the CPU.
	if s.benchCount > 0 {
		t.Log("Go benchmarks of pkg/controller")
		if rep.goBench, err = runGoBenchmarks(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	t.Log("building (or finding) the local control plane")
	if env.binDir, env.stages, err = localcluster.BuildBinaries(ctx); err != nil {
		t.Fatal(err)
	}
	rep.versions = clusterVersions(root)
	for _, p := range plans(s) {
		r, err := runLoad(ctx, t, env, p)
		if err != nil {
			t.Fatalf("N=%d, %s, %s: %v", p.n, p.lim.label, probeLabel(p.probe), err)
		}
		rep.runs = append(rep.runs, r)
	}
	rep.finished, rep.loadAfter = time.Now(), loadAverage()
	table := rep.render()
	if err := os.WriteFile(filepath.Join(env.out, "results.md"), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	curve, err := os.Create(filepath.Join(env.out, "cost-curve.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := writeCostCurve(curve, rep.curveTitle(), rep.curvePanels()); err != nil {
		t.Fatal(err)
	}
	if err := curve.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(env.out, "cost-curve.md"), []byte(rep.renderCurve("cost-curve.svg")), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Print("\n" + table)
	t.Logf("results, controller logs, heap profiles and cluster logs: %s", env.out)
}

// cleanOut makes the output directory, removing what an earlier run left there (and
// nothing else).
func cleanOut(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "n*-*"))
	if err != nil {
		return err
	}
	for _, p := range append(old, filepath.Join(dir, "results.md"), filepath.Join(dir, "go-bench.txt"),
		filepath.Join(dir, "cost-curve.svg"), filepath.Join(dir, "cost-curve.md")) {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// runPlan is one run: one cluster, one size, one set of limits, one probe mode.
type runPlan struct {
	n     int
	lim   limits
	probe string
	// unchanged re-syncs every CR once after converging; idle then adds the idle window,
	// and unrelated the heap with the unrelated objects.
	unchanged, idle, unrelated bool
}

// plans lists the runs of a bench in order: with the first limits, every probe mode at
// every size, each converging and then re-syncing every unchanged CR, with the idle
// window at the largest size (at every size with idleEvery) and the heap with the
// unrelated objects at the largest size with the first probe mode only; then with each
// other set of limits, converging only, with the first probe mode.
func plans(s settings) []runPlan {
	largest := slices.Max(s.sizes)
	var out []runPlan
	for i, lim := range s.limits {
		probes := s.probes
		if i > 0 {
			probes = probes[:1]
		}
		for j, probe := range probes {
			for _, n := range s.sizes {
				whole := i == 0 && !s.convergeOnly
				idle := whole && (n == largest || s.idleEvery)
				out = append(out, runPlan{n: n, lim: lim, probe: probe, unchanged: whole, idle: idle,
					unrelated: idle && j == 0 && n == largest})
			}
		}
	}
	return out
}

// runLoad converges p.n CRs from empty on a fresh cluster with the controller at p.lim
// and p.probe, and counts its requests until tail after the last CR is Ready. It reads
// the controller's heap after GC before the first CR and once they converged. The rest
// of the plan follows.
func runLoad(ctx context.Context, t *testing.T, env *benchEnv, p runPlan) (*runResult, error) {
	s := env.s
	n, lim := p.n, p.lim
	name := fmt.Sprintf("n%d-%s-probes-%s", n, lim.short, p.probe)
	dir := filepath.Join(env.out, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	nodes := nodesFor(n)
	t.Logf("%s: starting a control plane with %d kwok nodes", name, nodes)
	bc, err := startCluster(ctx, env, name, nodes)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := bc.stop(); err != nil {
			t.Logf("%s: stopping the control plane: %v", name, err)
		}
	}()
	// The driver's watch ends before the control plane stops, or the API server waits
	// for it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := prepare(ctx, bc.kube, bc.dyn, n); err != nil {
		return nil, err
	}
	proc, err := startController(ctx, childSpec{
		Kubeconfig: bc.lc.Kubeconfig(), Workers: s.workers, QPS: lim.qps, Burst: lim.burst,
		Resync: s.resync, LogFile: filepath.Join(dir, "controller.log"), Verbosity: 2,
		WebhookAddr: bc.webhookAddr, ServerProbe: p.probe, HostDNS: s.hostDNS,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := proc.stop(); err != nil {
			t.Logf("%s: stopping the controller: %v", name, err)
		}
	}()
	if err := proc.waitStarted(ctx); err != nil {
		return nil, err
	}
	if err := bc.waitConversion(ctx); err != nil {
		return nil, err
	}
	ready, err := watchReady(ctx, bc.client, n)
	if err != nil {
		return nil, err
	}
	r := &runResult{n: n, lim: lim, probe: p.probe, nodes: nodes, expected: expectedChildren(n)}
	if r.heapEmpty, err = steadyHeap(ctx, proc); err != nil {
		return nil, err
	}

	// Converge from empty.
	s0, err := proc.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	t.Logf("%s: creating %d CRs", name, n)
	start := time.Now()
	if err := createCRs(ctx, bc.client, n); err != nil {
		return nil, err
	}
	r.createTook = time.Since(start)
	// About 2 s per CR at the default limits on two cores, with room to spare.
	last, err := ready.wait(ctx, 10*time.Minute+time.Duration(n)*200*time.Millisecond)
	if err != nil {
		return nil, err
	}
	r.toReady = last.Sub(start)
	t.Logf("%s: all %d Ready after %s; counting for %s more, then until %s without a write", name, n,
		r.toReady.Round(100*time.Millisecond), s.tail, quietFor)
	time.Sleep(time.Until(last.Add(s.tail)))
	s1, err := waitQuiet(ctx, proc)
	if err != nil {
		return nil, err
	}
	r.converge, r.convergeSyncs = s1.requests.minus(s0.requests), s1.syncs-s0.syncs
	r.convergeCPU = s1.cpuSeconds - s0.cpuSeconds
	r.latency = requestTime{
		requests: s1.requestCount - s0.requestCount,
		total:    s1.requestSeconds - s0.requestSeconds,
		waited:   s1.limiterSeconds - s0.limiterSeconds,
	}
	r.written = s1.lastChildWrite.Sub(start)
	r.eventsWritten = s1.lastEvent.Sub(start)
	if r.heapConverged, err = steadyHeap(ctx, proc); err != nil {
		return nil, err
	}
	if err := proc.heapProfile(ctx, filepath.Join(dir, "heap-converged.pprof")); err != nil {
		return nil, err
	}
	if r.children, err = countChildren(ctx, bc.kube, bc.dyn); err != nil {
		return nil, err
	}
	if !p.unchanged {
		return r, nil
	}

	// One sync of every CR, none of which changed. (With probes on, the probes' own
	// syncs go on meanwhile and count too.) The window starts where convergence's
	// ended, so that nothing sent while the heap was read is left out; the syncs to wait
	// for are counted from the touch.
	t.Logf("%s: re-syncing every CR through the operator ConfigMap", name)
	touched, err := proc.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if err := touchOperatorConfig(ctx, bc.kube); err != nil {
		return nil, err
	}
	s2, err := waitSyncs(ctx, proc, touched.syncs+float64(n))
	if err != nil {
		return nil, err
	}
	r.unchanged = &unchangedResult{syncs: s2.syncs - s1.syncs, requests: s2.requests.minus(s1.requests).filter(notWatch)}
	if w := unchangedWrites(r.unchanged.requests, p.probe); len(w) > 0 {
		t.Errorf("%s: syncs of unchanged CRs wrote: %s", name, w)
	}
	if !p.idle {
		return r, nil
	}

	// Idle: nothing changes for s.idle, spanning several resyncs.
	t.Logf("%s: idle for %s (informer resync every %s)", name, s.idle, s.resync)
	time.Sleep(s.idle)
	s3, err := proc.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	r.idle = &idleResult{
		took: s3.at.Sub(s2.at), resyncs: int(s3.at.Sub(s2.at) / s.resync),
		requests: s3.requests.minus(s2.requests), syncs: s3.syncs - s2.syncs, cpu: s3.cpuSeconds - s2.cpuSeconds,
	}
	if w := unchangedWrites(r.idle.requests, p.probe); len(w) > 0 {
		t.Errorf("%s: the idle controller wrote: %s", name, w)
	}
	if !p.unrelated {
		return r, nil
	}

	// Heap with n CRs, then with the unrelated objects.
	hr := &heapResult{}
	if hr.before, err = steadyHeap(ctx, proc); err != nil {
		return nil, err
	}
	if err := proc.heapProfile(ctx, filepath.Join(dir, "heap-before.pprof")); err != nil {
		return nil, err
	}
	t.Logf("%s: heap %.2f MiB; creating %d unrelated ConfigMaps of %d KiB and %d Deployments", name,
		mib(hr.before.HeapAlloc), s.configMaps, s.configMapBytes>>10, s.deployments)
	s4, err := proc.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if err := createUnrelated(ctx, bc.kube, s.configMaps, s.configMapBytes, s.deployments); err != nil {
		return nil, err
	}
	// Let the watches deliver everything and the controller's handlers see it.
	time.Sleep(30 * time.Second)
	if hr.after, err = steadyHeap(ctx, proc); err != nil {
		return nil, err
	}
	if err := proc.heapProfile(ctx, filepath.Join(dir, "heap-after.pprof")); err != nil {
		return nil, err
	}
	s5, err := proc.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	hr.during = s5.requests.minus(s4.requests).filter(notWatch)
	r.heap = hr
	t.Logf("%s: heap %.2f MiB", name, mib(hr.after.HeapAlloc))
	return r, nil
}

func notWatch(q request) bool { return !q.watch() }

// unchangedWrites are the requests of r that nothing unchanged is a reason for: a write
// of a child (a CR's status aside, which probes on may change), and, with probes off,
// when nothing changes at all, any write or Event.
func unchangedWrites(r requestCounts, probe string) requestCounts {
	return r.filter(func(q request) bool {
		if probe == probeOff {
			return q.mutating() || q.event()
		}
		return q.mutating() && !strings.HasPrefix(q.resource, "llamastackdistributions")
	})
}

// quietFor is how long the controller must have written nothing (no mutating request,
// no Event) for convergence to be over: with probes on, each CR's Ready waits for the
// server's first answer (up to the probe timeout), and at N = 1,000 those writes
// outlast the tail.
const quietFor = 5 * time.Second

// waitQuiet returns the controller's counters once it has written nothing for quietFor,
// or after 5 minutes (a controller that never stops writing shows in the idle window).
func waitQuiet(ctx context.Context, proc *controllerProc) (snapshot, error) {
	writes := func(s snapshot) int {
		return s.requests.filter(func(q request) bool { return q.mutating() || q.event() }).total()
	}
	s, err := proc.snapshot(ctx)
	if err != nil {
		return s, err
	}
	deadline, since := time.Now().Add(5*time.Minute), time.Now()
	for time.Since(since) < quietFor && time.Now().Before(deadline) {
		time.Sleep(time.Second)
		next, err := proc.snapshot(ctx)
		if err != nil {
			return next, err
		}
		if writes(next) != writes(s) {
			since = time.Now()
		}
		s = next
	}
	return s, nil
}

// waitSyncs waits until the controller has made at least syncs syncs in all and its
// queue is empty, then a little longer, and returns the counters then.
func waitSyncs(ctx context.Context, proc *controllerProc, syncs float64) (snapshot, error) {
	wait := 3*time.Minute + time.Duration(syncs)*20*time.Millisecond
	deadline := time.Now().Add(wait)
	for {
		s, err := proc.snapshot(ctx)
		if err != nil {
			return s, err
		}
		if s.syncs >= syncs && s.queueDepth == 0 {
			time.Sleep(3 * time.Second)
			return proc.snapshot(ctx)
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("%.0f of %.0f syncs after %s (queue depth %.0f)", s.syncs, syncs, wait, s.queueDepth)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// steadyHeap is the median of three readings of the heap after GC, a second apart.
func steadyHeap(ctx context.Context, proc *controllerProc) (heapStats, error) {
	var hs []heapStats
	for i := range 3 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		h, err := proc.heap(ctx)
		if err != nil {
			return h, err
		}
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b heapStats) int { return int(int64(a.HeapAlloc) - int64(b.HeapAlloc)) })
	return hs[1], nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
