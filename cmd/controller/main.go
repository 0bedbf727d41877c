// Command llama-stack-controller runs the LlamaStackDistribution controller, in a
// cluster (no flags needed) or locally against a kubeconfig.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/cmd/controller/app"
	"github.com/llamastack/llama-stack-controller/pkg/controller"
	"github.com/llamastack/llama-stack-controller/pkg/webhook"
)

func main() {
	klog.InitFlags(nil)
	var kubeconfig, master string
	o := app.Options{Version: app.Version()}
	registerFlags(flag.CommandLine, &o, &kubeconfig, &master)
	printVersion := flag.Bool("version", false, "Print the version (status.version.operatorVersion) and exit.")
	flag.Parse()
	if *printVersion {
		fmt.Println(o.Version)
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.FromContext(ctx)
	err := func() error {
		if err := o.Validate(); err != nil {
			return err
		}
		cfg, err := restConfig(kubeconfig, master)
		if err != nil {
			return fmt.Errorf("building the client configuration: %w", err)
		}
		return app.Run(ctx, cfg, o)
	}()
	if err != nil {
		logger.Error(err, "Controller failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

// registerFlags binds the controller's flags to o, kubeconfig and master.
func registerFlags(fs *flag.FlagSet, o *app.Options, kubeconfig, master *string) {
	fs.StringVar(kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Only required if out-of-cluster.")
	fs.StringVar(master, "master", "", "The address of the Kubernetes API server. Overrides any value in kubeconfig. Only required if out-of-cluster.")
	fs.StringVar(&o.Namespace, "namespace", "", "Watch LlamaStackDistributions and their children in this namespace only (default: all namespaces).")
	fs.StringVar(&o.OperatorNamespace, "operator-namespace", "", "Namespace of the operator ConfigMap "+controller.OperatorConfigMapName+" and the NetworkPolicy operator peer (default: $POD_NAMESPACE, else the in-cluster namespace, else "+app.DefaultOperatorNamespace+").")
	fs.IntVar(&o.Workers, "workers", app.DefaultWorkers, "Number of LlamaStackDistributions synced concurrently.")
	fs.Float64Var(&o.QPS, "kube-api-qps", app.DefaultQPS, "Queries per second to the Kubernetes API server.")
	fs.IntVar(&o.Burst, "kube-api-burst", app.DefaultBurst, "Burst of queries to the Kubernetes API server.")
	fs.Float64Var(&o.EventQPS, "kube-api-events-qps", app.DefaultEventQPS, "Queries per second of the client that writes Events, which has its own limit (0: the default).")
	fs.IntVar(&o.EventBurst, "kube-api-events-burst", app.DefaultEventBurst, "Burst of the client that writes Events (0: the default).")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 turns it off.")
	fs.StringVar(&o.ServerProbe, "server-probe", "auto", "How to read the servers' /v1/health, /v1/version and /v1/providers: auto (the Service in a cluster, the API server's service proxy outside), service, proxy, or off.")
	fs.DurationVar(&o.ServerProbeInterval, "server-probe-interval", time.Minute, "Time between probes of a ready server.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "Address of the /healthz (liveness) and /readyz (readiness) endpoints; 0 turns them off.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "Run the controller only while holding a coordination.k8s.io Lease, so that several replicas can run with one active.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", app.DefaultLeaseDuration, "How long standbys wait, after the last renewal they saw, before taking a Lease that was not released.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", app.DefaultRenewDeadline, "How long the leader tries to renew its Lease before it stops (and exits).")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", app.DefaultRetryPeriod, "Time between renewals by the leader and attempts by standbys.")
	fs.StringVar(&o.LeaseName, "leader-elect-resource-name", app.DefaultLeaseName, "Name of the Lease.")
	fs.StringVar(&o.LeaseNamespace, "leader-elect-resource-namespace", "", "Namespace of the Lease (default: the operator namespace).")
	fs.StringVar(&o.WebhookBindAddress, "webhook-bind-address", "0", "Address of the CRD's conversion webhook (HTTPS, /convert), served by every replica; 0 turns it off (the artifacts serve it on :9443).")
	fs.StringVar(&o.WebhookCertMode, "webhook-cert-mode", app.WebhookCertModeSelf, "Where the webhook's certificate comes from: self (made, renewed and published in the CRD's caBundle by the controller) or files (tls.crt and tls.key in --webhook-cert-dir, kept by cert-manager).")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "", "Directory of tls.crt and tls.key with --webhook-cert-mode=files.")
	fs.StringVar(&o.WebhookServiceName, "webhook-service-name", app.DefaultWebhookServiceName, "The webhook's Service in the operator namespace, named in the certificate the controller makes.")
	fs.StringVar(&o.WebhookCertHosts, "webhook-cert-hosts", "", "More DNS names and IP addresses for that certificate, comma-separated (a webhook reached on loopback: localhost,127.0.0.1).")
	fs.DurationVar(&o.WebhookCAValidity, "webhook-ca-validity", webhook.DefaultCAValidity, "For tests and tuning: how long the CA of --webhook-cert-mode=self is valid; a new one is made at two thirds of it.")
	fs.DurationVar(&o.WebhookServingValidity, "webhook-serving-validity", webhook.DefaultServingValidity, "For tests and tuning: how long the serving certificate of --webhook-cert-mode=self is valid; it is renewed at two thirds of it. At most a third of --webhook-ca-validity, at least "+webhook.MinServingValidity.String()+".")
	fs.DurationVar(&o.WebhookCAPropagation, "webhook-ca-propagation", webhook.DefaultCAPropagation, "For tests and tuning: how long a new CA is in the CRD's caBundle before it signs the serving certificate. At most a third of --webhook-serving-validity.")
}

// restConfig is the in-cluster configuration when no flag names a cluster, else (or
// outside a cluster) the usual kubeconfig rules: the flags, $KUBECONFIG, ~/.kube/config.
func restConfig(kubeconfig, master string) (*rest.Config, error) {
	if kubeconfig == "" && master == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	return clientcmd.BuildConfigFromFlags(master, kubeconfig)
}
