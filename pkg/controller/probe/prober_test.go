package probe

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// key is the key of a CR of the test namespace.
func key(name string) cache.ObjectName { return cache.ObjectName{Namespace: "demo", Name: name} }

func TestNextProbeWait(t *testing.T) {
	base := time.Minute
	for _, tc := range []struct {
		last  time.Duration
		reset bool
		want  time.Duration
	}{
		{0, false, base}, // the first answer
		{base, false, 2 * base},
		{2 * base, false, 4 * base},
		{4 * base, false, 8 * base},
		{8 * base, false, 8 * base}, // the cap
		{8 * base, true, base},      // changed
		{base, true, base},
	} {
		assert.Equal(t, tc.want, nextProbeWait(tc.last, base, tc.reset), "after %s, reset %t", tc.last, tc.reset)
	}
}

func TestJitterOnlyShortens(t *testing.T) {
	d := 8 * time.Minute
	assert.Equal(t, d, jittered(d, 0))
	assert.Equal(t, d-24*time.Second, jittered(d, 0.5))
	for range 1000 {
		j := jittered(d, rand.Float64())
		assert.LessOrEqual(t, j, d)
		assert.Greater(t, j, d*9/10)
	}
}

// scriptedServer is a llama-stack server on a fake clock: it records when it is asked,
// and can hold each probe until released.
type scriptedServer struct {
	clock *testingclock.FakeClock
	mu    sync.Mutex
	// healthy and version are its answers.
	healthy bool
	version string
	probes  []time.Time
	// hold, when set, holds each /v1/health until a value is sent on it.
	hold               chan struct{}
	running, maxAtOnce int
}

func (s *scriptedServer) Get(ctx context.Context, path string) (int, []byte, error) {
	s.mu.Lock()
	hold := s.hold
	if path == serverHealthPath {
		s.probes = append(s.probes, s.clock.Now())
		s.running++
		s.maxAtOnce = max(s.maxAtOnce, s.running)
	}
	healthy, version := s.healthy, s.version
	s.mu.Unlock()
	if path == serverHealthPath {
		defer func() { s.mu.Lock(); s.running--; s.mu.Unlock() }()
		if hold != nil {
			<-hold
		}
	}
	switch path {
	case serverHealthPath:
		if !healthy {
			return http.StatusServiceUnavailable, []byte(`{"status":"Error"}`), nil
		}
		return http.StatusOK, []byte(`{"status":"OK"}`), nil
	case serverVersionPath:
		return http.StatusOK, []byte(`{"version":"` + version + `"}`), nil
	case serverProvidersPath:
		return http.StatusOK, []byte(`{"data":[]}`), nil
	}
	return http.StatusNotFound, nil, nil
}

func (s *scriptedServer) set(edit func(*scriptedServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	edit(s)
}

// gaps are the waits between the probes so far.
func (s *scriptedServer) gaps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(s.probes); i++ {
		out = append(out, s.probes[i].Sub(s.probes[i-1]))
	}
	return out
}

func (s *scriptedServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.probes)
}

// probeSim is a prober asking a scriptedServer, on a fake clock.
type probeSim struct {
	t        *testing.T
	ctx      context.Context
	clock    *testingclock.FakeClock
	srv      *scriptedServer
	p        *Prober
	enqueued atomic.Int64
	l        *v1alpha2.LlamaStackDistribution
	state    State
}

func newProbeSim(t *testing.T, base time.Duration) *probeSim {
	_, ctx := ktesting.NewTestContext(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := &probeSim{t: t, ctx: ctx, clock: clk, srv: &scriptedServer{clock: clk, healthy: true, version: "0.3.0"}}
	s.p = New(Config{
		Endpoint: func(Service, *TLS) Endpoint { return s.srv },
		Interval: base, Timeout: time.Second,
	}, func(cache.ObjectName) { s.enqueued.Add(1) })
	s.p.clock = clk
	s.p.jitter = func() float64 { return 0 }
	t.Cleanup(s.p.Wait)
	s.l = &v1alpha2.LlamaStackDistribution{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "app", UID: "uid-1", Generation: 1}}
	s.state = State{generation: 1, deployment: 1, observed: 1, replicas: 1, updated: 1, ready: 1, available: 1}
	return s
}

// sync reports the server to the prober as a sync of its CR does, and waits for what
// that started.
func (s *probeSim) sync() (Result, bool) {
	res, ok := s.p.Observe(s.ctx, key("app"), s.l.UID, Service{}, s.state, nil)
	s.settle()
	return res, ok
}

