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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
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
		Endpoint: func(*v1alpha1.LlamaStackDistribution) ServerEndpoint { return newHTTPEndpoint(srv.Client(), srv.URL) },
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
	c := cond(t, f.llsd("app"), v1alpha1.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "Deployment not ready", c.Message)
	assert.Zero(t, srv.requests.Load())

	// Ready: the first sync starts a probe without waiting for it.
	f.setDeploymentStatus("app", rolledOut)
	f.sync("app")
	c = cond(t, f.llsd("app"), v1alpha1.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionUnknown, c.Status)
	waitProbed(t, probed)

	f.sync("app")
	l := f.llsd("app")
	c = cond(t, l, v1alpha1.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, v1alpha1.ReasonHealthCheckPassed, c.Reason)
	assert.Equal(t, "0.2.23", l.Status.Version.LlamaStackServerVersion)
	require.Len(t, l.Status.DistributionConfig.Providers, 1)
	p := l.Status.DistributionConfig.Providers[0]
	assert.Equal(t, "ollama", p.ProviderID)
	assert.Equal(t, "OK", p.Health.Status)
	assert.Empty(t, p.Config.Raw, "provider config may hold secrets and is not copied")
	assert.Equal(t, v1alpha1.PhaseReady, l.Status.Phase)

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
	c := cond(t, l, v1alpha1.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha1.ReasonHealthCheckFailed, c.Reason)
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
	c := cond(t, f.llsd("app"), v1alpha1.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Contains(t, c.Message, "timed out")
}

// After a restart (an empty prober) the last reported HealthCheck is kept until the new
// answer comes: no status write when nothing changed.
func TestHealthCheckSurvivesARestart(t *testing.T) {
	srv := newFakeLlamaStack(t)
	f := newFixture(t, newLLSD("app"))
	probed := f.withProber(srv, time.Second)
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.sync("app")
	waitProbed(t, probed)
	f.converge("app")
	require.Equal(t, metav1.ConditionTrue, cond(t, f.llsd("app"), v1alpha1.ConditionHealthCheck).Status)

	f.restartController()
	probed = f.withProber(srv, time.Second)
	assert.Empty(t, mutating(f.sync("app")), "the restart rewrote the status")
	waitProbed(t, probed)
	assert.Empty(t, mutating(f.sync("app")), "the same answer rewrote the status")
	assert.Equal(t, metav1.ConditionTrue, cond(t, f.llsd("app"), v1alpha1.ConditionHealthCheck).Status)
}

// A healthy server whose /v1/providers does not answer keeps the providers last reported.
func TestProvidersKeptWhenTheirEndpointFails(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.withProber(newFakeLlamaStack(t), time.Second)
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	l := f.llsd("app")
	l.Status.DistributionConfig.Providers = []v1alpha1.ProviderInfo{{API: "inference", ProviderID: "ollama"}}
	d := f.deployment("app")
	st := f.c.calculateStatus(l, observed{deployment: d, probe: &probeResult{info: serverInfo{healthy: true}}}, metav1.Now())
	assert.Equal(t, l.Status.DistributionConfig.Providers, st.DistributionConfig.Providers)
	st = f.c.calculateStatus(l, observed{deployment: d, probe: &probeResult{info: serverInfo{healthy: true, providersKnown: true}}}, metav1.Now())
	assert.Empty(t, st.DistributionConfig.Providers, "an answer with no providers clears them")
}
