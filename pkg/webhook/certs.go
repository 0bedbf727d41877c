package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// CRDName is the CustomResourceDefinition whose caBundle the CertManager keeps.
	CRDName = "llamastackdistributions.llamastack.io"
	// DefaultSecretName holds the CA and the serving certificate.
	DefaultSecretName = "llama-stack-controller-webhook-cert"
	// DefaultCAValidity is the CA's life; it is replaced at two thirds of it.
	DefaultCAValidity = 3 * 365 * 24 * time.Hour
	// DefaultServingValidity is the serving certificate's life; it is renewed at two
	// thirds of it (60 days).
	DefaultServingValidity = 90 * 24 * time.Hour
	// DefaultCAPropagation is how long a new CA is in the CRD's caBundle before it signs
	// the serving certificate: every API server reads the CRD within seconds.
	DefaultCAPropagation = time.Hour
	// MinServingValidity is the shortest serving certificate's life CheckTimes accepts:
	// shorter would have the replicas rewrite the Secret every few seconds.
	MinServingValidity = 10 * time.Second

	fieldManager = "llama-stack-controller"
	queueKey     = "certificates"
)

// CertConfig configures a CertManager.
type CertConfig struct {
	// Namespace holds the Secret; the controller's own.
	Namespace string
	// SecretName is the Secret's name; "" means DefaultSecretName.
	SecretName string
	// ServiceName is the webhook's Service in Namespace: the serving certificate is for
	// <ServiceName>.<Namespace>.svc and <ServiceName>.<Namespace>.svc.cluster.local.
	// "" leaves them out (a webhook reached by URL only).
	ServiceName string
	// ExtraHosts are more DNS names and IP addresses for the serving certificate, such as
	// localhost and 127.0.0.1 for a webhook the API server reaches on loopback.
	ExtraHosts []string
	// CRDName is the CRD whose caBundle is kept; "" means CRDName.
	CRDName string
	// CAValidity, ServingValidity and CAPropagation; 0 means their defaults.
	CAValidity      time.Duration
	ServingValidity time.Duration
	CAPropagation   time.Duration
	// Clock tells the time; nil means the real clock.
	Clock clock.PassiveClock
}

// CertManager keeps the webhook's CA and serving certificate in one Secret shared by
// every replica, renews them before they expire, keeps the CRD's conversion caBundle
// current, and hands the serving certificate to the TLS server (it is a
// CertificateSource) as soon as the Secret changes, without a restart.
//
// Every replica runs one. Each reads the Secret and the CRD through informers narrowed
// to their names; whichever finds something due writes the Secret: a create fails for
// all but one replica, which then read the winner's Secret, and an update carries the
// resourceVersion it was planned from, so that two replicas never both replace it.
//
// A deleted Secret is made again, with a new CA: until the API servers have read the
// CRD's new caBundle, a few seconds, conversions through a replica serving the new
// certificate fail. Otherwise a new CA joins the old one in the bundle, which keeps it
// until it expires.
type CertManager struct {
	cfg    CertConfig
	policy certPolicy
	clock  clock.PassiveClock

	kubeClient kubernetes.Interface
	crdClient  apiextensionsclient.Interface

	secretInformer cache.SharedIndexInformer
	secretLister   corelisters.SecretLister
	crdInformer    cache.SharedIndexInformer
	crdLister      apiextensionslisters.CustomResourceDefinitionLister

	queue workqueue.TypedRateLimitingInterface[string]

	serving atomic.Pointer[tls.Certificate]

	// publishedSince is when each CA of the CRD's caBundle (by its DER) was first seen
	// there; nil until the first look at a CRD with a caBundle field (see publication).
	publishedSince map[string]time.Time
}

