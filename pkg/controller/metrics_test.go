package controller

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/llamastack/llama-stack-controller/pkg/controller/probe"
)

// series is the first series of Registry's metric name whose labels include labels;
// nil if there is none.
func series(t *testing.T, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// gauge reads a gauge of Registry by metric name and label values, or -1 if absent.
func gauge(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	if m := series(t, name, labels); m != nil {
		return m.GetGauge().GetValue()
	}
	return -1
}

// counter reads a counter of Registry by metric name and label values, or 0 if absent.
func counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	if m := series(t, name, labels); m != nil {
		return m.GetCounter().GetValue()
	}
	return 0
}

// client-go's elector reports leading and standing by through the registered provider.
func TestLeaderMetric(t *testing.T) {
	RegisterMetrics()
	m := leaderMetricsProvider{}.NewLeaderMetric()
	m.On("test-lease")
	assert.Equal(t, 1.0, gauge(t, "leader_election_master_status", map[string]string{"name": "test-lease"}))
	m.Off("test-lease")
	assert.Equal(t, 0.0, gauge(t, "leader_election_master_status", map[string]string{"name": "test-lease"}))
}

// The time a request waits for the client's rate limiter is in
// rest_client_rate_limiter_duration_seconds: what tells a user that --kube-api-qps, not
// the API server, paces the controller.
func TestRateLimiterWaitIsMeasured(t *testing.T) {
	RegisterMetrics()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	t.Cleanup(srv.Close)
	// Five a second after a burst of one: three requests one after the other wait about
	// 0, 0.2 and 0.2 s.
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: 5, Burst: 1})
	require.NoError(t, err)
	histogram := func() (uint64, float64) {
		m := series(t, "rest_client_rate_limiter_duration_seconds", map[string]string{"verb": "DELETE"})
		if m == nil {
			return 0, 0
		}
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	count0, sum0 := histogram()
	for range 3 {
		require.NoError(t, client.CoreV1().ConfigMaps("demo").Delete(context.Background(), "app", metav1.DeleteOptions{}))
	}
	count, sum := histogram()
	assert.Equal(t, uint64(3), count-count0, "one observation per request")
	assert.Greater(t, sum-sum0, 0.3, "the second and third requests waited for their tokens")
}

// Probes through the API server's service proxy are requests of the controller's API
// client: counted in rest_client_requests_total.
func TestProxyProbesAreCounted(t *testing.T) {
	RegisterMetrics()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"OK"}`))
	}))
	defer srv.Close()
	endpoints, err := probe.ProxyEndpoints(&rest.Config{Host: srv.URL, QPS: -1}, nil)
	require.NoError(t, err)
	labels := map[string]string{"host": strings.TrimPrefix(srv.URL, "http://"), "method": "GET", "code": "200"}
	before := counter(t, "rest_client_requests_total", labels)

	code, _, err := endpoints(probe.Service{Namespace: "demo", Name: "app-service", Port: 8321}, nil).Get(t.Context(), "/v1/health")

	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, before+1, counter(t, "rest_client_requests_total", labels))
}
