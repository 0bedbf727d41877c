package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// fakeLlamaStack is a llama-stack server the test controls.
type fakeLlamaStack struct {
	*httptest.Server
	healthy atomic.Bool
	delay   atomic.Int64 // nanoseconds before answering /v1/health
	// hold, when set, keeps /v1/health from answering until it is closed or the
	// client gives up.
	hold     atomic.Pointer[chan struct{}]
	requests atomic.Int64
}

func newFakeLlamaStack(t *testing.T) *fakeLlamaStack {
	s := &fakeLlamaStack{}
	s.healthy.Store(true)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/health":
			s.requests.Add(1)
			time.Sleep(time.Duration(s.delay.Load()))
			if hold := s.hold.Load(); hold != nil {
				select {
				case <-*hold:
				case <-r.Context().Done():
					return
				}
			}
			if !s.healthy.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"status":"Error"}`)
				return
			}
			fmt.Fprint(w, `{"status":"OK"}`)
		case "/v1/version":
			fmt.Fprint(w, `{"version":"0.2.23"}`)
		case "/v1/providers":
			fmt.Fprint(w, `{"data":[{"api":"inference","provider_id":"ollama","provider_type":"remote::ollama","config":{"api_key":"secret"},"health":{"status":"OK"}}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// withProber gives the fixture's controller a prober aimed at srv; probed receives the
// CRs whose probe finished (instead of the queue).
func (f *fixture) withProber(srv *fakeLlamaStack, timeout time.Duration) chan cache.ObjectName {
	probed := make(chan cache.ObjectName, 10)
	f.c.prober = newProber(ServerProbe{
		Endpoint: func(*v1alpha2.LlamaStackDistribution, *ServerTLS) ServerEndpoint {
			return newHTTPEndpoint(srv.Client(), srv.URL)
		},
		Interval: time.Hour,
		Timeout:  timeout,
	}, func(key cache.ObjectName) { probed <- key })
	// Timers of a fake clock: no probe starts unless a sync asks or the test steps it.
	f.c.prober.clock = testingclock.NewFakeClock(time.Now())
	t := f.t
	t.Cleanup(f.c.prober.wait)
	return probed
}

func waitProbed(t *testing.T, probed chan cache.ObjectName) {
	t.Helper()
	select {
	case <-probed:
	case <-time.After(5 * time.Second):
		t.Fatal("the probe never reported back")
	}
}

func TestHealthCheckFromTheServer(t *testing.T) {
	srv := newFakeLlamaStack(t)
	f := newFixture(t, newLLSD("app"))
	probed := f.withProber(srv, time.Second)
	f.converge("app")

	// Not ready: no probe, HealthCheck False as upstream.
	c := cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha2.ReasonServerNotAvailable, c.Reason)
	assert.Zero(t, srv.requests.Load())

	// Ready: the first sync starts a probe without waiting for it, and leaves the
	// status as it is: the answer brings the CR back, and Ready is written with it.
	f.setDeploymentStatus("app", rolledOut)
	assert.Empty(t, f.sync("app"), "Ready was written without the server's answer")
	assert.NotEqual(t, v1alpha2.PhaseReady, f.llsd("app").Status.Phase)
	waitProbed(t, probed)

	f.sync("app")
	l := f.llsd("app")
	c = cond(t, l, v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, v1alpha2.ReasonHealthCheckPassed, c.Reason)
	assert.Equal(t, "0.2.23", l.Status.Version.LlamaStackServerVersion)
	require.Len(t, l.Status.DistributionConfig.Providers, 1)
	p := l.Status.DistributionConfig.Providers[0]
	assert.Equal(t, "ollama", p.ProviderID)
	assert.Equal(t, "OK", p.Health.Status)
	assert.Empty(t, p.Config.Raw, "provider config may hold secrets and is not copied")
	assert.Equal(t, v1alpha2.PhaseReady, l.Status.Phase)

	// Nothing changed: the result is reused, no request, no write.
	before := srv.requests.Load()
	assert.Empty(t, f.sync("app"))
	assert.Equal(t, before, srv.requests.Load())
}

func TestHealthCheckUnhealthyServer(t *testing.T) {
	srv := newFakeLlamaStack(t)
	srv.healthy.Store(false)
	f := newFixture(t, newLLSD("app"))
	probed := f.withProber(srv, time.Second)
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.sync("app")
	waitProbed(t, probed)
	f.sync("app")
	l := f.llsd("app")
	c := cond(t, l, v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha2.ReasonHealthCheckFailed, c.Reason)
	assert.Contains(t, c.Message, "503")
	assert.Nil(t, l.Status.DistributionConfig.Providers)
}

// A slow server never blocks a worker, and one probe at a time runs per CR.
func TestHealthCheckSlowServerDoesNotBlock(t *testing.T) {
	srv := newFakeLlamaStack(t)
	release := make(chan struct{})
	srv.hold.Store(&release)
	f := newFixture(t, newLLSD("app"))
	// A timeout far longer than the test: the probe ends only when the server is
	// released, so syncs that return before that did not wait for it.
	probed := f.withProber(srv, time.Minute)
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sync("app")
		f.sync("app")
		f.sync("app")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("a sync waited for the server")
	}
	select {
	case <-probed:
		t.Fatal("the probe ended before the server answered")
	default:
	}
	require.Eventually(t, func() bool { return srv.requests.Load() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the probe reached the server")
	close(release)
	waitProbed(t, probed)
	assert.Equal(t, int64(1), srv.requests.Load(), "one probe in flight per CR")
	f.sync("app")
	c := cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionTrue, c.Status, "the held answer is reported once it comes")
}

// healthyAndProbed is a fixture whose CR "app" runs a server srv answered healthy, as
// its status reports; probed receives the CRs whose probe finished.
func healthyAndProbed(t *testing.T, srv *fakeLlamaStack) (*fixture, chan cache.ObjectName) {
	t.Helper()
	f := newFixture(t, newLLSD("app"))
	probed := f.withProber(srv, time.Second)
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.sync("app")
	waitProbed(t, probed)
	f.converge("app")
	require.Equal(t, metav1.ConditionTrue, cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck).Status)
	return f, probed
}

