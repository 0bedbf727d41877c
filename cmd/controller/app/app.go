// Package app wires the controller to a cluster: clients, informer factories with their
// filters and transforms, and the run loop. cmd/controller parses flags into Options;
// the end-to-end tests run the same code in-process.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/llamastack/llama-stack-controller/pkg/controller"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	serverprobe "github.com/llamastack/llama-stack-controller/pkg/controller/probe"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	informers "github.com/llamastack/llama-stack-controller/pkg/generated/informers/externalversions"
)

const (
	// DefaultOperatorNamespace is the controller's namespace when nothing else names it.
	DefaultOperatorNamespace = "llama-stack-controller-system"
	serviceAccountNamespace  = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
	// DefaultResyncPeriod re-delivers cached objects; a sync it triggers sends no request.
	DefaultResyncPeriod = 10 * time.Hour
	// DefaultWorkers, DefaultQPS and DefaultBurst are the defaults of --workers,
	// --kube-api-qps and --kube-api-burst (docs/operations.md, "Why these defaults").
	DefaultWorkers = 8
	DefaultQPS     = 100
	DefaultBurst   = 200
	// DefaultEventQPS and DefaultEventBurst limit the Event client: at most one Event per
	// sync's child writes and per status change, about a quarter of the work client's
	// requests in a bulk convergence.
	DefaultEventQPS   = 50
	DefaultEventBurst = 100
)

// Options configure a controller run.
type Options struct {
	// Namespace limits the controller to one namespace; "" watches all.
	Namespace string
	// OperatorNamespace holds the operator ConfigMap; "" resolves it (see ResolveOperatorNamespace).
	OperatorNamespace string
	Workers           int
	QPS               float64
	Burst             int
	// EventQPS and EventBurst limit the client that writes Events, apart from QPS and
	// Burst; 0 means DefaultEventQPS and DefaultEventBurst.
	EventQPS   float64
	EventBurst int
	// ResyncPeriod of the informers; 0 means DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Version is reported in status.version.operatorVersion; "" means Version().
	Version string
	// ServerProbe is how the servers' health, version and providers are read: "auto" (the
	// Service's DNS name in a cluster, the API server's service proxy outside), "service",
	// "proxy", or "off".
	ServerProbe string
	// ServerProbeInterval between probes of a ready server; 0 means one minute.
	ServerProbeInterval time.Duration
	// MetricsBindAddress serves Prometheus metrics at /metrics; "" or "0" turns it off.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "" or "0" turns it off.
	HealthProbeBindAddress string

	// LeaderElect runs the controller only while this process holds a coordination.k8s.io
	// Lease, so that several replicas can run with one of them active.
	LeaderElect bool
	// LeaseDuration, RenewDeadline and RetryPeriod of the election; 0 means the defaults
	// (15s, 10s, 2s).
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// LeaseName is the Lease's name; "" means DefaultLeaseName.
	LeaseName string
	// LeaseNamespace is the Lease's namespace; "" means the operator namespace.
	LeaseNamespace string

	// WebhookBindAddress serves the CRD's conversion webhook (HTTPS, /convert) on every
	// replica; "" or "0" turns it off.
	WebhookBindAddress string
	// WebhookCertMode is where its certificate comes from: WebhookCertModeSelf (default)
	// or WebhookCertModeFiles (WebhookCertDir).
	WebhookCertMode string
	// WebhookCertDir holds tls.crt and tls.key in files mode.
	WebhookCertDir string
	// WebhookServiceName is the webhook's Service, named in the certificate it makes;
	// "" means DefaultWebhookServiceName.
	WebhookServiceName string
	// WebhookCertHosts are more names and IP addresses for that certificate,
	// comma-separated (make run: localhost,127.0.0.1).
	WebhookCertHosts string
	// WebhookCAValidity, WebhookServingValidity and WebhookCAPropagation time the
	// certificates self mode makes (webhook.CertConfig); 0 means the defaults. For tests
	// and tuning: a renewal test runs them in seconds.
	WebhookCAValidity      time.Duration
	WebhookServingValidity time.Duration
	WebhookCAPropagation   time.Duration
}

