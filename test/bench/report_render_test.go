//go:build bench

package bench

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// syntheticRun is a run whose figures follow from n: a minimal convergence (one GET and
// one apply per child, writes per CR status writes per CR), 1 ms of CPU and 8 KiB of
// heap per CR, on top of a one-time 1 MiB of heap.
func syntheticRun(n int, lim limits, probe string, writes int) *runResult {
	exp := expectedChildren(n)
	children := 0
	for _, c := range exp {
		children += c
	}
	conv := requestCounts{
		"update llamastackdistributions/status 200": writes * n,
		"create events 201":                         children + n,
		"watch deployments 200":                     3,
	}
	for kind, c := range exp {
		conv["apply "+kind+" 201"] = c
		conv["get "+kind+" 404"] = c
	}
	return &runResult{
		n: n, lim: lim, probe: probe, nodes: nodesFor(n),
		createTook: time.Second, toReady: time.Duration(n) * 100 * time.Millisecond, written: time.Second, eventsWritten: time.Second,
		children: exp, expected: exp, converge: conv, convergeSyncs: float64(writes * n), convergeCPU: float64(n) / 1000,
		heapEmpty:     heapStats{HeapAlloc: 8 << 20},
		heapConverged: heapStats{HeapAlloc: 9<<20 + uint64(n)*8<<10},
	}
}

