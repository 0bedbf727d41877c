//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report collects everything the table shows.
type report struct {
	s                     settings
	started, finished     time.Time
	loadBefore, loadAfter string
	versions              map[string]string
	goBench               []goBench
	runs                  []*runResult
}

// goBench is one Go benchmark: the median of each metric over its runs.
type goBench struct {
	name    string
	runs    int
	metrics map[string]float64
}

// goBenchmarks are the Go benchmarks of pkg/controller that the table shows.
const goBenchmarks = "^(BenchmarkSyncConverged|BenchmarkConfigMapCache)$"

// runGoBenchmarks runs the Go benchmarks of pkg/controller and keeps the median of each
// metric of each (sub-)benchmark.
func runGoBenchmarks(ctx context.Context, env *benchEnv) ([]goBench, error) {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, "test", "-run", "^$", "-bench", goBenchmarks, "-benchmem",
		"-count", strconv.Itoa(env.s.benchCount), "./pkg/controller")
	cmd.Dir = env.root
	out, err := cmd.CombinedOutput()
	_ = os.WriteFile(filepath.Join(env.out, "go-bench.txt"), out, 0o644)
	if err != nil {
		return nil, fmt.Errorf("go test -bench: %v\n%s", err, out)
	}
	samples := map[string]map[string][]float64{}
	var order []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		if _, seen := samples[name]; !seen {
			order = append(order, name)
			samples[name] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				samples[name][f[i+1]] = append(samples[name][f[i+1]], v)
			}
		}
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("no benchmark results in:\n%s", out)
	}
	var res []goBench
	for _, name := range order {
		g := goBench{name: name, metrics: map[string]float64{}}
		for unit, vs := range samples[name] {
			slices.Sort(vs)
			g.metrics[unit] = vs[len(vs)/2]
			g.runs = len(vs)
		}
		res = append(res, g)
	}
	return res, nil
}

