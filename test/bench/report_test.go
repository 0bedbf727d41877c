//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
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

func (r *report) run(n int, lim limits) *runResult {
	for _, x := range r.runs {
		if x.n == n && x.lim == lim {
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

// render writes the markdown report: the table, the Go benchmarks, and the details.
func (r *report) render() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	sizes := r.s.sizes
	upstream := slices.Equal(sizes, []int{50, 200})

	p("## Results\n\n")
	if r.s.quick {
		p("**Quick mode (LLSC_BENCH_QUICK): smaller loads and windows than the issue's; not the reference numbers.**\n\n")
	}
	p("- Run: %s, %s in all; load average %s before, %s after.\n", r.started.UTC().Format("2006-01-02 15:04 UTC"),
		r.finished.Sub(r.started).Round(time.Second), r.loadBefore, r.loadAfter)
	p("- Machine: %s.\n", machine())
	p("- Control plane: Kubernetes %s (kube-apiserver, kube-controller-manager with client QPS %d, kube-scheduler), etcd %s, kwok %s with %d fake nodes; a fresh one for each N and client setting. Controller client: client-go %s.\n",
		r.versions["KUBE_VERSION"], kcmQPS, r.versions["ETCD_VERSION"], r.versions["KWOK_VERSION"], r.s.nodes, r.versions["CLIENT_GO"])
	p("- Controller: a separate process running `app.Run` as cmd/controller does, as the artifacts' ServiceAccount; %d workers, client %s unless noted, informer resync %s (short so the idle window spans several), server probes off (kwok pods serve nothing).\n",
		r.s.workers, r.s.limits[0].label, r.s.resync)
	p("- Requests are counted by a round-tripper in the controller's client, by verb, resource and status code. Mix (upstream-cost.md): N CRs over %d namespaces, distribution `starter`, one env var, storage on every 4th, autoscaling on every 5th, a PDB on every 3rd.\n\n",
		benchNamespaces)

	p("| figure | goal |")
	for _, n := range sizes {
		p(" N = %d |", n)
	}
	if upstream {
		p(" upstream, N = 50 / 200 |")
	}
	p("\n|---|---|")
	for range sizes {
		p("---|")
	}
	if upstream {
		p("---|")
	}
	p("\n")
	row := func(figure, goal string, cell func(n int) string, up string) {
		p("| %s | %s |", figure, goal)
		for _, n := range sizes {
			c := cell(n)
			if c == "" {
				c = "—"
			}
			p(" %s |", c)
		}
		if upstream {
			p(" %s |", up)
		}
		p("\n")
	}
	def := func(n int) *runResult { return r.run(n, r.s.limits[0]) }

	row("mutating requests to converge from empty, until "+r.s.tail.String()+" after the last CR is Ready (ratio to the minimum)", "≤ 1.1",
		func(n int) string {
			x := def(n)
			if x == nil {
				return ""
			}
			bd := breakdown(x)
			return fmt.Sprintf("**%s (%.2f)**", thousands(bd.mutating), float64(bd.mutating)/float64(bd.minimum))
		}, "759 (3.16) / 1,938 (2.03), against one status write per CR")
	row("· minimum: one apply per child + two status writes per CR", "", func(n int) string {
		x := def(n)
		if x == nil {
			return ""
		}
		bd := breakdown(x)
		s := fmt.Sprintf("%s = %s children + 2 × %d", thousands(bd.minimum), thousands(bd.children), n)
		if !mapsEqual(x.children, x.expected) {
			s += fmt.Sprintf(" (**listed children differ: %v, expected %v**)", x.children, x.expected)
		}
		return s
	}, "240 / 957")
	row("· of which applies / status updates (409s) / other", "", func(n int) string {
		x := def(n)
		if x == nil {
			return ""
		}
		bd := breakdown(x)
		return fmt.Sprintf("%s / %s (%d) / %d; %.2f status writes per CR", thousands(bd.applies), thousands(bd.statusUpdates),
			bd.conflicts, bd.other, float64(bd.statusUpdates)/float64(n))
	}, "")
	row("Events while converging (apart from the budget)", "", func(n int) string {
		if x := def(n); x != nil {
			return thousands(breakdown(x).events)
		}
		return ""
	}, "")
	row("reads while converging: GETs (404s) / LISTs", "", func(n int) string {
		x := def(n)
		if x == nil {
			return ""
		}
		bd := breakdown(x)
		return fmt.Sprintf("%s (%s) / %d", thousands(bd.gets), thousands(bd.notFound), bd.lists)
	}, "3,000 GETs / 7,502 GETs, about half 404")
	row("syncs while converging", "", func(n int) string {
		if x := def(n); x != nil {
			return fmt.Sprintf("%.0f (%.1f per CR)", x.convergeSyncs, x.convergeSyncs/float64(n))
		}
		return ""
	}, "")
	row("requests other than watches in the idle window", "0", func(n int) string {
		x := def(n)
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
	row("syncs, controller CPU in the idle window", "", func(n int) string {
		x := def(n)
		if x == nil || x.idle == nil {
			return ""
		}
		return fmt.Sprintf("%.0f syncs, %.2f s CPU (%.2f %% of a core)", x.idle.syncs, x.idle.cpu, 100*x.idle.cpu/x.idle.took.Seconds())
	}, "142.6 s / 130.1 s CPU")
	row("requests per sync of an unchanged CR, reads included (every CR re-synced once)", "0", func(n int) string {
		x := def(n)
		if x == nil || x.unchanged == nil {
			return ""
		}
		req := x.unchanged.requests.total()
		s := fmt.Sprintf("**%.2f** (%d in %.0f syncs)", float64(req)/max(x.unchanged.syncs, 1), req, x.unchanged.syncs)
		if req > 0 {
			s += ": " + x.unchanged.requests.String()
		}
		return s
	}, "23 / 23")
	row(fmt.Sprintf("controller heap after GC: N CRs → after %s unrelated ConfigMaps of %d KiB and %s Deployments in other namespaces",
		thousands(r.s.configMaps), r.s.configMapBytes>>10, thousands(r.s.deployments)), "< 2 MiB growth", func(n int) string {
		x := def(n)
		if x == nil || x.heap == nil {
			return ""
		}
		h := x.heap
		s := fmt.Sprintf("**%.2f → %.2f MiB (%+.2f MiB)**; in use %.2f → %.2f MiB", mib(h.before.HeapAlloc), mib(h.after.HeapAlloc),
			mib(h.after.HeapAlloc)-mib(h.before.HeapAlloc), mib(h.before.HeapInuse), mib(h.after.HeapInuse))
		s += fmt.Sprintf("; requests meanwhile: %d", h.during.total())
		return s
	}, "— / 15.6 → 15.2 MiB in use (no GC forced)")
	row("CPU per sync of a converged CR (Go benchmark on the fixture; below)", "report", func(n int) string {
		if n != sizes[0] {
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
		row("time from the first create to all Ready, "+lim.label, "", func(n int) string {
			x := r.run(n, lim)
			if x == nil {
				return ""
			}
			return fmt.Sprintf("**%.1f s** (creates took %.1f s; the controller wrote its last child after %.1f s, its last Event after %.1f s)",
				x.toReady.Seconds(), x.createTook.Seconds(), x.written.Seconds(), x.eventsWritten.Seconds())
		}, up)
	}
	for _, lim := range r.s.limits[1:] {
		row("mutating requests to converge, "+lim.label+" (ratio)", "", func(n int) string {
			x := r.run(n, lim)
			if x == nil {
				return ""
			}
			bd := breakdown(x)
			return fmt.Sprintf("%s (%.2f), %.2f status writes per CR", thousands(bd.mutating), float64(bd.mutating)/float64(bd.minimum), float64(bd.statusUpdates)/float64(n))
		}, "")
	}

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
		p("- N = %d, %s, converging: %s\n", x.n, x.lim.label, x.converge.filter(notWatch).String())
		if x.unchanged != nil {
			p("- N = %d, %s, one sync of every unchanged CR: %s\n", x.n, x.lim.label, x.unchanged.requests.String())
		}
		if x.idle != nil {
			p("- N = %d, %s, idle: %s\n", x.n, x.lim.label, x.idle.requests.String())
		}
		if x.heap != nil {
			p("- N = %d, %s, while the unrelated objects were created: %s\n", x.n, x.lim.label, x.heap.during.String())
		}
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