// settle waits until no probe runs or is about to start.
func (s *probeSim) settle() {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		s.p.mu.Lock()
		defer s.p.mu.Unlock()
		timers := 0
		for _, e := range s.p.entries {
			if e.timer != nil {
				timers++
			}
		}
		return len(s.p.inFlight) == 0 && s.clock.Waiters() == timers
	}, 5*time.Second, 50*time.Microsecond)
	// A probe no longer in flight may still be about to enqueue its CR; no other
	// starts until the fake clock moves.
	s.p.wg.Wait()
}

// advance moves the clock by d, 5 s at a time, letting each probe due run.
func (s *probeSim) advance(d time.Duration) {
	for ; d > 0; d -= 5 * time.Second {
		s.clock.Step(min(d, 5*time.Second))
		s.settle()
	}
}

// The schedule of the probes of one server: backing off while its answers do not change,
// back to the base interval, with a probe at once, when something changes.
func TestProbeBackoff(t *testing.T) {
	const m = time.Minute
	for name, tc := range map[string]struct {
		setup func(s *probeSim)
		at    time.Duration // when do happens
		do    func(s *probeSim)
		want  []time.Duration
		// enqueued is how many answers brought the CR back (the changed ones).
		enqueued int64
	}{
		"unchanged answers back off to the cap": {
			want: []time.Duration{m, 2 * m, 4 * m, 8 * m, 8 * m, 8 * m, 8 * m}, enqueued: 1,
		},
		"syncs with nothing changed neither probe nor restart the wait": {
			at: 2 * m, do: func(s *probeSim) {
				for range 10 {
					s.sync()
					s.advance(10 * time.Second)
				}
			},
			want: []time.Duration{m, 2 * m, 4 * m, 8 * m, 8 * m, 8 * m, 8 * m}, enqueued: 1,
		},
		"a changed answer starts over": {
			at: 16 * m, do: func(s *probeSim) { s.srv.set(func(s *scriptedServer) { s.version = "0.3.1" }) },
			// Probes at 0, 1, 3, 7, 15; the one at 23 sees the new version; then 24,
			// 26, 30, 38.
			want: []time.Duration{m, 2 * m, 4 * m, 8 * m, 8 * m, m, 2 * m, 4 * m, 8 * m}, enqueued: 2,
		},
		"a failure starts over, and backs off once it repeats": {
			at: 16 * m, do: func(s *probeSim) { s.srv.set(func(s *scriptedServer) { s.healthy = false }) },
			// Probes at 0, 1, 3, 7, 15; the one at 23 fails; then 24, 26, 30, 38 fail
			// the same way.
			want: []time.Duration{m, 2 * m, 4 * m, 8 * m, 8 * m, m, 2 * m, 4 * m, 8 * m}, enqueued: 2,
		},
		"a server failing from the start backs off": {
			setup: func(s *probeSim) { s.srv.set(func(s *scriptedServer) { s.healthy = false }) },
			want:  []time.Duration{m, 2 * m, 4 * m, 8 * m, 8 * m, 8 * m, 8 * m}, enqueued: 1,
		},
		"a Deployment change is probed at once": {
			at: 10 * m, do: func(s *probeSim) { s.state.ready, s.state.available = 0, 0; s.sync() },
			// Probes at 0, 1, 3, 7, then 10 (the change), 11, 13, 17, 25, 33, 41.
			want: []time.Duration{m, 2 * m, 4 * m, 3 * m, m, 2 * m, 4 * m, 8 * m, 8 * m, 8 * m}, enqueued: 1,
		},
		"a new generation of the CR is probed at once": {
			at: 10 * m, do: func(s *probeSim) { s.l.Generation, s.state.generation = 2, 2; s.sync() },
			want:     []time.Duration{m, 2 * m, 4 * m, 3 * m, m, 2 * m, 4 * m, 8 * m, 8 * m, 8 * m},
			enqueued: 1,
		},
		"a CR of the same name is probed afresh": {
			at: 10 * m, do: func(s *probeSim) {
				s.l.UID = "uid-2"
				_, ok := s.sync()
				assert.False(t, ok, "the answer of the CR before it was taken for the new one's")
				res, ok := s.sync()
				assert.True(t, ok, "the new CR's first answer came")
				assert.Equal(t, s.l.UID, res.UID)
			},
			want: []time.Duration{m, 2 * m, 4 * m, 3 * m, m, 2 * m, 4 * m, 8 * m, 8 * m, 8 * m}, enqueued: 2,
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newProbeSim(t, time.Minute)
			if tc.setup != nil {
				tc.setup(s)
			}
			_, ok := s.sync()
			require.False(t, ok, "an answer before the first probe")
			if tc.do != nil {
				s.advance(tc.at)
				tc.do(s)
				s.advance(43*m - tc.at)
			} else {
				s.advance(43 * m)
			}
			assert.Equal(t, tc.want, s.srv.gaps())
			assert.Equal(t, tc.enqueued, s.enqueued.Load(), "CRs enqueued by an answer")
			res, ok := s.sync()
			require.True(t, ok)
			assert.Equal(t, s.l.UID, res.UID)
		})
	}
}

