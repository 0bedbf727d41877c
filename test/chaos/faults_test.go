//go:build e2e

package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/cmd/controller/app"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// A fifth of the controller's requests fail: 409 conflicts, 429 with Retry-After, 500s,
// timeouts before the request leaves, responses lost after the API server applied a
// write, and watches refused. Everything still converges, retries back off, and once
// converged the controller sends nothing, faults or not.
func TestInjectedAPIErrors(t *testing.T) {
	s := newScenario(t, 3)
	nsOf := func(i int) string { return s.namespaces[i%len(s.namespaces)] }
	from := time.Now()
	f := &faults{rate: 0.2, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))}
	f.on.Store(true)

	logFile := filepath.Join(env.workDir, "controller-faulty.log")
	stopLog := logTo(t, logFile)
	defer stopLog()
	cfg := rest.CopyConfig(env.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: serviceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"},
		Extra:    map[string][]string{"replica": {"faulty"}},
	}
	cfg.Wrap(f.wrap)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, cfg, app.Options{Workers: 4, QPS: 50, Burst: 100, OperatorNamespace: operatorNamespace,
			ServerProbe: "off", Version: "chaos"})
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("the controller did not stop within 30 s")
		}
		if t.Failed() {
			t.Logf("controller log (end):\n%s", tail(logFile, 80))
		}
	}()

	const crs = 30
	for i := range crs {
		createCR(t, mixed(nsOf(i), i))
	}
	for i := 0; i < crs; i += 3 {
		editCR(t, nsOf(i), fmt.Sprintf("llsd-%d", i), func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.ContainerSpec.Env = append(l.Spec.Server.ContainerSpec.Env, corev1.EnvVar{Name: "EDITED", Value: "1"})
		})
		s.edits[nsOf(i)+"/"+fmt.Sprintf("llsd-%d", i)]++
	}
	s.waitConverged(3 * time.Minute)

	// Converged CRs stay Ready through failing writes: a second round of edits rolls the
	// pods of every CR without storage (a rolling update keeps its one replica
	// available), with the faults still on, while every change of every CR is watched.
	var (
		flapMu  sync.Mutex
		flaps   []string
		watched atomic.Int64
		readers sync.WaitGroup
		stops   []func()
	)
	for _, ns := range s.namespaces {
		w, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Watch(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		stops = append(stops, w.Stop)
		readers.Add(1)
		go func() {
			defer readers.Done()
			for ev := range w.ResultChan() {
				hub, ok := ev.Object.(*v1alpha2.LlamaStackDistribution)
				if !ok || ev.Type != watch.Modified {
					continue
				}
				l := fromHub(t, hub)
				watched.Add(1)
				if c := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
					flapMu.Lock()
					flaps = append(flaps, l.Namespace+"/"+l.Name+" "+describe(l))
					flapMu.Unlock()
				}
			}
		}()
	}
	for i := 1; i < crs; i += 4 {
		editCR(t, nsOf(i), fmt.Sprintf("llsd-%d", i), func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.ContainerSpec.Env = append(l.Spec.Server.ContainerSpec.Env, corev1.EnvVar{Name: "EDITED_AGAIN", Value: "1"})
		})
		s.edits[nsOf(i)+"/"+fmt.Sprintf("llsd-%d", i)]++
	}
	s.waitConverged(3 * time.Minute)
	for _, stop := range stops {
		stop()
	}
	readers.Wait()
	flapMu.Lock()
	assert.Empty(t, flaps, "converged CRs left Ready under faults")
	flapMu.Unlock()
	assert.Positive(t, watched.Load(), "the CRs' changes were watched")
	t.Logf("Ready flaps on converged CRs under faults: %d of %d changes watched", len(flaps), watched.Load())
	converged := f.snapshot()

	// Converged: nothing left to do, so nothing is sent, faults or not. (Events whose
	// post or patch failed are retried by client-go's event broadcaster, every 10 s or
	// so.)
	time.Sleep(20 * time.Second)
	var idle, events []string
	for _, r := range f.since(converged) {
		if isEvent(r) {
			events = append(events, r)
		} else {
			idle = append(idle, r)
		}
	}
	assert.Empty(t, idle, "requests other than watches after convergence (a hot loop?)")
	t.Logf("Event writes after convergence (the broadcaster's retries): %v", events)

	s.recordPVCs()
	s.check(from)
	injected, sent := f.totals()
	t.Logf("injected faults: %v", injected)
	t.Logf("requests sent by the controller: %v", sent)
	assert.Positive(t, injected["409"]+injected["429"]+injected["500"]+injected["timeout"]+injected["lost"], "faults were injected")

	// Retries are bounded: the mutating requests stay within a small multiple of what
	// the work needs (one apply per child and edit, a few status writes per CR).
	var children int
	all, err := s.crs(context.Background())
	require.NoError(t, err)
	for i := range all {
		children += len(expectedChildren(&all[i]))
	}
	minimum := children + 2*crs + len(s.edits)*2
	mutating := sent["PATCH"] + sent["PUT"] + sent["POST"] + sent["DELETE"]
	t.Logf("mutating requests: %d (of which Events: %d); minimum for the work: %d", mutating, sent["events"], minimum)
	assert.LessOrEqual(t, mutating-sent["events"], 4*minimum, "retries do not pile up")
}

