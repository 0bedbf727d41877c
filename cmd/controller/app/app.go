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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/controller"
	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	informers "github.com/llamastack/llama-stack-controller/pkg/generated/informers/externalversions"
)

const (
	// DefaultOperatorNamespace is the controller's namespace when nothing else names it.
	DefaultOperatorNamespace = "llama-stack-controller-system"
	serviceAccountNamespace  = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
	// DefaultResyncPeriod re-delivers cached objects; a sync it triggers sends no request.
	DefaultResyncPeriod = 10 * time.Hour
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
	// ResyncPeriod of the informers; 0 means DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Version is reported in status.version.operatorVersion.
	Version string
	// ServerProbe is how the servers' health, version and providers are read: "auto" (the
	// Service's DNS name in a cluster, the API server's service proxy outside), "service",
	// "proxy", or "off".
	ServerProbe string
	// ServerProbeInterval between probes of a ready server; 0 means one minute.
	ServerProbeInterval time.Duration
	// MetricsBindAddress serves Prometheus metrics at /metrics; "" or "0" turns it off.
	MetricsBindAddress string
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
	switch o.ServerProbe {
	case "", "auto", "service", "proxy", "off":
	default:
		errs = append(errs, fmt.Errorf("--server-probe must be auto, service, proxy or off, got %q", o.ServerProbe))
	}
	return errors.Join(errs...)
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

// Run runs the controller against the cluster of cfg until ctx is cancelled.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	logger := klog.FromContext(ctx)
	if err := o.Validate(); err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	if cfg.UserAgent == "" {
		cfg.UserAgent = "llama-stack-controller/" + o.Version
	}
	resync := o.ResyncPeriod
	if resync == 0 {
		resync = DefaultResyncPeriod
	}

	// Metric providers must be in place before the first client and queue are made.
	controller.RegisterMetrics()
	if o.MetricsBindAddress != "" && o.MetricsBindAddress != "0" {
		if err := serveMetrics(ctx, o.MetricsBindAddress); err != nil {
			return err
		}
	}

	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the LlamaStackDistribution client: %w", err)
	}
	opNamespace := ResolveOperatorNamespace(o.OperatorNamespace)
	logger.Info("Starting", "version", o.Version, "namespace", o.Namespace, "operatorNamespace", opNamespace, "workers", o.Workers)

	managed := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": controller.ManagedByValue}).String()
	llsdInformers := informers.NewSharedInformerFactoryWithOptions(client, resync,
		informers.WithNamespace(o.Namespace),
		informers.WithTransform(controller.TransformStripManagedFields))
	childInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resync,
		kubeinformers.WithNamespace(o.Namespace),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = managed }),
		kubeinformers.WithTransform(controller.TransformStripManagedFields))
	configMapInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resync,
		kubeinformers.WithNamespace(o.Namespace),
		kubeinformers.WithTransform(controller.TransformConfigMap))
	operatorInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resync,
		kubeinformers.WithNamespace(opNamespace),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", controller.OperatorConfigMapName).String()
		}),
		kubeinformers.WithTransform(controller.TransformStripManagedFields))

	probe, err := serverProbe(cfg, o)
	if err != nil {
		return err
	}
	c, err := controller.NewController(ctx, controller.Config{
		KubeClient:         kubeClient,
		Client:             client,
		LLSDInformers:      llsdInformers,
		ChildInformers:     childInformers,
		ConfigMapInformers: configMapInformers,
		OperatorInformers:  operatorInformers,
		OperatorNamespace:  opNamespace,
		WatchNamespace:     o.Namespace,
		OperatorVersion:    o.Version,
		ServerProbe:        probe,
	})
	if err != nil {
		return err
	}
	factories := []interface {
		Start(<-chan struct{})
		Shutdown()
	}{llsdInformers, childInformers, configMapInformers, operatorInformers}
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	err = c.Run(ctx, o.Workers)
	// Stop the informers and wait for their goroutines before returning.
	for _, f := range factories {
		f.Shutdown()
	}
	return err
}

// serverProbe picks how the controller reaches the servers it runs.
func serverProbe(cfg *rest.Config, o Options) (controller.ServerProbe, error) {
	mode := o.ServerProbe
	if mode == "" || mode == "auto" {
		mode = "proxy"
		if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
			mode = "service"
		}
	}
	probe := controller.ServerProbe{Interval: o.ServerProbeInterval}
	switch mode {
	case "off":
		return controller.ServerProbe{}, nil
	case "service":
		// Straight to the Service: never through an HTTP(S)_PROXY of the environment.
		probe.HTTPClient = &http.Client{Transport: &http.Transport{Proxy: nil, ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second}}
		probe.BaseURL = controller.ServiceBaseURL
	case "proxy":
		client, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return probe, fmt.Errorf("building the API server proxy client: %w", err)
		}
		probe.HTTPClient, probe.BaseURL = client, controller.ProxyBaseURL(strings.TrimSuffix(cfg.Host, "/"))
	}
	return probe, nil
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
