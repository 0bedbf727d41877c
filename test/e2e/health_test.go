//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// The controller reads the running server's /v1/health, /v1/version and /v1/providers
// (here a fake llama-stack server on loopback that the test controls): HealthCheck,
// the server version and the providers follow the server's real answers, a slow or
// broken server is reported, and nothing blocks the rest. The controller runs outside
// the cluster, so every probe goes through kube-apiserver's service proxy: Service →
// EndpointSlice → pod IP, then (kwok pods run nothing) an egress selector hands the
// connection to the fake server.
func TestServerHealthVersionAndProviders(t *testing.T) {
	ns := newNamespace(t)
	var mode atomic.Value
	mode.Store("healthy")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := mode.Load().(string)
		switch {
		case m == "slow":
			time.Sleep(7 * time.Second)
		case m == "unhealthy" && r.URL.Path == "/v1/health":
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"status":"Error"}`)
			return
		case m == "html":
			fmt.Fprint(w, "<html>not llama-stack</html>")
			return
		}
		switch r.URL.Path {
		case "/v1/health":
			fmt.Fprint(w, `{"status":"OK"}`)
		case "/v1/version":
			fmt.Fprint(w, `{"version":"0.3.1"}`)
		case "/v1/providers":
			fmt.Fprint(w, `{"data":[{"api":"inference","provider_id":"ollama","provider_type":"remote::ollama","config":{"url":"http://ollama:11434","api_key":"s3cret"},"health":{"status":"OK"}},{"api":"agents","provider_id":"meta","provider_type":"inline::meta-reference","config":{},"health":{"status":"Not Implemented","message":"no check"}}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	host := "app-service." + ns + ".svc:8321"
	env.servers.set(host, strings.TrimPrefix(srv.URL, "http://"))
	defer env.servers.set(host, "")

	create(t, llsd(ns, "app"))
	l := waitCondition(t, ns, "app", v1alpha1.ConditionHealthCheck, metav1.ConditionTrue, v1alpha1.ReasonHealthCheckPassed)
	probes := env.requests.snapshot()
	for _, path := range []string{"health", "version", "providers"} {
		assert.Positive(t, probes["PROBE /api/v1/namespaces/"+ns+"/services/app-service:8321/proxy/v1/"+path],
			"/v1/%s read through the API server's service proxy", path)
	}
	assert.Equal(t, "0.3.1", l.Status.Version.LlamaStackServerVersion)
	if assert.Len(t, l.Status.DistributionConfig.Providers, 2) {
		assert.Equal(t, "agents", l.Status.DistributionConfig.Providers[0].API)
		assert.Equal(t, "ollama", l.Status.DistributionConfig.Providers[1].ProviderID)
		for _, p := range l.Status.DistributionConfig.Providers {
			assert.Empty(t, p.Config.Raw, "provider config (here an API key) is not copied into status")
		}
	}
	out := kubectl(t, "get", "llsd", "-n", ns)
	assert.Contains(t, out, "0.3.1", "the Server Version column")

	// A server whose answers do not change is asked less and less often: over 12 s,
	// probing every interval (2 s here) would send 6 health checks; backing off (2, 4,
	// 8 s, ...) sends at most 4.
	health := "PROBE /api/v1/namespaces/" + ns + "/services/app-service:8321/proxy/v1/health"
	before := env.requests.snapshot()[health]
	time.Sleep(6 * probeInterval)
	idle := env.requests.snapshot()[health] - before
	t.Logf("health checks of an idle server in %s: %d", 6*probeInterval, idle)
	assert.LessOrEqual(t, idle, 4, "the probes of a server whose answers do not change back off")

	// The probes are requests of the controller's REST client: counted with the others.
	// Only the probes of the unhealthy server get a 503 for a GET.
	unavailable := `rest_client_requests_total\{code="503",host="[^"]+",method="GET"\}`
	before503 := max(sample(scrape(t), unavailable), 0)
	// A server answering 503 while its pod is still Ready: the kubelet's readiness
	// probe takes it out after three failures (about 30 s); until then the controller's
	// next probe, at most 8 intervals after the last (16 s here), sees it.
	mode.Store("unhealthy")
	l = waitCondition(t, ns, "app", v1alpha1.ConditionHealthCheck, metav1.ConditionFalse, v1alpha1.ReasonHealthCheckFailed)
	assert.Contains(t, findCondition(l, v1alpha1.ConditionHealthCheck).Message, "503")
	assert.Greater(t, sample(scrape(t), unavailable), before503, "the proxied probe is in rest_client_requests_total")
	assert.Nil(t, l.Status.DistributionConfig.Providers)

	mode.Store("html")
	eventually(t, 30*time.Second, "wrong JSON is reported", func(ctx context.Context) (bool, error) {
		c := findCondition(get(t, ns, "app"), v1alpha1.ConditionHealthCheck)
		return c != nil && strings.Contains(c.Message, "JSON"), nil
	})

	// A slow server: the probe times out (5 s), and meanwhile the controller keeps
	// serving other CRs without delay.
	mode.Store("slow")
	other := newNamespace(t)
	start := time.Now()
	create(t, llsd(other, "other"))
	waitReady(t, other, "other")
	t.Logf("another CR became Ready in %s while the slow probe ran", time.Since(start).Round(time.Millisecond))
	eventually(t, 30*time.Second, "the slow server is reported", func(ctx context.Context) (bool, error) {
		c := findCondition(get(t, ns, "app"), v1alpha1.ConditionHealthCheck)
		return c != nil && strings.Contains(c.Message, "timed out"), nil
	})

	mode.Store("healthy")
	waitCondition(t, ns, "app", v1alpha1.ConditionHealthCheck, metav1.ConditionTrue, v1alpha1.ReasonHealthCheckPassed)

	// A server that stops fails its readiness probe, and the kubelet marks its pod not
	// Ready (done here by hand: kwok's pods stay as patched once Running). The
	// Deployment reports it, and HealthCheck turns at once, however far the probes
	// backed off; when the pod is Ready again the server is asked afresh.
	time.Sleep(6 * probeInterval)
	start = time.Now()
	setPodsReady(t, ns, "app", false)
	waitCondition(t, ns, "app", v1alpha1.ConditionHealthCheck, metav1.ConditionFalse, v1alpha1.ReasonServerNotAvailable)
	t.Logf("HealthCheck turned %s after the pod became unready", time.Since(start).Round(time.Millisecond))
	assert.Less(t, time.Since(start), 8*probeInterval, "HealthCheck waited for the backed-off probe")
	before = env.requests.snapshot()[health]
	setPodsReady(t, ns, "app", true)
	waitCondition(t, ns, "app", v1alpha1.ConditionHealthCheck, metav1.ConditionTrue, v1alpha1.ReasonHealthCheckPassed)
	assert.Greater(t, env.requests.snapshot()[health], before, "the server back was asked afresh")
}

// setPodsReady sets the Ready and ContainersReady conditions of the CR's running pods,
// as the kubelet does when their readiness probe fails or passes again.
func setPodsReady(t *testing.T, ns, name string, ready bool) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pods := runningPods(t, ns, name)
	require.NotEmpty(t, pods)
	for _, p := range pods {
		p := p.DeepCopy()
		for i, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				p.Status.Conditions[i].Status = status
				p.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Ready = ready
		}
		_, err := env.kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}