// TestRender renders the report of synthetic runs: no cluster, no controller. It checks
// the table's columns and rows, the cost curve's rows and ratios, and writes the plot;
// LLSC_BENCH_RENDER_OUT keeps both for a look.
func TestRender(t *testing.T) {
	s := settings{
		sizes: []int{50, 200, 1000}, tail: 30 * time.Second, idle: 6 * time.Minute, resync: time.Minute,
		configMaps: 2000, configMapBytes: 100 << 10, deployments: 1000, workers: 4, benchCount: 5,
		limits: []limits{defaultLimits, unlimitedLimits}, probes: []string{probeOff, probeService},
	}
	rep := &report{s: s, started: time.Now(), finished: time.Now(), versions: map[string]string{}}
	for _, p := range plans(s) {
		writes := 2
		if p.probe == probeService {
			writes = 3
		}
		x := syntheticRun(p.n, p.lim, p.probe, writes)
		if p.unchanged {
			x.unchanged = &unchangedResult{syncs: float64(p.n), requests: requestCounts{}}
		}
		if p.idle {
			x.idle = &idleResult{took: 6 * time.Minute, resyncs: 6, requests: requestCounts{"watch services 200": 5}, syncs: 0, cpu: 1}
			if p.probe == probeService {
				x.idle.syncs = float64(12 * p.n)
			}
		}
		if p.unrelated {
			x.heap = &heapResult{before: x.heapConverged, after: x.heapConverged, during: requestCounts{}}
		}
		rep.runs = append(rep.runs, x)
	}
	if got := len(rep.runs); got != 9 {
		t.Fatalf("%d runs planned, want 9 (3 sizes × 2 probe modes, then 3 sizes unlimited)", got)
	}
	md := rep.render()

	header := ""
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| figure |") {
			header = line
			break
		}
	}
	for _, want := range []string{"N = 50, probes off", "N = 50, probes on (service)", "N = 1,000, probes off", "N = 1,000, probes on (service)", "upstream"} {
		if !strings.Contains(header, want) {
			t.Errorf("table header %q lacks %q", header, want)
		}
	}
	rowOf := func(prefix string) []string {
		for _, line := range strings.Split(md, "\n") {
			if strings.HasPrefix(line, "| "+prefix) {
				return strings.Split(strings.Trim(line, "|"), "|")
			}
		}
		t.Fatalf("no row %q in:\n%s", prefix, md)
		return nil
	}
	// figure, goal, 6 columns, upstream.
	writes := rowOf("**status writes per CR**")
	if len(writes) != 9 {
		t.Fatalf("status writes row has %d cells: %q", len(writes), writes)
	}
	if !strings.Contains(writes[1], "2.2") {
		t.Errorf("status writes per CR, goal: %q, want 2.2", writes[1])
	}
	for i, want := range []string{"2.00", "3.00", "2.00", "3.00", "2.00", "3.00"} {
		if !strings.Contains(writes[2+i], want) {
			t.Errorf("status writes per CR, column %d: %q, want %s", i, writes[2+i], want)
		}
		// Probes on, the synthetic runs write three times per CR: over the goal.
		if over := strings.Contains(writes[2+i], "over the goal"); over != (want == "3.00") {
			t.Errorf("status writes per CR, column %d: %q, marked over the goal: %t, want %t", i, writes[2+i], over, !over)
		}
	}
	mutating := rowOf("mutating requests to converge from empty")
	if !strings.Contains(mutating[1], "1.10") {
		t.Errorf("mutating requests, goal: %q, want 1.10", mutating[1])
	}
	for i := range 6 {
		// Two status writes per CR is the minimum (1.00); three is over 1.10 at any N.
		if over, want := strings.Contains(mutating[2+i], "over the goal"), i%2 == 1; over != want {
			t.Errorf("mutating requests, column %d: %q, marked over the goal: %t, want %t", i, mutating[2+i], over, want)
		}
	}
	idle := rowOf("requests other than watches in the idle window")
	for i := range 4 {
		if strings.TrimSpace(idle[2+i]) != "—" {
			t.Errorf("idle window measured at N < 1,000 (column %d): %q", i, idle[2+i])
		}
	}
	if !strings.Contains(idle[6], "**0** in 6m0s") || !strings.Contains(idle[7], "**0** in 6m0s") {
		t.Errorf("idle at N = 1,000: %q, %q", idle[6], idle[7])
	}
	unlimited := rowOf("time from the first create to all Ready, unlimited QPS")
	if strings.TrimSpace(unlimited[3]) != "—" || !strings.Contains(unlimited[2], "5.0 s") {
		t.Errorf("unlimited runs are probes off only: %q", unlimited)
	}
	for _, want := range []string{
		"| probes on (service) | 1,000 | 38 | 100.0 s | 100.0 ms |",
		// The one-time MiB weighs on growth/N, not on the marginal cost.
		"| 9.0 KiB (8.0) | 1.00 ms (1.00) |",
		"| probes off | 50 | 10 |",
		"| 28.5 KiB | 1.00 ms | — |",
		"- probes off: time 1.00, requests 1.00, status writes 1.00, syncs 1.00, heap 0.32, CPU 1.00; marginal heap 1.00, marginal CPU 1.00",
		"  - per CR: ",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}

	var svg bytes.Buffer
	panels := rep.curvePanels()
	if err := writeCostCurve(&svg, rep.curveTitle(), panels); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(svg.String(), "<polyline"); n != 9*2+1 {
		t.Errorf("%d polylines, want 19 (two probe modes in nine panels, and the unlimited time)", n)
	}
	if dir := os.Getenv("LLSC_BENCH_RENDER_OUT"); dir != "" {
		for name, data := range map[string][]byte{"results.md": []byte(md), "cost-curve.svg": svg.Bytes()} {
			if err := os.WriteFile(fmt.Sprintf("%s/%s", dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestNodesFor(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 10}, {50, 10}, {200, 10}, {267, 10}, {268, 11}, {1000, 38}, {5000, 188}} {
		if got := nodesFor(c.n); got != c.want {
			t.Errorf("nodesFor(%d) = %d, want %d", c.n, got, c.want)
		}
		// Room for every pod, by CPU and by pod count.
		if got := nodesFor(c.n); got*min(nodeCPU/podCPU, nodePods) < c.n {
			t.Errorf("nodesFor(%d) = %d nodes: no room for %d pods", c.n, got, c.n)
		}
	}
}
