//go:build bench

// Package bench is the load driver of `make bench`. It starts a real local control plane
// (test/localcluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok fake nodes), runs the controller in a child process (this test binary started
// again in controller mode, so the driver's own allocations never show in the
// controller's heap), applies the load of upstream-cost.md, and prints one markdown
// table: requests counted by a round-tripper in the controller's client, time to Ready,
// heap after GC, and the Go benchmarks of pkg/controller.
//
// It is behind the build tag bench, so neither `go test ./...` nor the e2e suite runs it.
// LLSC_BENCH_QUICK=1 makes a short run for development (smaller loads, a 1-minute idle
// window); its table is marked as such. See BENCHMARKS.md.
package bench

import (
	"flag"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		// Controller mode: this process is the controller under measurement.
		os.Exit(runChild(spec))
	}
	flag.Parse()
	os.Exit(m.Run())
}