// After a restart (an empty prober) the last reported HealthCheck is kept until the new
// answer comes: no status write when nothing changed.
func TestHealthCheckSurvivesARestart(t *testing.T) {
	srv := newFakeLlamaStack(t)
	f, probed := healthyAndProbed(t, srv)

	f.restartController()
	probed = f.withProber(srv, time.Second)
	assert.Empty(t, mutating(f.sync("app")), "the restart rewrote the status")
	waitProbed(t, probed)
	assert.Empty(t, mutating(f.sync("app")), "the same answer rewrote the status")
	assert.Equal(t, metav1.ConditionTrue, cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck).Status)
}

// A healthy server whose /v1/providers does not answer keeps the providers last reported.
func TestProvidersKeptWhenTheirEndpointFails(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.withProber(newFakeLlamaStack(t), time.Second)
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	l := f.llsd("app")
	l.Status.DistributionConfig.Providers = []v1alpha2.ProviderInfo{{API: "inference", ProviderID: "ollama"}}
	d := f.deployment("app")
	svc := f.stored(kindService, "app-service").(*corev1.Service)
	st := f.c.calculateStatus(l, observed{deployment: d, service: svc, probe: &probeResult{info: serverInfo{healthy: true}}}, metav1.Now())
	assert.Equal(t, l.Status.DistributionConfig.Providers, st.DistributionConfig.Providers)
	st = f.c.calculateStatus(l, observed{deployment: d, service: svc, probe: &probeResult{info: serverInfo{healthy: true, providersKnown: true}}}, metav1.Now())
	assert.Empty(t, st.DistributionConfig.Providers, "an answer with no providers clears them")
}

// A server that stops serving is probed afresh when it comes back: no HealthCheck=True
// from before the outage.
func TestHealthCheckAfterAnOutageIsFresh(t *testing.T) {
	srv := newFakeLlamaStack(t)
	f, probed := healthyAndProbed(t, srv)

	// Outage: no replica available; the server comes back unhealthy.
	f.setDeploymentStatus("app", func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 0 })
	f.converge("app")
	assert.Equal(t, v1alpha2.ReasonServerNotAvailable, cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck).Reason)
	srv.healthy.Store(false)
	f.setDeploymentStatus("app", rolledOut)
	f.sync("app")
	c := cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck)
	assert.NotEqual(t, metav1.ConditionTrue, c.Status, "the answer from before the outage was reused")
	waitProbed(t, probed)
	f.sync("app")
	c = cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha2.ReasonHealthCheckFailed, c.Reason)
}