// withDefaults fills the zero values that have a default.
func (o Options) withDefaults() Options {
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	if o.LeaseName == "" {
		o.LeaseName = DefaultLeaseName
	}
	if o.Version == "" {
		o.Version = Version()
	}
	if o.EventQPS == 0 {
		o.EventQPS = DefaultEventQPS
	}
	if o.EventBurst == 0 {
		o.EventBurst = DefaultEventBurst
	}
	return o
}

// Validate checks the options a user can set.
func (o Options) Validate() error {
	var errs []error
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.Workers))
	}
	if o.QPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive, got %v", o.QPS))
	}
	if o.Burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.Burst))
	}
	if o.EventQPS < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-events-qps must not be negative, got %v", o.EventQPS))
	}
	if o.EventBurst < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-events-burst must not be negative, got %d", o.EventBurst))
	}
	switch o.ServerProbe {
	case "", "auto", "service", "proxy", "off":
	default:
		errs = append(errs, fmt.Errorf("--server-probe must be auto, service, proxy or off, got %q", o.ServerProbe))
	}
	if o.LeaderElect {
		errs = append(errs, o.withDefaults().validateLeaderElection()...)
	}
	errs = append(errs, o.validateWebhook()...)
	return errors.Join(errs...)
}

// validateLeaderElection checks the election's timing as client-go's elector does, and
// says which flags to change.
func (o Options) validateLeaderElection() []error {
	var errs []error
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{
		{"--leader-elect-lease-duration", o.LeaseDuration},
		{"--leader-elect-renew-deadline", o.RenewDeadline},
		{"--leader-elect-retry-period", o.RetryPeriod},
	} {
		if d.value < 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", d.flag, d.value))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if o.LeaseDuration < time.Second || o.LeaseDuration%time.Second != 0 {
		// The Lease holds whole seconds.
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration must be a whole number of seconds, at least 1s, got %v", o.LeaseDuration))
	}
	if o.RenewDeadline >= o.LeaseDuration {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%v) must be shorter than --leader-elect-lease-duration (%v): "+
			"a leader must give up before the others may take over", o.RenewDeadline, o.LeaseDuration))
	}
	if float64(o.RetryPeriod)*leaderelection.JitterFactor >= float64(o.RenewDeadline) {
		errs = append(errs, fmt.Errorf("--leader-elect-retry-period (%v) times %v (its jitter) must be shorter than --leader-elect-renew-deadline (%v): "+
			"a leader must be able to retry a renewal before the deadline", o.RetryPeriod, leaderelection.JitterFactor, o.RenewDeadline))
	}
	for _, msg := range validation.IsDNS1123Subdomain(o.LeaseName) {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-name %q is not a valid Lease name: %s", o.LeaseName, msg))
	}
	if o.LeaseNamespace != "" {
		for _, msg := range validation.IsDNS1123Label(o.LeaseNamespace) {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-namespace %q is not a valid namespace: %s", o.LeaseNamespace, msg))
		}
	}
	return errs
}

// ResolveOperatorNamespace returns the controller's own namespace: the flag, else
// $POD_NAMESPACE, else the in-cluster ServiceAccount namespace, else the default.
func ResolveOperatorNamespace(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return DefaultOperatorNamespace
}