// An idle server is asked about ten times in an hour with the 1-minute default, not 60.
func TestIdleServerProbedTenTimesAnHour(t *testing.T) {
	s := newProbeSim(t, time.Minute)
	s.p.jitter = rand.Float64
	s.sync()
	s.advance(time.Hour - time.Second)
	t.Logf("probes in an idle hour: %d (one a minute before the back-off: 60)", s.srv.count())
	assert.GreaterOrEqual(t, s.srv.count(), 10)
	assert.LessOrEqual(t, s.srv.count(), 11, "jitter takes at most a tenth off each wait")
	assert.Equal(t, int64(1), s.enqueued.Load(), "unchanged answers brought the CR back")
	for _, g := range s.srv.gaps() {
		assert.LessOrEqual(t, g, 8*time.Minute)
	}
}

// A server that changes while it is being asked is asked again once that probe ends,
// never twice at once; a probe of a CR forgotten meanwhile brings nothing back.
func TestProbeOneAtATime(t *testing.T) {
	s := newProbeSim(t, time.Minute)
	hold := make(chan struct{})
	s.srv.set(func(s *scriptedServer) { s.hold = hold })
	s.p.Observe(s.ctx, key("app"), s.l.UID, Service{}, s.state, nil)
	require.Eventually(t, func() bool { return s.srv.count() == 1 }, 5*time.Second, time.Millisecond)

	// The Deployment changes, twice, while the probe runs.
	s.state.ready = 0
	s.p.Observe(s.ctx, key("app"), s.l.UID, Service{}, s.state, nil)
	s.state.ready = 1
	s.p.Observe(s.ctx, key("app"), s.l.UID, Service{}, s.state, nil)
	hold <- struct{}{}
	require.Eventually(t, func() bool { return s.srv.count() == 2 }, 5*time.Second, time.Millisecond)
	hold <- struct{}{}
	s.settle()
	assert.Equal(t, 1, s.srv.maxAtOnce, "probes of one server at once")
	assert.Equal(t, int64(1), s.enqueued.Load())

	// Forgotten while a probe runs (the server became unavailable), then available
	// again: the old probe's answer is dropped, and the new one starts after it.
	s.clock.Step(2 * time.Minute) // the second answer, unchanged, doubled the wait
	require.Eventually(t, func() bool { return s.srv.count() == 3 }, 5*time.Second, time.Millisecond)
	s.p.Forget(key("app"))
	_, ok := s.p.Observe(s.ctx, key("app"), s.l.UID, Service{}, s.state, nil)
	assert.False(t, ok, "an answer from before the server was forgotten")
	hold <- struct{}{}
	require.Eventually(t, func() bool { return s.srv.count() == 4 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, int64(1), s.enqueued.Load(), "the forgotten probe's answer brought the CR back")
	hold <- struct{}{}
	s.settle()
	assert.Equal(t, 1, s.srv.maxAtOnce, "probes of one server at once")
	assert.Equal(t, int64(2), s.enqueued.Load(), "the first answer after coming back")
}

// No timer or probe outlives its CR or the controller.
func TestProbeTimersStop(t *testing.T) {
	s := newProbeSim(t, time.Minute)
	s.sync()
	require.Equal(t, 1, s.clock.Waiters(), "the next probe's timer")
	s.p.Forget(key("app"))
	assert.Zero(t, s.clock.Waiters(), "a forgotten CR's timer is stopped")
	s.advance(time.Hour)
	assert.Equal(t, 1, s.srv.count())

	s.sync()
	require.Equal(t, 2, s.srv.count())
	s.p.Wait()
	assert.Zero(t, s.clock.Waiters(), "timers left after the controller stopped")
	s.state.ready = 0
	s.p.Observe(s.ctx, key("app"), s.l.UID, Service{}, s.state, nil)
	s.advance(time.Hour)
	assert.Equal(t, 2, s.srv.count(), "a probe after the controller stopped")
}