// A CR's delete clears everything kept for it: the prober's answers (also one still in
// flight), the CA bundle failure memory, the recheck backoff, the failure clock and the
// ready gauge series.
func TestDeletedCRLeavesNoState(t *testing.T) {
	RegisterMetrics()
	for _, probing := range []bool{true, false} {
		t.Run(fmt.Sprintf("probing=%t", probing), func(t *testing.T) {
			srv := newFakeLlamaStack(t)
			f := newFixture(t, newLLSD("app"))
			var probed chan cache.ObjectName
			if probing {
				probed = f.withProber(srv, time.Second)
			}
			f.converge("app")
			f.setDeploymentStatus("app", rolledOut)
			f.converge("app")
			if probing {
				waitProbed(t, probed) // Ready comes with the server's first answer
				f.converge("app")
			}
			k := key("app")
			labels := map[string]string{"namespace": testNamespace, "name": "app"}
			require.Equal(t, 1.0, gauge(t, "llama_stack_controller_llamastackdistribution_ready", labels))
			f.c.caFailures.Store(k, caFailure{})
			f.c.failing.Store(k, failure{})
			f.c.scheduleRecheck(k)
			if probing {
				srv.delay.Store(int64(300 * time.Millisecond))
				// The next probe is due: it answers after the delete.
				before := srv.requests.Load()
				f.c.prober.clock.(*testingclock.FakeClock).Step(2 * time.Hour)
				require.Eventually(t, func() bool { return srv.requests.Load() > before }, 5*time.Second, time.Millisecond)
			}

			require.NoError(t, f.client.LlamastackV1alpha2().LlamaStackDistributions(testNamespace).Delete(f.ctx, "app", metav1.DeleteOptions{}))
			gone := f.c.llsdLister.LlamaStackDistributions(testNamespace)
			l, err := gone.Get("app")
			require.NoError(t, err)
			f.refreshCaches()
			f.queued()
			f.c.enqueueDeleted(cache.DeletedFinalStateUnknown{Key: "demo/app", Obj: l})
			require.Equal(t, []cache.ObjectName{k}, f.queued(), "the delete is synced")
			f.sync("app")
			if probing {
				f.c.prober.wait()
				assert.Empty(t, probed, "the answer of a deleted CR's server enqueued it")
				f.c.prober.mu.Lock()
				assert.Empty(t, f.c.prober.entries, "prober results kept")
				assert.Empty(t, f.c.prober.inFlight)
				f.c.prober.mu.Unlock()
				assert.Zero(t, f.c.prober.clock.(*testingclock.FakeClock).Waiters(), "a probe timer left")
			}
			_, ok := f.c.caFailures.Load(k)
			assert.False(t, ok, "CA failure memory kept")
			_, ok = f.c.failing.Load(k)
			assert.False(t, ok, "failure clock kept")
			f.c.recheckMu.Lock()
			assert.Empty(t, f.c.recheckAt, "recheck kept")
			f.c.recheckMu.Unlock()
			assert.Equal(t, -1.0, gauge(t, "llama_stack_controller_llamastackdistribution_ready", labels), "ready gauge series kept")
		})
	}
}

// statusWrites counts the CR status writes among actions.
func statusWrites(actions []core.Action) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" && a.GetResource().Resource == "llamastackdistributions" {
			n++
		}
	}
	return n
}

// With probes on, a CR goes from created to Ready in two status writes, as without
// them: the first (Initializing), and the one that makes it Ready, which carries the
// server's first answer (not one more for the answer).
func TestReadyWithTheFirstAnswerInTwoStatusWrites(t *testing.T) {
	for name, tc := range map[string]struct{ slow, storage bool }{
		"answered": {}, "timed out": {slow: true},
		// The claim is bound and the Deployment available by the next sync: StorageReady
		// turns with Ready, in the same write.
		"with storage": {storage: true},
	} {
		slow := tc.slow
		t.Run(name, func(t *testing.T) {
			srv := newFakeLlamaStack(t)
			f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
				if tc.storage {
					l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
				}
			}))
			timeout := time.Second
			if slow {
				srv.delay.Store(int64(time.Second))
				timeout = 100 * time.Millisecond
			}
			probed := f.withProber(srv, timeout)
			writes := 0
			syncUntilIdle := func() {
				for range 5 {
					actions := f.sync("app")
					writes += statusWrites(actions)
					if len(actions) == 0 {
						return
					}
				}
				t.Fatal("no steady state after five syncs")
			}
			syncUntilIdle()
			require.Equal(t, 1, writes, "creation")
			if tc.storage {
				require.Equal(t, metav1.ConditionFalse, cond(t, f.llsd("app"), v1alpha2.ConditionStorageReady).Status)
				f.setPVCPhase("app-pvc", corev1.ClaimBound)
			}
			f.setDeploymentStatus("app", rolledOut)
			syncUntilIdle()
			assert.Equal(t, 1, writes, "Ready written before the server's first answer")
			waitProbed(t, probed)
			syncUntilIdle()
			l := f.llsd("app")
			assert.Equal(t, v1alpha2.PhaseReady, l.Status.Phase)
			hc := cond(t, l, v1alpha2.ConditionHealthCheck)
			if slow {
				// A server that does not answer in time does not hold Ready back longer.
				assert.Equal(t, metav1.ConditionFalse, hc.Status)
				assert.Contains(t, hc.Message, "timed out")
			} else {
				assert.Equal(t, metav1.ConditionTrue, hc.Status)
				assert.Equal(t, "0.2.23", l.Status.Version.LlamaStackServerVersion)
			}
			if tc.storage {
				assert.Equal(t, metav1.ConditionTrue, cond(t, l, v1alpha2.ConditionStorageReady).Status)
			}
			assert.Equal(t, 2, writes, "status writes from creation to Ready with the first answer")
		})
	}
}

