package controller

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// fakeLlamaStack is a llama-stack server the test controls.
type fakeLlamaStack struct {
	*httptest.Server
	healthy  atomic.Bool
	delay    atomic.Int64 // nanoseconds before answering /v1/health
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
		Endpoint: func(*v1alpha2.LlamaStackDistribution) ServerEndpoint { return newHTTPEndpoint(srv.Client(), srv.URL) },
		Interval: time.Hour,
		Timeout:  timeout,
	}, func(key cache.ObjectName) { probed <- key })
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

	// Ready: the first sync starts a probe without waiting for it.
	f.setDeploymentStatus("app", rolledOut)
	f.sync("app")
	c = cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionUnknown, c.Status)
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
	srv.delay.Store(int64(500 * time.Millisecond))
	f := newFixture(t, newLLSD("app"))
	probed := f.withProber(srv, 200*time.Millisecond)
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	start := time.Now()
	f.sync("app")
	f.sync("app")
	f.sync("app")
	assert.Less(t, time.Since(start), 200*time.Millisecond, "a sync waited for the server")
	waitProbed(t, probed)
	assert.Equal(t, int64(1), srv.requests.Load(), "one probe in flight per CR")
	f.sync("app")
	c := cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Contains(t, c.Message, "timed out")
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
			k := key("app")
			labels := map[string]string{"namespace": testNamespace, "name": "app"}
			require.Equal(t, 1.0, gauge(t, "llama_stack_controller_llamastackdistribution_ready", labels))
			f.c.caFailures.Store(k, caFailure{})
			f.c.failing.Store(k, failure{})
			f.c.scheduleRecheck(k)
			if probing {
				waitProbed(t, probed)
				srv.delay.Store(int64(300 * time.Millisecond))
				f.c.prober.mu.Lock()
				f.c.prober.results[k] = probeResult{at: time.Now().Add(-2 * time.Hour), uid: f.llsd("app").UID}
				f.c.prober.mu.Unlock()
				f.sync("app") // starts a probe that answers after the delete
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
				waitProbed(t, probed)
				f.c.prober.mu.Lock()
				assert.Empty(t, f.c.prober.results, "prober results kept")
				assert.Empty(t, f.c.prober.stale)
				f.c.prober.mu.Unlock()
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