// NewCertManager checks cfg and makes a CertManager; Run starts it.
func NewCertManager(cfg CertConfig, kubeClient kubernetes.Interface, crdClient apiextensionsclient.Interface) (*CertManager, error) {
	if cfg.SecretName == "" {
		cfg.SecretName = DefaultSecretName
	}
	if cfg.CRDName == "" {
		cfg.CRDName = CRDName
	}
	if err := CheckTimes(cfg.CAValidity, cfg.ServingValidity, cfg.CAPropagation); err != nil {
		return nil, fmt.Errorf("webhook certificates: %w", err)
	}
	cfg.CAValidity, cfg.ServingValidity, cfg.CAPropagation = withDefaultTimes(cfg.CAValidity, cfg.ServingValidity, cfg.CAPropagation)
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	hosts, err := cfg.hosts()
	if err != nil {
		return nil, err
	}

	m := &CertManager{
		cfg:        cfg,
		policy:     certPolicy{hosts: hosts, caValidity: cfg.CAValidity, servingValidity: cfg.ServingValidity, caPropagation: cfg.CAPropagation},
		clock:      cfg.Clock,
		kubeClient: kubeClient,
		crdClient:  crdClient,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "webhook-certificates"}),
	}
	byName := func(name string) func(*metav1.ListOptions) {
		return func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}
	}
	m.secretInformer = coreinformers.NewFilteredSecretInformer(kubeClient, cfg.Namespace, 0, cache.Indexers{}, byName(cfg.SecretName))
	m.secretLister = corelisters.NewSecretLister(m.secretInformer.GetIndexer())
	m.crdInformer = apiextensionsinformers.NewFilteredCustomResourceDefinitionInformer(crdClient, 0, cache.Indexers{}, byName(cfg.CRDName))
	m.crdLister = apiextensionslisters.NewCustomResourceDefinitionLister(m.crdInformer.GetIndexer())
	for _, inf := range []cache.SharedIndexInformer{m.secretInformer, m.crdInformer} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { m.queue.Add(queueKey) },
			UpdateFunc: func(oldObj, newObj any) {
				o, n := oldObj.(metav1.Object), newObj.(metav1.Object)
				if o.GetResourceVersion() != n.GetResourceVersion() {
					m.queue.Add(queueKey)
				}
			},
			DeleteFunc: func(any) { m.queue.Add(queueKey) },
		}); err != nil {
			return nil, fmt.Errorf("watching for the webhook certificates: %w", err)
		}
	}
	return m, nil
}

func withDefaultTimes(caValidity, servingValidity, caPropagation time.Duration) (time.Duration, time.Duration, time.Duration) {
	if caValidity == 0 {
		caValidity = DefaultCAValidity
	}
	if servingValidity == 0 {
		servingValidity = DefaultServingValidity
	}
	if caPropagation == 0 {
		caPropagation = DefaultCAPropagation
	}
	return caValidity, servingValidity, caPropagation
}

// CheckTimes reports whether a CA valid for caValidity, serving certificates valid for
// servingValidity and a new CA trusted for caPropagation before it signs make a
// rotation without a break; 0 means the default. Both are renewed at two thirds of
// their lives, so:
//
//   - a CA stays in the caBundle for the last third of its life, after its successor
//     is made, and the serving certificates it signed before must run out in that
//     third: servingValidity is at most a third of caValidity;
//   - a serving certificate due when a new CA is made waits up to caPropagation for it,
//     within the third of its life it has left: caPropagation is at most a third of
//     servingValidity;
//   - servingValidity is at least MinServingValidity.
func CheckTimes(caValidity, servingValidity, caPropagation time.Duration) error {
	var errs []error
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"the CA validity", caValidity}, {"the serving certificate validity", servingValidity}, {"the CA propagation delay", caPropagation}} {
		if d.value < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", d.name, d.value))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	caValidity, servingValidity, caPropagation = withDefaultTimes(caValidity, servingValidity, caPropagation)
	if servingValidity < MinServingValidity {
		errs = append(errs, fmt.Errorf("the serving certificate validity (%s) must be at least %s", servingValidity, MinServingValidity))
	}
	if caValidity/3 < servingValidity {
		errs = append(errs, fmt.Errorf("the serving certificate validity (%s) must be at most a third of the CA validity (%s): "+
			"a CA is replaced at two thirds of its life, and what it signed must expire before it does", servingValidity, caValidity))
	}
	if servingValidity*2/3 < 2*caPropagation {
		errs = append(errs, fmt.Errorf("the CA propagation delay (%s) must be at most a third of the serving certificate validity (%s): "+
			"a serving certificate due when a new CA is made waits that long for the API servers to trust it", caPropagation, servingValidity))
	}
	return errors.Join(errs...)
}

