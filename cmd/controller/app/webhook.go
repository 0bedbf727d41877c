package app

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/conversion"
	"github.com/llamastack/llama-stack-controller/pkg/webhook"
)

const (
	// DefaultWebhookServiceName is the webhook's Service in the operator namespace.
	DefaultWebhookServiceName = "llama-stack-controller-webhook"
	// WebhookCertModeSelf: the controller makes and renews its certificates (a Secret
	// shared by the replicas) and keeps the CRD's caBundle current.
	WebhookCertModeSelf = "self"
	// WebhookCertModeFiles: tls.crt and tls.key in WebhookCertDir, kept by someone else
	// (cert-manager), who also keeps the caBundle.
	WebhookCertModeFiles = "files"
	// fileCertsInterval is how often files mode looks for a renewed certificate.
	fileCertsInterval = 10 * time.Second
)

// webhookEnabled tells whether the options serve the conversion webhook.
func (o Options) webhookEnabled() bool {
	return o.WebhookBindAddress != "" && o.WebhookBindAddress != "0"
}

func (o Options) validateWebhook() []error {
	if !o.webhookEnabled() {
		return nil
	}
	var errs []error
	switch o.WebhookCertMode {
	case "", WebhookCertModeSelf:
		if err := webhook.CheckTimes(o.WebhookCAValidity, o.WebhookServingValidity, o.WebhookCAPropagation); err != nil {
			errs = append(errs, fmt.Errorf("--webhook-ca-validity=%s, --webhook-serving-validity=%s and --webhook-ca-propagation=%s do not fit: %w",
				orDefault(o.WebhookCAValidity, webhook.DefaultCAValidity), orDefault(o.WebhookServingValidity, webhook.DefaultServingValidity),
				orDefault(o.WebhookCAPropagation, webhook.DefaultCAPropagation), err))
		}
	case WebhookCertModeFiles:
		if o.WebhookCertDir == "" {
			errs = append(errs, fmt.Errorf("--webhook-cert-mode=files needs --webhook-cert-dir (holding tls.crt and tls.key)"))
		}
	default:
		errs = append(errs, fmt.Errorf("--webhook-cert-mode must be %s or %s, got %q", WebhookCertModeSelf, WebhookCertModeFiles, o.WebhookCertMode))
	}
	return errs
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// startWebhook serves the conversion webhook until ctx is cancelled, on every replica
// (the API server calls any of them through the Service), with the certificates of
// o.WebhookCertMode. It returns its readiness check, and a channel closed once the
// server and its certificate source have stopped after ctx ends: the listener is then
// closed, and a controller started again in the same process can listen on the same
// address.
func startWebhook(ctx context.Context, cfg *rest.Config, kubeClient kubernetes.Interface, o Options, opNamespace string) (ready func() error, stopped <-chan struct{}, err error) {
	logger := klog.FromContext(ctx).WithName("webhook")
	ctx = klog.NewContext(ctx, logger)
	var running sync.WaitGroup
	var certs webhook.CertificateSource
	switch o.WebhookCertMode {
	case WebhookCertModeFiles:
		files, err := webhook.NewFileCertificates(o.WebhookCertDir+"/tls.crt", o.WebhookCertDir+"/tls.key")
		if err != nil {
			return nil, nil, err
		}
		running.Go(func() { files.Run(ctx, fileCertsInterval) })
		certs = files
	default:
		crdClient, err := apiextensionsclient.NewForConfig(cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("building the CustomResourceDefinition client: %w", err)
		}
		service := o.WebhookServiceName
		if service == "" {
			service = DefaultWebhookServiceName
		}
		manager, err := webhook.NewCertManager(webhook.CertConfig{
			Namespace: opNamespace, ServiceName: service, ExtraHosts: splitList(o.WebhookCertHosts),
			CAValidity: o.WebhookCAValidity, ServingValidity: o.WebhookServingValidity, CAPropagation: o.WebhookCAPropagation,
		}, kubeClient, crdClient)
		if err != nil {
			return nil, nil, err
		}
		running.Go(func() { manager.Run(ctx) })
		certs = manager
	}
	handler, err := webhook.NewConversionHandler(schema.GroupKind{Group: "llamastack.io", Kind: "LlamaStackDistribution"},
		conversion.Versions, webhook.ConverterFunc(conversion.Convert), 0)
	if err == nil {
		var srv *webhook.Server
		if srv, err = webhook.NewServer(webhook.ServerOptions{BindAddress: o.WebhookBindAddress, Certificates: certs, Handler: handler}); err == nil {
			running.Go(func() {
				if err := srv.Serve(ctx); err != nil {
					logger.Error(err, "Conversion webhook stopped")
				}
			})
			logger.Info("Serving the conversion webhook", "address", srv.Addr().String(), "certMode", o.WebhookCertMode)
			ready = srv.Ready
		}
	}
	done := make(chan struct{})
	go func() {
		running.Wait()
		close(done)
	}()
	return ready, done, err
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