// Only a write that does nothing but make the CR Ready waits for the first answer.
func TestOnlyTurnsReady(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	later := metav1.NewTime(at.Add(time.Minute))
	c := func(typ string, status metav1.ConditionStatus, reason string, when metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason, ObservedGeneration: 1, LastTransitionTime: when}
	}
	initializing := v1alpha2.LlamaStackDistributionStatus{
		Phase: v1alpha2.PhaseInitializing, ObservedGeneration: 1, ServiceURL: "http://app-service.demo.svc.cluster.local:8321",
		Conditions: []metav1.Condition{
			c(v1alpha2.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha2.ReasonDeploymentScaling, at),
			c(v1alpha2.ConditionProgressing, metav1.ConditionTrue, v1alpha2.ReasonRollingOut, at),
			c(v1alpha2.ConditionHealthCheck, metav1.ConditionFalse, v1alpha2.ReasonServerNotAvailable, at),
			c(v1alpha2.ConditionServiceReady, metav1.ConditionTrue, v1alpha2.ReasonServiceReady, at),
			c(v1alpha2.ConditionReady, metav1.ConditionFalse, v1alpha2.ReasonNotReady, at),
		},
	}
	ready := *initializing.DeepCopy()
	ready.Phase, ready.Replicas, ready.AvailableReplicas = v1alpha2.PhaseReady, 1, 1
	ready.Conditions = []metav1.Condition{
		c(v1alpha2.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady, later),
		c(v1alpha2.ConditionProgressing, metav1.ConditionTrue, v1alpha2.ReasonRolloutComplete, at),
		c(v1alpha2.ConditionHealthCheck, metav1.ConditionUnknown, v1alpha2.ReasonHealthCheckPending, later),
		c(v1alpha2.ConditionServiceReady, metav1.ConditionTrue, v1alpha2.ReasonServiceReady, at),
		c(v1alpha2.ConditionReady, metav1.ConditionTrue, v1alpha2.ReasonReady, later),
	}
	for name, tc := range map[string]struct {
		old  v1alpha2.LlamaStackDistributionStatus
		edit func(*v1alpha2.LlamaStackDistributionStatus)
		want bool
	}{
		"turns Ready":          {old: initializing, want: true},
		"already Ready":        {old: ready, want: false},
		"not Ready":            {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) { *st = *initializing.DeepCopy() }, want: false},
		"and a new generation": {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) { st.ObservedGeneration = 2 }, want: false},
		"and a warning": {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) {
			st.Conditions = append(st.Conditions, c(v1alpha2.ConditionVolumeMountWarning, metav1.ConditionTrue, v1alpha2.ReasonNestedMountPaths, later))
		}, want: false},
		"and a Service condition": {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) { st.Conditions[3].Message = "changed" }, want: false},
		"and a route":             {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) { st.RouteURL = ptr.To("http://x") }, want: false},
		"first status":            {old: v1alpha2.LlamaStackDistributionStatus{}, want: false},
		"and a problem": {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) {
			st.Conditions[1] = c(v1alpha2.ConditionProgressing, metav1.ConditionFalse, v1alpha2.ReasonTLSSecretNotFound, later)
		}, want: false},
		"with the problem it reported": {old: problem(initializing, v1alpha2.ReasonTLSSecretNotFound), edit: func(st *v1alpha2.LlamaStackDistributionStatus) {
			st.Conditions[1] = c(v1alpha2.ConditionProgressing, metav1.ConditionFalse, v1alpha2.ReasonTLSSecretNotFound, later)
		}, want: true},
		"and its storage bound": {old: storageCondition(initializing, metav1.ConditionFalse, v1alpha2.ReasonStorageFailed, at), edit: func(st *v1alpha2.LlamaStackDistributionStatus) {
			*st = storageCondition(*st, metav1.ConditionTrue, v1alpha2.ReasonStorageReady, later)
		}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			st := *ready.DeepCopy()
			if tc.edit != nil {
				tc.edit(&st)
			}
			old := *tc.old.DeepCopy()
			assert.Equal(t, tc.want, onlyTurnsReady(old, st))
			assert.Equal(t, tc.old, old, "onlyTurnsReady changed its argument")
		})
	}
}

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
	p        *prober
	enqueued atomic.Int64
	l        *v1alpha2.LlamaStackDistribution
	state    serverState
}

