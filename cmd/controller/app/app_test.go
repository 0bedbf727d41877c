package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	serverprobe "github.com/llamastack/llama-stack-controller/pkg/controller/probe"
)

func TestOperatorNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	assert.Equal(t, "from-flag", ResolveOperatorNamespace("from-flag"))
	// No flag, no POD_NAMESPACE and (in a test) no in-cluster namespace file: the default.
	assert.Equal(t, DefaultOperatorNamespace, ResolveOperatorNamespace(""))
	t.Setenv("POD_NAMESPACE", "from-env")
	assert.Equal(t, "from-env", ResolveOperatorNamespace(""))
	assert.Equal(t, "from-flag", ResolveOperatorNamespace("from-flag"))
}

func TestOptionsValidate(t *testing.T) {
	good := Options{Workers: 4, QPS: 50, Burst: 100}
	assert.NoError(t, good.Validate())
	tests := map[string]struct {
		edit func(*Options)
		want string
	}{
		"no workers":           {func(o *Options) { o.Workers = 0 }, "--workers must be at least 1"},
		"webhook cert mode":    {func(o *Options) { o.WebhookBindAddress = ":9443"; o.WebhookCertMode = "acme" }, "--webhook-cert-mode must be self or files"},
		"webhook files no dir": {func(o *Options) { o.WebhookBindAddress = ":9443"; o.WebhookCertMode = "files" }, "--webhook-cert-mode=files needs --webhook-cert-dir"},
		"webhook timing": {
			func(o *Options) { o.WebhookBindAddress = ":9443"; o.WebhookServingValidity = 20 * time.Second },
			"--webhook-ca-validity=26280h0m0s, --webhook-serving-validity=20s and --webhook-ca-propagation=1h0m0s do not fit: " +
				"the CA propagation delay (1h0m0s) must be at most a third of the serving certificate validity (20s)",
		},
		"zero qps":             {func(o *Options) { o.QPS = 0 }, "--kube-api-qps must be positive"},
		"no burst":             {func(o *Options) { o.Burst = 0 }, "--kube-api-burst must be at least 1"},
		"negative event qps":   {func(o *Options) { o.EventQPS = -1 }, "--kube-api-events-qps must not be negative"},
		"negative event burst": {func(o *Options) { o.EventBurst = -1 }, "--kube-api-events-burst must not be negative"},
		"all of it bad":        {func(o *Options) { *o = Options{} }, "--workers"},
		"renew deadline not below the lease duration": {
			func(o *Options) {
				o.LeaderElect, o.LeaseDuration, o.RenewDeadline = true, 10*time.Second, 10*time.Second
			},
			"--leader-elect-renew-deadline (10s) must be shorter than --leader-elect-lease-duration (10s)",
		},
		"renew deadline above the default lease duration": {
			func(o *Options) { o.LeaderElect, o.RenewDeadline = true, 20*time.Second },
			"--leader-elect-renew-deadline (20s) must be shorter than --leader-elect-lease-duration (15s)",
		},
		"retry period, with its jitter, not below the renew deadline": {
			func(o *Options) { o.LeaderElect, o.RetryPeriod = true, 9*time.Second },
			"--leader-elect-retry-period (9s) times 1.2 (its jitter) must be shorter than --leader-elect-renew-deadline (10s)",
		},
		"negative retry period": {
			func(o *Options) { o.LeaderElect, o.RetryPeriod = true, -time.Second },
			"--leader-elect-retry-period must be positive, got -1s",
		},
		"lease duration in part seconds": {
			func(o *Options) { o.LeaderElect, o.LeaseDuration = true, 15500*time.Millisecond },
			"--leader-elect-lease-duration must be a whole number of seconds",
		},
		"bad lease name": {
			func(o *Options) { o.LeaderElect, o.LeaseName = true, "Not_A_Name" },
			`--leader-elect-resource-name "Not_A_Name" is not a valid Lease name`,
		},
		"bad lease namespace": {
			func(o *Options) { o.LeaderElect, o.LeaseNamespace = true, "a.b" },
			`--leader-elect-resource-namespace "a.b" is not a valid namespace`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			assert.ErrorContains(t, o.Validate(), tc.want)
		})
	}

	// Leader election: zero values are the defaults, which are valid; the timing is only
	// checked when it is on.
	le := good
	le.LeaderElect = true
	assert.NoError(t, le.Validate())
	le.LeaseDuration, le.RenewDeadline, le.RetryPeriod, le.LeaseName, le.LeaseNamespace = 4*time.Second, 3*time.Second, time.Second, "my-lease", "ops"
	assert.NoError(t, le.Validate())
	off := good
	off.RenewDeadline = time.Hour
	assert.NoError(t, off.Validate(), "leader election off")
	t.Setenv(OperatorVersionEnv, "v1.2.3")
	assert.Equal(t, Options{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		LeaseName: "llama-stack-controller", Version: "v1.2.3", EventQPS: 50, EventBurst: 100}, Options{}.withDefaults())
	assert.Equal(t, "given", Options{Version: "given"}.withDefaults().Version, "a version given is kept")
}

func TestServerProbeMode(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443/"}
	kubeClient, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	svc := serverprobe.Service{Namespace: "demo", Name: "app-service", Port: 8321}
	name := func(p serverprobe.Config) string { return fmt.Sprint(p.Endpoint(svc, nil)) }

	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	p, err := serverProbe(cfg, kubeClient, Options{})
	assert.NoError(t, err)
	assert.Equal(t, "/api/v1/namespaces/demo/services/app-service:8321/proxy", name(p), "outside a cluster: the API server's service proxy")

	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	p, err = serverProbe(cfg, kubeClient, Options{ServerProbe: "auto"})
	assert.NoError(t, err)
	assert.Equal(t, "http://app-service.demo.svc:8321", name(p), "in a cluster: the Service's DNS name")

	p, err = serverProbe(cfg, kubeClient, Options{ServerProbe: "proxy"})
	assert.NoError(t, err)
	assert.Equal(t, "/api/v1/namespaces/demo/services/app-service:8321/proxy", name(p), "proxy, chosen in a cluster")

	p, err = serverProbe(cfg, kubeClient, Options{ServerProbe: "off"})
	assert.NoError(t, err)
	assert.Nil(t, p.Endpoint)

	assert.ErrorContains(t, Options{Workers: 1, QPS: 1, Burst: 1, ServerProbe: "sometimes"}.Validate(), "--server-probe")
}

// Probes through the proxy wait on the Kubernetes client's own rate limiter: with its
// only token taken, a probe is not sent.
func TestProxyProbesShareTheClientRateLimit(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: 1.0 / 60, Burst: 1}
	kubeClient, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	require.True(t, kubeClient.CoreV1().RESTClient().GetRateLimiter().TryAccept())
	p, err := serverProbe(cfg, kubeClient, Options{ServerProbe: "proxy"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()

	_, _, err = p.Endpoint(serverprobe.Service{Namespace: "demo", Name: "app-service", Port: 8321}, nil).Get(ctx, "/v1/health")

	assert.ErrorContains(t, err, "rate limit")
}