// clusterVersions reads hack/cluster/versions.env and the client library's version.
func clusterVersions(root string) map[string]string {
	out := map[string]string{}
	if f, err := os.Open(filepath.Join(root, "hack", "cluster", "versions.env")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
				out[k] = v
			}
		}
		_ = f.Close()
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/client-go" {
				out["CLIENT_GO"] = f[1]
			}
		}
	}
	return out
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// machine describes the CPU, memory and OS.
func machine() string {
	cpu := runtime.GOARCH
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					mem = fmt.Sprintf(", %.0f GiB", kb/(1<<20))
				}
			}
		}
	}
	return fmt.Sprintf("%s, %d cores%s, %s/%s, %s", cpu, runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func (r *report) run(n int, lim limits, probe string) *runResult {
	for _, x := range r.runs {
		if x.n == n && x.lim == lim && x.probe == probe {
			return x
		}
	}
	return nil
}

// convergeBreakdown splits a run's mutating requests into applies, status updates and
// the rest.
type convergeBreakdown struct {
	mutating, applies, statusUpdates, conflicts, other int
	events, gets, notFound, lists, watches             int
	minimum, children                                  int
}

// The goals of converging from empty (issue 34): mutating requests at most this many
// times the minimum, and at most this many status writes per CR (created, then Ready
// with the server's first answer, and a little room for a real change). A figure over
// its goal is marked in the report.
const (
	goalMutatingRatio     = 1.10
	goalStatusWritesPerCR = 2.2
)

// overGoal marks a figure over its goal.
func overGoal(v, goal float64) string {
	if v > goal {
		return fmt.Sprintf(" (**over the goal, %.2f**)", goal)
	}
	return ""
}

// ratio is the run's mutating requests over the minimum.
func (b convergeBreakdown) ratio() float64 { return float64(b.mutating) / float64(b.minimum) }

// writesPerCR is the run's status writes per CR.
func (b convergeBreakdown) writesPerCR(n int) float64 { return float64(b.statusUpdates) / float64(n) }

func breakdown(x *runResult) convergeBreakdown {
	var b convergeBreakdown
	for k, v := range x.converge {
		q := parseKey(k)
		switch {
		case q.watch():
			b.watches += v
		case q.event():
			b.events += v
		case q.verb == "get":
			b.gets += v
			if q.code == "404" {
				b.notFound += v
			}
		case q.verb == "list":
			b.lists += v
		default:
			b.mutating += v
			switch {
			case q.verb == "apply":
				b.applies += v
			case q.verb == "update" && strings.HasSuffix(q.resource, "/status"):
				b.statusUpdates += v
			default:
				b.other += v
			}
			if q.code == "409" {
				b.conflicts += v
			}
		}
	}
	for _, c := range x.expected {
		b.children += c
	}
	b.minimum = b.children + 2*x.n
	return b
}

// column is one column of the results table: a size and a probe mode, at the first
// limits (other limits fill the rows that name them).
type column struct {
	n     int
	probe string
}

func (r *report) columns() []column {
	var cols []column
	for _, n := range r.s.sizes {
		for _, probe := range r.s.probes {
			cols = append(cols, column{n, probe})
		}
	}
	return cols
}

// nodesLine says how many fake nodes each size had.
func (r *report) nodesLine() string {
	var parts []string
	for _, n := range r.s.sizes {
		parts = append(parts, fmt.Sprintf("%d for N = %s", nodesFor(n), thousands(n)))
	}
	return fmt.Sprintf("kwok fake nodes of %d CPU and %d pods each, room for every server pod (1 CPU) and a fifth more, at least %d: %s",
		nodeCPU, nodePods, minNodes, strings.Join(parts, ", "))
}

// render writes the markdown report: the table, the cost curve, the Go benchmarks, and
// the details.
func (r *report) render() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	cols := r.columns()
	upstream := slices.Contains(r.s.sizes, 50) && slices.Contains(r.s.sizes, 200)

	p("## Results\n\n")
	if r.s.quick {
		p("**Quick mode (LLSC_BENCH_QUICK): smaller loads and windows than the issue's; not the reference numbers.**\n\n")
	}
	p("- Run: %s, %s in all; load average %s before, %s after.\n", r.started.UTC().Format("2006-01-02 15:04 UTC"),
		r.finished.Sub(r.started).Round(time.Second), r.loadBefore, r.loadAfter)
	p("- Machine: %s.\n", machine())
	p("- Control plane: Kubernetes %s (kube-apiserver, kube-controller-manager with client QPS %d, kube-scheduler), etcd %s, kwok %s; %s; a fresh control plane for each N, probe mode and client setting. Controller client: client-go %s.\n",
		r.versions["KUBE_VERSION"], kcmQPS, r.versions["ETCD_VERSION"], r.versions["KWOK_VERSION"], r.nodesLine(), r.versions["CLIENT_GO"])
	p("- Controller: a separate process running `app.Run` as cmd/controller does, as the artifacts' ServiceAccount; %d workers, client %s unless noted, informer resync %s (short so the idle window spans several).\n",
		r.s.workers, r.s.limits[0].label, r.s.resync)
	p("- Server probes (`--server-probe`) as each column says: `off`, or `service`, the in-cluster mode (what `auto` picks in a pod): every server is asked at its Service's DNS name, every minute (the default interval). kwok pods run no server, and the controller process's name lookups fail at once, the same way every time (%s), so every probe fails: CRs are `Ready` with `HealthCheck` False. The probes are not API requests; each answer queues a sync of its CR, so they show as syncs.\n", dnsNote(r.s.hostDNS))
	p("- Requests are counted by a round-tripper in the controller's client, by verb, resource and status code. Mix (upstream-cost.md): N CRs over %d namespaces, distribution `starter`, one env var, storage on every 4th, autoscaling on every 5th, a PDB on every 3rd.\n\n",
		benchNamespaces)

	p("| figure | goal |")
	for _, c := range cols {
		p(" N = %s, %s |", thousands(c.n), probeLabel(c.probe))
	}
	if upstream {
		p(" upstream, N = 50 / 200 |")
	}
	p("\n|---|---|")
	for range cols {
		p("---|")
	}
	if upstream {
		p("---|")
	}
	p("\n")
	row := func(figure, goal string, cell func(c column) string, up string) {
		p("| %s | %s |", figure, goal)
		for _, c := range cols {
			v := cell(c)
			if v == "" {
				v = "—"
			}
			p(" %s |", v)
		}
		if upstream {
			p(" %s |", up)
		}
		p("\n")
	}
	def := func(c column) *runResult { return r.run(c.n, r.s.limits[0], c.probe) }

	row("mutating requests to converge from empty, until "+r.s.tail.String()+" after the last CR is Ready and "+quietFor.String()+" without a write (ratio to the minimum)", fmt.Sprintf("≤ %.2f", goalMutatingRatio),
		func(c column) string {
			x := def(c)
			if x == nil {
				return ""
			}
			bd := breakdown(x)
			return fmt.Sprintf("**%s (%.2f)**%s", thousands(bd.mutating), bd.ratio(), overGoal(bd.ratio(), goalMutatingRatio))
		}, "759 (3.16) / 1,938 (2.03), against one status write per CR")
	row("· minimum: one apply per child + two status writes per CR", "", func(c column) string {
		x := def(c)
		if x == nil {
			return ""
		}
		bd := breakdown(x)
		s := fmt.Sprintf("%s = %s children + 2 × %s", thousands(bd.minimum), thousands(bd.children), thousands(c.n))
		if !mapsEqual(x.children, x.expected) {
			s += fmt.Sprintf(" (**listed children differ: %v, expected %v**)", x.children, x.expected)
		}
		return s
	}, "240 / 957")
	row("· of which applies / status updates (409s) / other", "", func(c column) string {
		x := def(c)
		if x == nil {
			return ""
		}
		bd := breakdown(x)
		return fmt.Sprintf("%s / %s (%d) / %d", thousands(bd.applies), thousands(bd.statusUpdates), bd.conflicts, bd.other)
	}, "")
	row("**status writes per CR** while converging", fmt.Sprintf("≤ %.1f", goalStatusWritesPerCR), func(c column) string {
		if x := def(c); x != nil {
			w := breakdown(x).writesPerCR(c.n)
			return fmt.Sprintf("**%.2f**%s", w, overGoal(w, goalStatusWritesPerCR))
		}
		return ""
	}, "")
	row("requests per CR while converging, all but watches: mutating / reads / Events", "", func(c column) string {
		x := def(c)
		if x == nil {
			return ""
		}
		bd, n := breakdown(x), float64(c.n)
		return fmt.Sprintf("**%.2f**: %.2f / %.2f / %.2f", float64(bd.mutating+bd.gets+bd.lists+bd.events)/n,
			float64(bd.mutating)/n, float64(bd.gets+bd.lists)/n, float64(bd.events)/n)
	}, "75.2 / 47.2 (every request of its client)")
	row("Events while converging (apart from the budget)", "", func(c column) string {
		if x := def(c); x != nil {
			return thousands(breakdown(x).events)
		}
		return ""
	}, "")
	row("reads while converging: GETs (404s) / LISTs", "", func(c column) string {
		x := def(c)
		if x == nil {
			return ""
		}
		bd := breakdown(x)
		return fmt.Sprintf("%s (%s) / %d", thousands(bd.gets), thousands(bd.notFound), bd.lists)
	}, "3,000 GETs / 7,502 GETs, about half 404")
	row("syncs while converging", "", func(c column) string {
		if x := def(c); x != nil {
			return fmt.Sprintf("%s (%.1f per CR)", thousands(int(x.convergeSyncs)), x.convergeSyncs/float64(c.n))
		}
		return ""
	}, "")
	row("per request while converging: mean time to the answer / mean wait for the client's rate limiter (all waits)", "", func(c column) string {
		if x := def(c); x != nil && x.latency.requests > 0 {
			return fmt.Sprintf("%.1f ms / %.1f ms (%.1f s)", ms(x.latency.answered()), ms(x.latency.waiting()), x.latency.waited)
		}
		return ""
	}, "")
	row("controller CPU while converging (per CR)", "", func(c column) string {
		if x := def(c); x != nil {
			return fmt.Sprintf("%.2f s (%.2f ms)", x.convergeCPU, 1000*x.convergeCPU/float64(c.n))
		}
		return ""
	}, "")
	row("controller heap after GC: no CR → N CRs converged (per CR)", "", func(c column) string {
		x := def(c)
		if x == nil {
			return ""
		}
		return fmt.Sprintf("%.2f → %.2f MiB (%.1f KiB)", mib(x.heapEmpty.HeapAlloc), mib(x.heapConverged.HeapAlloc), heapPerCR(x))
	}, "")
	row("requests other than watches in the idle window", "0", func(c column) string {
		x := def(c)
		if x == nil || x.idle == nil {
			return ""
		}
		other := x.idle.requests.filter(notWatch)
		s := fmt.Sprintf("**%s** in %s, %d resyncs", thousands(other.total()), x.idle.took.Round(time.Second), x.idle.resyncs)
		if other.total() > 0 {
			s += ": " + other.String()
		}
		return s + fmt.Sprintf(" (watches re-opened: %d)", x.idle.requests.filter(request.watch).total())
	}, "88,784 / 85,201")
	row("syncs, controller CPU in the idle window", "", func(c column) string {
		x := def(c)
		if x == nil || x.idle == nil {
			return ""
		}
		return fmt.Sprintf("%s syncs (%.2f per CR a minute), %.2f s CPU (%.2f %% of a core)", thousands(int(x.idle.syncs)),
			x.idle.syncs/float64(c.n)/x.idle.took.Minutes(), x.idle.cpu, 100*x.idle.cpu/x.idle.took.Seconds())
	}, "142.6 s / 130.1 s CPU")
	row("requests per sync of an unchanged CR, reads included (every CR re-synced once; with probes on, their syncs too)", "0", func(c column) string {
		x := def(c)
		if x == nil || x.unchanged == nil {
			return ""
		}
		req := x.unchanged.requests.total()
		s := fmt.Sprintf("**%.2f** (%d in %s syncs)", float64(req)/max(x.unchanged.syncs, 1), req, thousands(int(x.unchanged.syncs)))
		if req > 0 {
			s += ": " + x.unchanged.requests.String()
		}
		return s
	}, "23 / 23")
	row(fmt.Sprintf("controller heap after GC: N CRs → after %s unrelated ConfigMaps of %d KiB and %s Deployments in other namespaces",
		thousands(r.s.configMaps), r.s.configMapBytes>>10, thousands(r.s.deployments)), "< 2 MiB growth", func(c column) string {
		x := def(c)
		if x == nil || x.heap == nil {
			return ""
		}
		h := x.heap
		s := fmt.Sprintf("**%.2f → %.2f MiB (%+.2f MiB)**; in use %.2f → %.2f MiB", mib(h.before.HeapAlloc), mib(h.after.HeapAlloc),
			mib(h.after.HeapAlloc)-mib(h.before.HeapAlloc), mib(h.before.HeapInuse), mib(h.after.HeapInuse))
		s += fmt.Sprintf("; requests meanwhile: %d", h.during.total())
		return s
	}, "— / 15.6 → 15.2 MiB in use (no GC forced)")
	row("CPU per sync of a converged CR (Go benchmark on the fixture; below)", "report", func(c column) string {
		if c != cols[0] {
			return "(same)"
		}
		var parts []string
		for _, g := range r.goBench {
			if name, ok := strings.CutPrefix(g.name, "SyncConverged/"); ok {
				parts = append(parts, fmt.Sprintf("%s: %s, %s allocs, %.0f requests", name, duration(g.metrics["ns/op"]),
					thousands(int(g.metrics["allocs/op"])), g.metrics["requests/op"]))
			}
		}
		return strings.Join(parts, "; ")
	}, "")
	for _, lim := range r.s.limits {
		up := ""
		if lim == defaultLimits {
			up = "17.5 s / 54.2 s"
		}
		row("time from the first create to all Ready, "+lim.label, "", func(c column) string {
			x := r.run(c.n, lim, c.probe)
			if x == nil {
				return ""
			}
			return fmt.Sprintf("**%.1f s** (creates took %.1f s; the controller wrote its last child after %.1f s, its last Event after %.1f s)",
				x.toReady.Seconds(), x.createTook.Seconds(), x.written.Seconds(), x.eventsWritten.Seconds())
		}, up)
	}
	for _, lim := range r.s.limits[1:] {
		row("mutating requests to converge, "+lim.label+" (ratio)", "", func(c column) string {
			x := r.run(c.n, lim, c.probe)
			if x == nil {
				return ""
			}
			bd := breakdown(x)
			w := bd.writesPerCR(c.n)
			return fmt.Sprintf("%s (%.2f)%s, %.2f status writes per CR%s", thousands(bd.mutating), bd.ratio(), overGoal(bd.ratio(), goalMutatingRatio),
				w, overGoal(w, goalStatusWritesPerCR))
		}, "")
	}

	p("\n")
	p("%s", r.renderCurve("cost-curve.svg"))

	if len(r.goBench) > 0 {
		p("\nGo benchmarks of pkg/controller (fake clientsets, no API server; median of %d runs):\n\n", r.s.benchCount)
		p("| benchmark | ns/op | B/op | allocs/op | other |\n|---|---|---|---|---|\n")
	}
	for _, g := range r.goBench {
		var other []string
		for unit, v := range g.metrics {
			switch unit {
			case "ns/op", "B/op", "allocs/op":
			default:
				other = append(other, fmt.Sprintf("%s %s", thousands(int(v)), unit))
			}
		}
		slices.Sort(other)
		p("| %s | %s | %s | %s | %s |\n", g.name, thousands(int(g.metrics["ns/op"])), thousands(int(g.metrics["B/op"])),
			thousands(int(g.metrics["allocs/op"])), strings.Join(other, ", "))
	}
	p("\nEvery request of each run, by verb, resource and status code:\n\n")
	for _, x := range r.runs {
		what := fmt.Sprintf("N = %s, %s, %s", thousands(x.n), x.lim.label, probeLabel(x.probe))
		conv := x.converge.filter(notWatch)
		p("- %s, converging: %s\n", what, conv.String())
		p("  - per CR: %s\n", conv.perCR(x.n))
		if x.unchanged != nil {
			p("- %s, one sync of every unchanged CR: %s\n", what, x.unchanged.requests.String())
		}
		if x.idle != nil {
			p("- %s, idle: %s\n", what, x.idle.requests.String())
		}
		if x.heap != nil {
			p("- %s, while the unrelated objects were created: %s\n", what, x.heap.during.String())
		}
	}
	return b.String()
}