// hosts lists the serving certificate's DNS names and IP addresses.
func (cfg CertConfig) hosts() ([]string, error) {
	if cfg.Namespace == "" {
		return nil, errors.New("webhook certificates: the Secret's namespace is required")
	}
	var hosts []string
	if cfg.ServiceName != "" {
		if errs := validation.IsDNS1035Label(cfg.ServiceName); len(errs) > 0 {
			return nil, fmt.Errorf("webhook certificates: Service name %q: %v", cfg.ServiceName, errs)
		}
		svc := cfg.ServiceName + "." + cfg.Namespace + ".svc"
		hosts = append(hosts, svc, svc+".cluster.local")
	}
	for _, h := range cfg.ExtraHosts {
		if net.ParseIP(h) == nil {
			if errs := validation.IsDNS1123Subdomain(h); len(errs) > 0 {
				return nil, fmt.Errorf("webhook certificates: host %q is neither an IP address nor a DNS name: %v", h, errs)
			}
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, errors.New("webhook certificates: a Service name or an extra host is required")
	}
	return hosts, nil
}

// Certificate returns the serving certificate, or nil before the first is loaded.
func (m *CertManager) Certificate() *tls.Certificate {
	return m.serving.Load()
}

// Run keeps the certificates until ctx ends. Every replica runs it, leader or not.
func (m *CertManager) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer m.queue.ShutDown()
	logger := klog.FromContext(ctx)
	logger.Info("Keeping the webhook certificates", "secret", klog.KRef(m.cfg.Namespace, m.cfg.SecretName), "crd", m.cfg.CRDName, "hosts", m.policy.hosts)

	if !m.startInformers(ctx) {
		return
	}
	m.queue.Add(queueKey)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for m.processNextWorkItem(ctx) {
		}
	}, time.Second)
	<-ctx.Done()
}

// startInformers runs the informers until ctx ends and waits for their caches.
func (m *CertManager) startInformers(ctx context.Context) bool {
	go m.secretInformer.RunWithContext(ctx)
	go m.crdInformer.RunWithContext(ctx)
	return cache.WaitForNamedCacheSyncWithContext(ctx, m.secretInformer.HasSynced, m.crdInformer.HasSynced)
}

func (m *CertManager) processNextWorkItem(ctx context.Context) bool {
	key, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(key)
	next, err := m.sync(ctx)
	switch {
	case err == nil:
		m.queue.Forget(key)
		// The informers' events bring any change of the Secret or the CRD; only
		// time is left to wait for (at least a second: a plan never asks for less).
		m.queue.AddAfter(key, max(next.Sub(m.clock.Now()), time.Second))
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		// Another replica wrote first; its write arrives through the informer.
		klog.FromContext(ctx).V(4).Info("Webhook certificates changed meanwhile; retrying", "err", err)
		m.queue.AddRateLimited(key)
	default:
		utilruntime.HandleErrorWithContext(ctx, err, "Keeping the webhook certificates; retrying")
		m.queue.AddRateLimited(key)
	}
	return true
}