// faults fails a fraction of requests in the ways an API server and a network can.
type faults struct {
	rate float64
	on   atomic.Bool

	mu       sync.Mutex
	rng      *rand.Rand
	injected map[string]int
	sent     map[string]int // by method, plus "events" (Event writes), after injection decided
	requests map[string]int // non-watch requests by "METHOD path"
}

func (f *faults) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		watch := req.URL.Query().Get("watch") == "true"
		write := req.Method != http.MethodGet
		f.mu.Lock()
		if f.injected == nil {
			f.injected, f.sent, f.requests = map[string]int{}, map[string]int{}, map[string]int{}
		}
		if !watch {
			f.requests[req.Method+" "+req.URL.Path]++
		}
		kind := ""
		if f.on.Load() && f.rng.Float64() < f.rate {
			kinds := []string{"429", "500", "timeout"}
			if write {
				kinds = append(kinds, "409", "lost")
			}
			if watch {
				kinds = []string{"500"}
			}
			kind = kinds[f.rng.IntN(len(kinds))]
			f.injected[kind]++
		}
		if kind != "timeout" {
			f.sent[req.Method]++
			if isEvent(req.URL.Path) {
				f.sent["events"]++
			}
		}
		f.mu.Unlock()

		switch kind {
		case "409":
			return status(req, http.StatusConflict, "Conflict", nil), nil
		case "429":
			return status(req, http.StatusTooManyRequests, "TooManyRequests", http.Header{"Retry-After": {"1"}}), nil
		case "500":
			return status(req, http.StatusInternalServerError, "InternalError", nil), nil
		case "timeout":
			time.Sleep(200 * time.Millisecond)
			return nil, fmt.Errorf("injected: %w", os.ErrDeadlineExceeded)
		case "lost":
			// The API server applies the write; its answer never arrives.
			resp, err := rt.RoundTrip(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			return nil, errors.New("injected: connection reset by peer after the request was sent")
		}
		return rt.RoundTrip(req)
	})
}

// isEvent reports whether a request path (or "METHOD path" line) writes an Event.
func isEvent(path string) bool {
	return strings.Contains(path, "/events")
}

// status is an API server error response.
func status(req *http.Request, code int, reason string, h http.Header) *http.Response {
	body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"injected %d","reason":%q,"code":%d}`, code, reason, code)
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	return &http.Response{StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), Header: h,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}

func (f *faults) snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.requests))
	for k, v := range f.requests {
		out[k] = v
	}
	return out
}

// since lists the non-watch requests sent after an earlier snapshot.
func (f *faults) since(before map[string]int) []string {
	var out []string
	for k, v := range f.snapshot() {
		if d := v - before[k]; d > 0 {
			out = append(out, fmt.Sprintf("%dx %s", d, k))
		}
	}
	sort.Strings(out)
	return out
}

func (f *faults) totals() (injected, sent map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	injected, sent = map[string]int{}, map[string]int{}
	for k, v := range f.injected {
		injected[k] = v
	}
	for k, v := range f.sent {
		sent[k] = v
	}
	return injected, sent
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (r roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return r(req) }

// logTo sends klog's output (the in-process controller's log) to a file until stop.
func logTo(t *testing.T, path string) (stop func()) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for k, v := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL", "v": "2"} {
		require.NoError(t, fs.Set(k, v))
	}
	klog.SetOutput(f)
	return func() {
		klog.Flush()
		klog.SetOutput(io.Discard)
		_ = f.Close()
	}
}