// dnsNote says how the probes' lookups failed.
func dnsNote(hostDNS bool) string {
	if hostDNS {
		return "**LLSC_BENCH_HOST_DNS: the host's resolver answered them, so the failures' text depended on it**"
	}
	return "no query leaves the process"
}

// heapPerCR is the growth of the heap after GC from no CR to N converged CRs, per CR, in
// KiB.
func heapPerCR(x *runResult) float64 {
	return (float64(x.heapConverged.HeapAlloc) - float64(x.heapEmpty.HeapAlloc)) / 1024 / float64(x.n)
}

// marginal is the growth of the heap (KiB) and of the CPU time while converging (ms) per
// CR added from the next smaller size to x's, with the same limits and probe mode:
// what one more CR costs, without the one-time costs (first use of a cache, of the
// conversion, of a client) that dominate growth/N at small N. NaN at the smallest size.
func (r *report) marginal(x *runResult) (heapKiB, cpuMs float64) {
	var prev *runResult
	for _, n := range r.s.sizes {
		if y := r.run(n, x.lim, x.probe); y != nil && n < x.n && (prev == nil || n > prev.n) {
			prev = y
		}
	}
	if prev == nil {
		return math.NaN(), math.NaN()
	}
	dn := float64(x.n - prev.n)
	growth := func(y *runResult) float64 {
		return float64(y.heapConverged.HeapAlloc) - float64(y.heapEmpty.HeapAlloc)
	}
	return (growth(x) - growth(prev)) / 1024 / dn, 1000 * (x.convergeCPU - prev.convergeCPU) / dn
}