// Run runs the controller against the cluster of cfg until ctx is cancelled. With
// LeaderElect it first waits for the Lease, and returns an error if it loses it.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	logger := klog.FromContext(ctx)
	if err := o.Validate(); err != nil {
		return err
	}
	o = o.withDefaults()
	cfg, eventCfg := clientConfigs(cfg, o)

	// Metric providers must be in place before the first client and queue are made.
	controller.RegisterMetrics()
	if o.MetricsBindAddress != "" && o.MetricsBindAddress != "0" {
		if err := serveMetrics(ctx, o.MetricsBindAddress); err != nil {
			return err
		}
	}
	h := newHealth(o.LeaderElect)
	if o.HealthProbeBindAddress != "" && o.HealthProbeBindAddress != "0" {
		stop, err := serveHealth(ctx, o.HealthProbeBindAddress, h)
		if err != nil {
			return err
		}
		defer stop()
	}

	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the LlamaStackDistribution client: %w", err)
	}
	eventClient, err := kubernetes.NewForConfig(eventCfg)
	if err != nil {
		return fmt.Errorf("building the Event client: %w", err)
	}
	opNamespace := ResolveOperatorNamespace(o.OperatorNamespace)
	logger.Info("Starting", "version", o.Version, "namespace", o.Namespace, "operatorNamespace", opNamespace, "workers", o.Workers, "leaderElect", o.LeaderElect)
	if o.webhookEnabled() {
		// Every replica serves conversions, leader or not. Run returns once the webhook
		// has stopped too (its listener closed).
		webhookCtx, stopWebhook := context.WithCancel(ctx)
		ready, stopped, err := startWebhook(webhookCtx, cfg, kubeClient, o, opNamespace)
		defer func() {
			stopWebhook()
			if stopped != nil {
				<-stopped
			}
		}()
		if err != nil {
			return err
		}
		h.setWebhook(ready)
	}
	run := func(ctx context.Context) error {
		return runController(ctx, cfg, kubeClient, client, eventClient, o, opNamespace, h)
	}
	if !o.LeaderElect {
		return run(ctx)
	}

	// The Lease has its own client: its requests are not queued behind the controller's
	// under the client's rate limit, and a hung request ends well before the renew
	// deadline (as client-go's resourcelock.NewFromKubeconfig sets it up).
	leaseCfg := rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	leaseCfg.Timeout = max(time.Second, o.RenewDeadline/2)
	leaseClient, err := kubernetes.NewForConfig(leaseCfg)
	if err != nil {
		return fmt.Errorf("building the leader election client: %w", err)
	}
	identity, err := newIdentity()
	if err != nil {
		return err
	}
	leaseNamespace := o.LeaseNamespace
	if leaseNamespace == "" {
		leaseNamespace = opNamespace
	}
	return runLeaderElected(ctx, election{
		leases:    leaseClient.CoordinationV1(),
		namespace: leaseNamespace, name: o.LeaseName, identity: identity,
		leaseDuration: o.LeaseDuration, renewDeadline: o.RenewDeadline, retryPeriod: o.RetryPeriod,
	}, h, run)
}

// clientConfigs returns the configuration of the controller's clients, from cfg (not
// changed): the work client's with QPS and Burst, and the Event client's with EventQPS
// and EventBurst, a rate limiter of its own and the user agent suffix "/events", as
// Kubernetes' controllers give their event broadcaster a client of its own. Events
// (one per child written and per status change, written by the broadcaster's goroutine)
// then never take the requests the workers wait on.
func clientConfigs(cfg *rest.Config, o Options) (work, events *rest.Config) {
	work = rest.CopyConfig(cfg)
	work.QPS, work.Burst = float32(o.QPS), o.Burst
	if work.UserAgent == "" {
		work.UserAgent = "llama-stack-controller/" + o.Version
	}
	events = rest.CopyConfig(work)
	events.QPS, events.Burst = float32(o.EventQPS), o.EventBurst
	// A limiter set in cfg would be shared: each client makes its own from QPS and Burst.
	events.RateLimiter = nil
	events.UserAgent = work.UserAgent + "/events"
	return work, events
}

