// Command llama-stack-controller runs the LlamaStackDistribution controller, in a
// cluster (no flags needed) or locally against a kubeconfig.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/controller"
	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	informers "github.com/llamastack/llama-stack-controller/pkg/generated/informers/externalversions"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "latest"

const (
	defaultOperatorNamespace = "llama-stack-controller-system"
	serviceAccountNamespace  = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
	// resyncPeriod re-delivers cached objects; a sync it triggers sends no request.
	resyncPeriod = 10 * time.Hour
)

type options struct {
	kubeconfig        string
	master            string
	namespace         string
	operatorNamespace string
	workers           int
	qps               float64
	burst             int
}

func main() {
	klog.InitFlags(nil)
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Only required if out-of-cluster.")
	flag.StringVar(&o.master, "master", "", "The address of the Kubernetes API server. Overrides any value in kubeconfig. Only required if out-of-cluster.")
	flag.StringVar(&o.namespace, "namespace", "", "Watch LlamaStackDistributions and their children in this namespace only (default: all namespaces).")
	flag.StringVar(&o.operatorNamespace, "operator-namespace", "", "Namespace of the operator ConfigMap "+controller.OperatorConfigMapName+" and the NetworkPolicy operator peer (default: $POD_NAMESPACE, else the in-cluster namespace, else "+defaultOperatorNamespace+").")
	flag.IntVar(&o.workers, "workers", 4, "Number of LlamaStackDistributions synced concurrently.")
	flag.Float64Var(&o.qps, "kube-api-qps", 50, "Queries per second to the Kubernetes API server.")
	flag.IntVar(&o.burst, "kube-api-burst", 100, "Burst of queries to the Kubernetes API server.")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.FromContext(ctx)
	if err := run(ctx, o); err != nil {
		logger.Error(err, "Controller failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

func (o options) validate() error {
	var errs []error
	if o.workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.workers))
	}
	if o.qps <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive, got %v", o.qps))
	}
	if o.burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.burst))
	}
	return errors.Join(errs...)
}

// operatorNamespace resolves the controller's own namespace.
func operatorNamespace(flagValue string) string {
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
	return defaultOperatorNamespace
}

func restConfig(o options) (*rest.Config, error) {
	if o.kubeconfig == "" && o.master == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
		// Outside a cluster: the usual kubeconfig rules ($KUBECONFIG, ~/.kube/config).
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	return clientcmd.BuildConfigFromFlags(o.master, o.kubeconfig)
}

func run(ctx context.Context, o options) error {
	logger := klog.FromContext(ctx)
	if err := o.validate(); err != nil {
		return err
	}
	cfg, err := restConfig(o)
	if err != nil {
		return fmt.Errorf("building the client configuration: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cfg.UserAgent = "llama-stack-controller/" + version

	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the LlamaStackDistribution client: %w", err)
	}
	opNamespace := operatorNamespace(o.operatorNamespace)
	logger.Info("Starting", "version", version, "namespace", o.namespace, "operatorNamespace", opNamespace, "workers", o.workers)

	managed := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": controller.ManagedByValue}).String()
	llsdInformers := informers.NewSharedInformerFactoryWithOptions(client, resyncPeriod,
		informers.WithNamespace(o.namespace),
		informers.WithTransform(controller.TransformStripManagedFields))
	childInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resyncPeriod,
		kubeinformers.WithNamespace(o.namespace),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = managed }),
		kubeinformers.WithTransform(controller.TransformStripManagedFields))
	configMapInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resyncPeriod,
		kubeinformers.WithNamespace(o.namespace),
		kubeinformers.WithTransform(controller.TransformConfigMap))
	operatorInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resyncPeriod,
		kubeinformers.WithNamespace(opNamespace),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", controller.OperatorConfigMapName).String()
		}),
		kubeinformers.WithTransform(controller.TransformStripManagedFields))

	c, err := controller.NewController(ctx, controller.Config{
		KubeClient:         kubeClient,
		Client:             client,
		LLSDInformers:      llsdInformers,
		ChildInformers:     childInformers,
		ConfigMapInformers: configMapInformers,
		OperatorInformers:  operatorInformers,
		OperatorNamespace:  opNamespace,
		WatchNamespace:     o.namespace,
		OperatorVersion:    version,
	})
	if err != nil {
		return err
	}
	for _, f := range []interface{ Start(<-chan struct{}) }{llsdInformers, childInformers, configMapInformers, operatorInformers} {
		f.Start(ctx.Done())
	}
	err = c.Run(ctx, o.workers)
	// Stop the informers and wait for their goroutines before returning.
	llsdInformers.Shutdown()
	childInformers.Shutdown()
	configMapInformers.Shutdown()
	operatorInformers.Shutdown()
	return err
}