// curveFigures are a run's costs per CR, as the cost curve shows them.
type curveFigures struct {
	timePerCR, requests, mutating, reads, events, statusWrites, syncs, heapKiB, cpuMs float64
	// marginalHeapKiB and marginalCPUMs are from report.marginal.
	marginalHeapKiB, marginalCPUMs float64
	// idleRequests are the requests other than watches per CR in six idle minutes; NaN
	// where the idle window was not measured.
	idleRequests float64
	// idleSyncs are the syncs per CR and minute in the idle window (the probes' with probes
	// on); NaN where it was not measured.
	idleSyncs float64
}

func (r *report) figuresOf(x *runResult) curveFigures {
	bd, n := breakdown(x), float64(x.n)
	f := curveFigures{
		timePerCR: 1000 * x.toReady.Seconds() / n,
		requests:  float64(bd.mutating+bd.gets+bd.lists+bd.events) / n,
		mutating:  float64(bd.mutating) / n, reads: float64(bd.gets+bd.lists) / n, events: float64(bd.events) / n,
		statusWrites: float64(bd.statusUpdates) / n, syncs: x.convergeSyncs / n,
		heapKiB: heapPerCR(x), cpuMs: 1000 * x.convergeCPU / n, idleRequests: math.NaN(), idleSyncs: math.NaN(),
	}
	f.marginalHeapKiB, f.marginalCPUMs = r.marginal(x)
	if x.idle != nil {
		f.idleRequests = float64(x.idle.requests.filter(notWatch).total()) / n / x.idle.took.Minutes() * 6
		f.idleSyncs = x.idle.syncs / n / x.idle.took.Minutes()
	}
	return f
}