// runController makes the informers and the controller, runs it until ctx is cancelled,
// and returns once its workers and informers have stopped.
func runController(ctx context.Context, cfg *rest.Config, kubeClient kubernetes.Interface, client clientset.Interface,
	eventClient kubernetes.Interface, o Options, opNamespace string, h *health) error {
	resync := o.ResyncPeriod
	if resync == 0 {
		resync = DefaultResyncPeriod
	}
	managed := children.ManagedSelector()
	llsdInformers := informers.NewSharedInformerFactoryWithOptions(client, resync,
		informers.WithNamespace(o.Namespace),
		informers.WithTransform(children.TransformStripManagedFields))
	childInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resync,
		kubeinformers.WithNamespace(o.Namespace),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = managed }),
		kubeinformers.WithTransform(children.TransformStripManagedFields))
	configMapInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resync,
		kubeinformers.WithNamespace(o.Namespace),
		kubeinformers.WithTransform(controller.TransformConfigMap))
	operatorInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resync,
		kubeinformers.WithNamespace(opNamespace),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", controller.OperatorConfigMapName).String()
		}),
		kubeinformers.WithTransform(children.TransformStripManagedFields))

	// The ReplicaSets of the server Deployments (their pod templates carry app=llama-stack),
	// kept as little more than the ConfigMaps they mount.
	replicaSetInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resync,
		kubeinformers.WithNamespace(o.Namespace),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = rollout.ReplicaSetSelector() }),
		kubeinformers.WithTransform(rollout.TransformReplicaSet))
	// The server pods, kept as little more than why each does not start.
	podInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resync,
		kubeinformers.WithNamespace(o.Namespace),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = rollout.PodSelector() }),
		kubeinformers.WithTransform(rollout.TransformPod))

	probe, err := serverProbe(cfg, kubeClient, o)
	if err != nil {
		return err
	}
	// The optional kinds' CRDs are watched by name, and their clients used only while
	// the cluster serves them.
	crdClient, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the CustomResourceDefinition client: %w", err)
	}
	gatewayClient, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the Gateway API client: %w", err)
	}
	dynamicClient, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the dynamic client: %w", err)
	}
	// Secrets are watched as metadata only (the controller's secrets.go).
	metadataClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the metadata client: %w", err)
	}
	apis, err := discoverClusterAPIs(ctx, kubeClient.Discovery(), discoveryBackoff)
	if err != nil {
		if ctx.Err() != nil {
			return nil // told to stop while starting: not a failure
		}
		return err
	}
	if apis.openShift {
		klog.FromContext(ctx).Info("The cluster serves " + openShiftSecurityGroup + ": server pods leave runAsUser and fsGroup to the namespace's SecurityContextConstraints")
	}
	c, err := controller.NewController(ctx, controller.Config{
		KubeClient:          kubeClient,
		Client:              client,
		EventClient:         eventClient,
		LLSDInformers:       llsdInformers,
		ChildInformers:      childInformers,
		ConfigMapInformers:  configMapInformers,
		OperatorInformers:   operatorInformers,
		ReplicaSetInformers: replicaSetInformers,
		PodInformers:        podInformers,
		MetadataClient:      metadataClient,
		OperatorNamespace:   opNamespace,
		WatchNamespace:      o.Namespace,
		OperatorVersion:     o.Version,
		ServerProbe:         probe,
		OpenShift:           apis.openShift,
		RoutesDiscovered:    apis.routes,
		CRDClient:           crdClient,
		GatewayClient:       gatewayClient,
		DynamicClient:       dynamicClient,
	})
	if err != nil {
		return err
	}
	factories := []interface {
		Start(<-chan struct{})
		Shutdown()
	}{llsdInformers, childInformers, configMapInformers, operatorInformers, replicaSetInformers, podInformers}
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	h.setRunning(c.HasSynced)
	err = c.Run(ctx, o.Workers)
	h.setRunning(nil)
	// Stop the informers and wait for their goroutines before returning.
	for _, f := range factories {
		f.Shutdown()
	}
	return err
}

// serverProbe picks how the controller reaches the servers it runs.
func serverProbe(cfg *rest.Config, kubeClient kubernetes.Interface, o Options) (serverprobe.Config, error) {
	mode := o.ServerProbe
	if mode == "" || mode == "auto" {
		mode = "proxy"
		if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
			mode = "service"
		}
	}
	sp := serverprobe.Config{Interval: o.ServerProbeInterval}
	switch mode {
	case "off":
		return serverprobe.Config{}, nil
	case "service":
		// Straight to the Service: never through an HTTP(S)_PROXY of the environment.
		sp.Endpoint = serverprobe.ServiceEndpoints(&http.Client{Transport: &http.Transport{Proxy: nil, ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second}})
	case "proxy":
		// Through the API server: the probes wait on the Kubernetes client's rate limiter,
		// like every other request of the controller.
		endpoint, err := serverprobe.ProxyEndpoints(cfg, kubeClient.CoreV1().RESTClient().GetRateLimiter())
		if err != nil {
			return sp, fmt.Errorf("building the API server proxy client: %w", err)
		}
		sp.Endpoint = endpoint
	}
	return sp, nil
}

// serveMetrics serves the controller's metrics until ctx is cancelled.
func serveMetrics(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serving metrics on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(controller.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			klog.FromContext(ctx).Error(err, "Metrics server stopped")
		}
	}()
	klog.FromContext(ctx).Info("Serving metrics", "address", ln.Addr().String())
	return nil
}