// sync brings the Secret, the served certificate and the CRD's caBundle up to date and
// returns when to look again.
func (m *CertManager) sync(ctx context.Context) (time.Time, error) {
	secret, err := m.secretLister.Secrets(m.cfg.Namespace).Get(m.cfg.SecretName)
	if apierrors.IsNotFound(err) {
		secret = nil
	} else if err != nil {
		return time.Time{}, fmt.Errorf("reading Secret %s from the cache: %w", klog.KRef(m.cfg.Namespace, m.cfg.SecretName), err)
	}
	crd, err := m.crdLister.Get(m.cfg.CRDName)
	if apierrors.IsNotFound(err) {
		crd = nil
	} else if err != nil {
		return time.Time{}, fmt.Errorf("reading CRD %s from the cache: %w", m.cfg.CRDName, err)
	}

	plan, err := m.ensureSecret(ctx, secret, m.publication(crd))
	if err != nil {
		return time.Time{}, err
	}
	m.load(ctx, plan.serving)
	if err := m.ensureCABundle(ctx, crd, plan.caBundle); err != nil {
		return time.Time{}, err
	}
	return plan.next, nil
}

// load serves cert from now on, if it is not the one served already.
func (m *CertManager) load(ctx context.Context, cert *tls.Certificate) {
	old := m.serving.Load()
	if old != nil && bytes.Equal(old.Certificate[0], cert.Certificate[0]) {
		return
	}
	m.serving.Store(cert)
	klog.FromContext(ctx).Info("Serving a new webhook certificate", "serial", cert.Leaf.SerialNumber.Text(16),
		"notBefore", cert.Leaf.NotBefore, "notAfter", cert.Leaf.NotAfter, "issuer", cert.Leaf.Issuer.CommonName)
}

// ensureSecret writes what the plan says the Secret should hold, if it differs, and
// returns the plan of what the Secret now holds.
func (m *CertManager) ensureSecret(ctx context.Context, secret *corev1.Secret, published publication) (*certPlan, error) {
	logger := klog.FromContext(ctx)
	ref := klog.KRef(m.cfg.Namespace, m.cfg.SecretName)
	for attempt := 0; ; attempt++ {
		if secret != nil && secret.Type != corev1.SecretTypeTLS {
			return nil, fmt.Errorf("Secret %s is of type %q, not %q: delete it, and the controller makes a new one", ref, secret.Type, corev1.SecretTypeTLS)
		}
		var current map[string][]byte
		if secret != nil {
			current = secret.Data
		}
		plan, err := planCertificates(current, m.clock.Now(), m.policy, published)
		if err != nil {
			return nil, fmt.Errorf("planning the certificates of Secret %s: %w", ref, err)
		}
		if !plan.changed {
			return plan, nil
		}
		if secret != nil {
			updated := secret.DeepCopy()
			updated.Data = plan.data
			// The resourceVersion read is the precondition: a replica that wrote in the
			// meantime makes this a conflict.
			if _, err := m.kubeClient.CoreV1().Secrets(m.cfg.Namespace).Update(ctx, updated, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
				return nil, fmt.Errorf("updating Secret %s: %w", ref, err)
			}
			logger.V(2).Info("Updated the webhook certificates", "secret", ref, "reasons", plan.reasons)
			return plan, nil
		}
		_, err = m.kubeClient.CoreV1().Secrets(m.cfg.Namespace).Create(ctx, m.newSecret(plan.data), metav1.CreateOptions{FieldManager: fieldManager})
		if err == nil {
			logger.V(2).Info("Created the webhook certificates", "secret", ref, "reasons", plan.reasons)
			return plan, nil
		}
		if !apierrors.IsAlreadyExists(err) || attempt > 0 {
			return nil, fmt.Errorf("creating Secret %s: %w", ref, err)
		}
		// Another replica created it first: plan again from what it wrote.
		logger.V(4).Info("Another replica created the webhook certificates first", "secret", ref)
		if secret, err = m.kubeClient.CoreV1().Secrets(m.cfg.Namespace).Get(ctx, m.cfg.SecretName, metav1.GetOptions{}); err != nil {
			return nil, fmt.Errorf("reading Secret %s another replica created: %w", ref, err)
		}
	}
}

func (m *CertManager) newSecret(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      m.cfg.SecretName,
			Namespace: m.cfg.Namespace,
			Labels: map[string]string{
				"app.kubernetes.io/name":    "llama-stack-controller",
				"app.kubernetes.io/part-of": "llama-stack",
			},
		},
		Type: corev1.SecretTypeTLS,
		Data: data,
	}
}