func newProbeSim(t *testing.T, base time.Duration) *probeSim {
	_, ctx := ktesting.NewTestContext(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := &probeSim{t: t, ctx: ctx, clock: clk, srv: &scriptedServer{clock: clk, healthy: true, version: "0.3.0"}}
	s.p = newProber(ServerProbe{
		Endpoint: func(*v1alpha2.LlamaStackDistribution, *ServerTLS) ServerEndpoint { return s.srv },
		Interval: base, Timeout: time.Second,
	}, func(cache.ObjectName) { s.enqueued.Add(1) })
	s.p.clock = clk
	s.p.jitter = func() float64 { return 0 }
	t.Cleanup(s.p.wait)
	s.l = &v1alpha2.LlamaStackDistribution{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "app", UID: "uid-1", Generation: 1}}
	s.state = serverState{generation: 1, deployment: 1, observed: 1, replicas: 1, updated: 1, ready: 1, available: 1}
	return s
}

// sync reports the server to the prober as a sync of its CR does, and waits for what
// that started.
func (s *probeSim) sync() (probeResult, bool) {
	res, ok := s.p.observe(s.ctx, key("app"), s.l, s.state, nil)
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
				assert.Equal(t, s.l.UID, res.uid)
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
			assert.Equal(t, s.l.UID, res.uid)
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
	s.p.observe(s.ctx, key("app"), s.l, s.state, nil)
	require.Eventually(t, func() bool { return s.srv.count() == 1 }, 5*time.Second, time.Millisecond)

	// The Deployment changes, twice, while the probe runs.
	s.state.ready = 0
	s.p.observe(s.ctx, key("app"), s.l, s.state, nil)
	s.state.ready = 1
	s.p.observe(s.ctx, key("app"), s.l, s.state, nil)
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
	s.p.forget(key("app"))
	_, ok := s.p.observe(s.ctx, key("app"), s.l, s.state, nil)
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
	s.p.forget(key("app"))
	assert.Zero(t, s.clock.Waiters(), "a forgotten CR's timer is stopped")
	s.advance(time.Hour)
	assert.Equal(t, 1, s.srv.count())

	s.sync()
	require.Equal(t, 2, s.srv.count())
	s.p.wait()
	assert.Zero(t, s.clock.Waiters(), "timers left after the controller stopped")
	s.state.ready = 0
	s.p.observe(s.ctx, key("app"), s.l, s.state, nil)
	s.advance(time.Hour)
	assert.Equal(t, 2, s.srv.count(), "a probe after the controller stopped")
}

// storageCondition is st with a StorageReady condition of that status.
func storageCondition(st v1alpha2.LlamaStackDistributionStatus, status metav1.ConditionStatus, reason string, at metav1.Time) v1alpha2.LlamaStackDistributionStatus {
	out := *st.DeepCopy()
	out.Conditions = append(slices.DeleteFunc(out.Conditions, func(c metav1.Condition) bool { return c.Type == v1alpha2.ConditionStorageReady }),
		metav1.Condition{Type: v1alpha2.ConditionStorageReady, Status: status, Reason: reason, Message: reason, ObservedGeneration: 1, LastTransitionTime: at})
	return out
}

// problem is st with a user error of that reason reported as nothing serves: the CR
// Failed, DeploymentReady and Ready False with the reason (as their message).
func problem(st v1alpha2.LlamaStackDistributionStatus, reason string) v1alpha2.LlamaStackDistributionStatus {
	out := *st.DeepCopy()
	out.Phase = v1alpha2.PhaseFailed
	for i, c := range out.Conditions {
		if c.Type == v1alpha2.ConditionDeploymentReady || c.Type == v1alpha2.ConditionReady {
			out.Conditions[i].Status, out.Conditions[i].Reason, out.Conditions[i].Message = metav1.ConditionFalse, reason, reason
		}
	}
	return out
}