// curveTitle heads the plot.
func (r *report) curveTitle() string {
	t := fmt.Sprintf("Cost per CR against N (%s, %d workers)", r.s.limits[0].label, r.s.workers)
	if r.s.quick {
		t += ": quick mode, not the reference numbers"
	}
	return t
}

// curvePanels are the plot's small multiples: one per cost, one series per probe mode at
// the first limits (and, for the time, per other set of limits).
func (r *report) curvePanels() []plotPanel {
	type metric struct {
		title, yLabel string
		value         func(curveFigures) float64
	}
	metrics := []metric{
		{"time to all Ready, per CR", "ms per CR", func(f curveFigures) float64 { return f.timePerCR }},
		{"requests per CR, all but watches", "requests per CR", func(f curveFigures) float64 { return f.requests }},
		{"status writes per CR", "status writes per CR", func(f curveFigures) float64 { return f.statusWrites }},
		{"heap after GC per CR", "KiB per CR", func(f curveFigures) float64 { return f.heapKiB }},
		{"heap per CR added (marginal)", "KiB per CR", func(f curveFigures) float64 { return f.marginalHeapKiB }},
		{"controller CPU per CR, converging", "CPU ms per CR", func(f curveFigures) float64 { return f.cpuMs }},
		{"CPU per CR added (marginal)", "CPU ms per CR", func(f curveFigures) float64 { return f.marginalCPUMs }},
		{"idle requests per CR (6 min)", "requests per CR", func(f curveFigures) float64 { return f.idleRequests }},
		{"idle syncs per CR a minute", "syncs per CR a minute", func(f curveFigures) float64 { return f.idleSyncs }},
	}
	var panels []plotPanel
	for i, m := range metrics {
		pn := plotPanel{title: m.title, yLabel: m.yLabel}
		add := func(name string, lim limits, probe string) {
			sr := plotSeries{name: name}
			for _, n := range r.s.sizes {
				if x := r.run(n, lim, probe); x != nil {
					sr.points = append(sr.points, plotPoint{x: float64(n), y: m.value(r.figuresOf(x))})
				}
			}
			if len(sr.points) > 0 {
				pn.series = append(pn.series, sr)
			}
		}
		for _, probe := range r.s.probes {
			add(probeLabel(probe), r.s.limits[0], probe)
		}
		if i == 0 {
			for _, lim := range r.s.limits[1:] {
				add(probeLabel(r.s.probes[0])+", "+lim.label, lim, r.s.probes[0])
			}
		}
		panels = append(panels, pn)
	}
	return panels
}

// renderCurve writes the cost curve section: one row per probe mode and size, and how
// much each cost per CR changed from the smallest size to the largest; image is the
// plot's file, linked beside the table.
func (r *report) renderCurve(image string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	lim := r.s.limits[0]
	p("### The cost curve\n\n")
	p("Cost per CR as N grows, %s, %d workers: converging from empty until %s after the last CR is Ready and %s without a write; the heap is the growth of the heap after GC from no CR to N converged CRs, divided by N, and in brackets its marginal cost, the growth per CR added from the next smaller N (one-time costs, such as a cache's or a client's first use, weigh on the first at small N and cancel out of the second); the CPU likewise; idle requests are those other than watches in the idle window, per CR and six minutes (measured at ", lim.label, r.s.workers, r.s.tail, quietFor)
	if r.s.idleEvery {
		p("every size).")
	} else {
		p("the largest size only, to keep `make bench` short; `LLSC_BENCH_IDLE_EVERY=1` measures it at every size).")
	}
	p(" A cost per CR that stays flat as N grows is work that does not grow with the number of CRs. Plotted in [%s](%s).\n\n", image, image)
	p("| probes | N | kwok nodes | all Ready | time per CR | requests per CR: all but watches (mutating / reads / Events) | status writes per CR | syncs per CR | heap per CR (marginal) | CPU per CR (marginal) | idle requests per CR (6 min) |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, probe := range r.s.probes {
		for _, n := range r.s.sizes {
			x := r.run(n, lim, probe)
			if x == nil {
				continue
			}
			f := r.figuresOf(x)
			idle := "—"
			if finite(f.idleRequests) {
				idle = fmt.Sprintf("%.2f (%s in %s)", f.idleRequests, thousands(x.idle.requests.filter(notWatch).total()), x.idle.took.Round(time.Second))
			}
			heap, cpu := fmt.Sprintf("%.1f KiB", f.heapKiB), fmt.Sprintf("%.2f ms", f.cpuMs)
			if finite(f.marginalHeapKiB) {
				heap += fmt.Sprintf(" (%.1f)", f.marginalHeapKiB)
				cpu += fmt.Sprintf(" (%.2f)", f.marginalCPUMs)
			}
			p("| %s | %s | %d | %.1f s | %.1f ms | %.2f (%.2f / %.2f / %.2f) | %.2f | %.2f | %s | %s | %s |\n",
				probeLabel(probe), thousands(n), x.nodes, x.toReady.Seconds(), f.timePerCR, f.requests, f.mutating, f.reads, f.events,
				f.statusWrites, f.syncs, heap, cpu, idle)
		}
	}
	lo, hi := slices.Min(r.s.sizes), slices.Max(r.s.sizes)
	if lo == hi {
		return b.String()
	}
	p("\nEach cost per CR at N = %s against N = %s (1.00: flat):\n\n", thousands(hi), thousands(lo))
	ratio := func(a, b float64) string {
		if b == 0 {
			if a == 0 {
				return "1.00 (0 at both)"
			}
			return "— (0 at the smallest)"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, probe := range r.s.probes {
		xl, xh := r.run(lo, lim, probe), r.run(hi, lim, probe)
		if xl == nil || xh == nil {
			continue
		}
		fl, fh := r.figuresOf(xl), r.figuresOf(xh)
		p("- %s: time %s, requests %s, status writes %s, syncs %s, heap %s, CPU %s", probeLabel(probe),
			ratio(fh.timePerCR, fl.timePerCR), ratio(fh.requests, fl.requests), ratio(fh.statusWrites, fl.statusWrites),
			ratio(fh.syncs, fl.syncs), ratio(fh.heapKiB, fl.heapKiB), ratio(fh.cpuMs, fl.cpuMs))
		// The marginal costs from the first pair of sizes to the last.
		var first, last *curveFigures
		for _, n := range r.s.sizes {
			if x := r.run(n, lim, probe); x != nil {
				if f := r.figuresOf(x); finite(f.marginalHeapKiB) {
					if first == nil {
						first = &f
					}
					last = &f
				}
			}
		}
		if first != nil && last != first {
			p("; marginal heap %s, marginal CPU %s", ratio(last.marginalHeapKiB, first.marginalHeapKiB), ratio(last.marginalCPUMs, first.marginalCPUMs))
		}
		p("\n")
	}
	return b.String()
}

// duration renders nanoseconds with a unit that suits them.
func duration(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	default:
		return fmt.Sprintf("%.0f ns", ns)
	}
}

func mapsEqual(a, b map[string]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}
