package webhook

import (
	"context"
	"crypto/x509"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const (
	testNamespace = "system"
	testSecret    = "webhook-cert"
)

var (
	secretsGVR = corev1.SchemeGroupVersion.WithResource("secrets")
	crdsGVR    = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
)

// trackResourceVersions makes a fake clientset's creates, updates and patches behave
// as the API server's do with resourceVersions, which the fake tracker does not: each
// write stores a new resourceVersion in the object, and an update whose
// resourceVersion is not the stored one is a conflict.
func trackResourceVersions(f *core.Fake, tracker core.ObjectTracker, rv *atomic.Int64) {
	next := func() string { return strconv.FormatInt(rv.Add(1), 10) }
	f.PrependReactor("create", "*", func(a core.Action) (bool, runtime.Object, error) {
		obj := a.(core.CreateAction).GetObject().DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		m.SetResourceVersion(next())
		if err := tracker.Create(a.GetResource(), obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	f.PrependReactor("update", "*", func(a core.Action) (bool, runtime.Object, error) {
		obj := a.(core.UpdateAction).GetObject().DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		stored, err := tracker.Get(a.GetResource(), a.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		sm, _ := meta.Accessor(stored)
		if m.GetResourceVersion() != sm.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), m.GetName(),
				errorString("the object has been modified; please apply your changes to the latest version and try again"))
		}
		m.SetResourceVersion(next())
		if err := tracker.Update(a.GetResource(), obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	f.PrependReactor("patch", "*", func(a core.Action) (bool, runtime.Object, error) {
		_, obj, err := core.ObjectReaction(tracker)(a)
		if err != nil {
			return true, nil, err
		}
		m, _ := meta.Accessor(obj)
		m.SetResourceVersion(next())
		if err := tracker.Update(a.GetResource(), obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
}

type errorString string

func (e errorString) Error() string { return string(e) }

// fixture is a cluster of fake clientsets that any number of CertManagers (replicas)
// share, with one fake clock.
type fixture struct {
	t *testing.T
	// namespace and secretName of the replicas: testNamespace and testSecret.
	namespace, secretName string

	ctx   context.Context
	kube  *k8sfake.Clientset
	ext   *apiextensionsfake.Clientset
	clock *testingclock.FakeClock
}

func newFixture(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var rv atomic.Int64
	rv.Store(1000)
	f := &fixture{t: t, namespace: testNamespace, secretName: testSecret, ctx: ctx, kube: k8sfake.NewClientset(), clock: testingclock.NewFakeClock(time.Now().Truncate(time.Second))}
	if crd != nil {
		f.ext = apiextensionsfake.NewClientset(crd)
	} else {
		f.ext = apiextensionsfake.NewClientset()
	}
	trackResourceVersions(&f.kube.Fake, f.kube.Tracker(), &rv)
	trackResourceVersions(&f.ext.Fake, f.ext.Tracker(), &rv)
	return f
}

func webhookCRD(strategy apiextensionsv1.ConversionStrategyType) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: CRDName, ResourceVersion: "1"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group:      "llamastack.io",
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: strategy},
		},
	}
	if strategy == apiextensionsv1.WebhookConverter {
		crd.Spec.Conversion.Webhook = &apiextensionsv1.WebhookConversion{
			ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{
				Service: &apiextensionsv1.ServiceReference{Namespace: testNamespace, Name: "webhook", Path: ptr.To(ConvertPath)},
			},
		}
	}
	return crd
}

// replica makes a CertManager on the fixture's clients; with informers, its caches are
// filled and kept by running informers, as in a cluster.
func (f *fixture) replica(informers bool) *CertManager {
	f.t.Helper()
	m, err := NewCertManager(CertConfig{
		Namespace: f.namespace, SecretName: f.secretName, ServiceName: "webhook",
		ExtraHosts: []string{"localhost", "127.0.0.1"}, Clock: f.clock,
	}, f.kube, f.ext)
	require.NoError(f.t, err)
	if informers {
		require.True(f.t, m.startInformers(f.ctx))
	}
	return m
}

// sync runs one sync of m once its caches have what the fake API holds.
func (f *fixture) sync(m *CertManager) time.Time {
	f.t.Helper()
	f.waitCached(m)
	next, err := m.sync(f.ctx)
	require.NoError(f.t, err)
	return next
}

// waitCached waits until m's informers have the stored Secret and CRD.
func (f *fixture) waitCached(m *CertManager) {
	f.t.Helper()
	rv := func(obj runtime.Object, err error) string {
		if err != nil {
			return "none"
		}
		a, _ := meta.Accessor(obj)
		return a.GetResourceVersion()
	}
	require.NoError(f.t, wait.PollUntilContextTimeout(f.ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		s1 := rv(f.kube.Tracker().Get(secretsGVR, f.namespace, f.secretName))
		s2 := rv(m.secretLister.Secrets(f.namespace).Get(f.secretName))
		c1 := rv(f.ext.Tracker().Get(crdsGVR, "", CRDName))
		c2 := rv(m.crdLister.Get(CRDName))
		return s1 == s2 && c1 == c2, nil
	}))
}

func (f *fixture) secret() *corev1.Secret {
	f.t.Helper()
	obj, err := f.kube.Tracker().Get(secretsGVR, f.namespace, f.secretName)
	require.NoError(f.t, err)
	return obj.(*corev1.Secret)
}

func (f *fixture) crd() *apiextensionsv1.CustomResourceDefinition {
	f.t.Helper()
	obj, err := f.ext.Tracker().Get(crdsGVR, "", CRDName)
	require.NoError(f.t, err)
	return obj.(*apiextensionsv1.CustomResourceDefinition)
}

func (f *fixture) caBundle() []*x509.Certificate {
	f.t.Helper()
	bundle, ok := webhookCABundle(f.crd())
	require.True(f.t, ok)
	cas, err := parseCertificates(bundle)
	require.NoError(f.t, err)
	return cas
}

// writes lists the fakes' create, update and patch actions since the last call, as
// "verb resource[/name]": the Secrets' first, then the CRDs'.
func (f *fixture) writes() []string {
	var out []string
	for _, c := range []*core.Fake{&f.kube.Fake, &f.ext.Fake} {
		for _, a := range c.Actions() {
			switch a.GetVerb() {
			case "create", "update":
				out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
			case "patch":
				out = append(out, "patch "+a.GetResource().Resource+"/"+a.(core.PatchAction).GetName())
			}
		}
		c.ClearActions()
	}
	return out
}

// verifiesWithCABundle checks that m's certificate verifies with the CRD's caBundle,
// as the API server checks it, for the Service's name.
func (f *fixture) verifiesWithCABundle(m *CertManager) {
	f.t.Helper()
	roots := x509.NewCertPool()
	for _, ca := range f.caBundle() {
		roots.AddCert(ca)
	}
	cert := m.Certificate()
	require.NotNil(f.t, cert)
	_, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "webhook.system.svc", CurrentTime: f.clock.Now()})
	require.NoError(f.t, err)
}

func TestFirstStartCreatesTheSecretAndSetsTheCABundle(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	m := f.replica(true)
	require.Nil(t, m.Certificate(), "nothing to serve before the first sync")
	next := f.sync(m)
	require.Equal(t, []string{"create secrets", "patch customresourcedefinitions/" + CRDName}, f.writes())

	s := f.secret()
	require.Equal(t, corev1.SecretTypeTLS, s.Type)
	require.ElementsMatch(t, []string{"ca.crt", "ca.key", "tls.crt", "tls.key"}, keysOf(s.Data))
	require.Equal(t, "llama-stack-controller", s.Labels["app.kubernetes.io/name"])
	bundle, _ := webhookCABundle(f.crd())
	require.Equal(t, string(s.Data[keyCABundle]), string(bundle))
	f.verifiesWithCABundle(m)
	require.ElementsMatch(t, []string{"webhook.system.svc", "webhook.system.svc.cluster.local", "localhost", "127.0.0.1"}, hostsOf(m.Certificate().Leaf))
	require.Equal(t, renewAt(m.Certificate().Leaf), next, "the next sync is the renewal")
	require.Equal(t, 60*24*time.Hour, next.Sub(f.clock.Now()).Round(time.Hour), "renewed at two thirds of 90 days")
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestNoWriteWhenNothingChanged(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	m := f.replica(true)
	f.sync(m)
	f.writes()
	served := m.Certificate()
	f.clock.Step(24 * time.Hour)
	for range 3 {
		f.sync(m)
	}
	require.Empty(t, f.writes())
	require.Same(t, served, m.Certificate(), "the same certificate is served")
}

func TestASecondReplicaReusesTheSecret(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	first := f.replica(true)
	f.sync(first)
	f.writes()
	second := f.replica(true)
	f.sync(second)
	require.Empty(t, f.writes(), "the second replica writes nothing")
	require.Equal(t, first.Certificate().Certificate, second.Certificate().Certificate)
}

// TestReplicasStartingTogether: a replica whose cache has no Secret yet creates one,
// finds it created by another, and serves that one.
func TestReplicasStartingTogether(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	first := f.replica(true)
	late := f.replica(false) // its caches are empty: it has not seen the Secret
	f.sync(first)
	f.writes()
	_, err := late.sync(f.ctx)
	require.NoError(t, err)
	var verbs []string
	for _, a := range f.kube.Actions() {
		verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource)
	}
	require.Equal(t, []string{"create secrets", "get secrets"}, verbs, "a refused create, a read, no update")
	require.Equal(t, first.Certificate().Certificate, late.Certificate().Certificate)
}

// TestOnlyOneReplicaRenews: two replicas that both find the certificate due both write
// with the same resourceVersion; one wins, the other gets a conflict and then serves
// the winner's certificate without writing.
func TestOnlyOneReplicaRenews(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	a := f.replica(true)
	f.sync(a)
	b := f.replica(false)
	// b's cache holds the Secret as it is now and will not see a's update.
	require.NoError(t, b.secretInformer.GetIndexer().Add(f.secret()))
	require.NoError(t, b.crdInformer.GetIndexer().Add(f.crd()))
	_, err := b.sync(f.ctx)
	require.NoError(t, err)
	f.writes()
	old := a.Certificate()

	f.clock.SetTime(renewAt(old.Leaf))
	f.sync(a)
	require.Equal(t, []string{"update secrets"}, f.writes())
	_, err = b.sync(f.ctx)
	require.True(t, apierrors.IsConflict(err), "%v", err)
	require.Equal(t, []string{"update secrets"}, f.writes(), "b's update is refused")
	require.Equal(t, old.Certificate, b.Certificate().Certificate, "b serves the old certificate until it reads the new one")
	require.Equal(t, a.Certificate().Certificate[0], servingDER(t, f.secret()), "the Secret holds the winner's certificate")

	// The informer brings b the winner's Secret.
	require.NoError(t, b.secretInformer.GetIndexer().Update(f.secret()))
	_, err = b.sync(f.ctx)
	require.NoError(t, err)
	require.Empty(t, f.writes())
	require.Equal(t, a.Certificate().Certificate, b.Certificate().Certificate)
	require.NotEqual(t, old.Certificate, b.Certificate().Certificate)
}

func servingDER(t *testing.T, s *corev1.Secret) []byte {
	t.Helper()
	certs, err := parseCertificates(s.Data[keyTLSCert])
	require.NoError(t, err)
	require.Len(t, certs, 1)
	return certs[0].Raw
}

// TestCARotationKeepsOldAndNewCAsInTheCABundle follows one replica from sync to sync
// (each at the time the last one asked for) through a CA rotation: the new CA joins
// the CRD's caBundle beside the old one while the old one still signs what is served,
// the serving certificate moves to the new CA later, and the old CA leaves the bundle
// when it expires. What is served verifies with the CRD's caBundle at every step.
func TestCARotationKeepsOldAndNewCAsInTheCABundle(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	m := f.replica(true)
	next := f.sync(m)
	first := f.caBundle()
	require.Len(t, first, 1)
	oldCA := first[0]

	var rotatedAt, movedAt, droppedAt time.Time
	for step := 0; droppedAt.IsZero(); step++ {
		require.Less(t, step, 50, "the old CA is never dropped")
		served := m.Certificate()
		f.clock.SetTime(next)
		next = f.sync(m)
		f.verifiesWithCABundle(m)
		bundle := f.caBundle()
		issuer := issuedBy(m.Certificate().Leaf, bundle)
		require.NotNil(t, issuer)
		switch {
		case rotatedAt.IsZero() && len(bundle) == 2:
			rotatedAt = f.clock.Now()
			require.True(t, bundle[1].Equal(oldCA), "the old CA stays, after the new one")
			require.Equal(t, served, m.Certificate(), "the certificate served is kept while the new CA propagates")
		case !rotatedAt.IsZero() && movedAt.IsZero() && !issuer.Equal(oldCA):
			movedAt = f.clock.Now()
			require.Len(t, bundle, 2, "the old CA is still trusted while replicas may serve what it signed")
			require.GreaterOrEqual(t, movedAt.Sub(rotatedAt), DefaultCAPropagation)
		case !movedAt.IsZero() && len(bundle) == 1:
			droppedAt = f.clock.Now()
			require.False(t, bundle[0].Equal(oldCA))
			require.Equal(t, oldCA.NotAfter, droppedAt, "dropped when it expires")
		}
	}
	require.Equal(t, renewAt(oldCA), rotatedAt, "the CA is replaced at two thirds of its life")
}

// refuseCABundlePatches makes the fake API server refuse the CRD's patches while refuse
// is set: a caBundle that cannot be published (RBAC, an overloaded API server).
func (f *fixture) refuseCABundlePatches(refuse *atomic.Bool) {
	f.ext.PrependReactor("patch", "customresourcedefinitions", func(core.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, apierrors.NewServiceUnavailable("the patch is refused")
		}
		return false, nil, nil
	})
}

// TestPropagationCountsFromPublication: a new CA signs the serving certificate only once
// it has been in the CRD's caBundle for the propagation delay, however long after it
// was made the caBundle got it. Here the caBundle cannot be set for two hours after the
// CA rotation: once it is, the due serving certificate still waits an hour, so that
// every API server has read the new caBundle first.
func TestPropagationCountsFromPublication(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	var refuse atomic.Bool
	f.refuseCABundlePatches(&refuse)
	m := f.replica(true)
	next := f.sync(m)
	oldCA := f.caBundle()[0]
	// Renewals up to the CA's due date.
	for next.Before(renewAt(oldCA)) {
		f.clock.SetTime(next)
		next = f.sync(m)
	}
	f.writes()
	served := m.Certificate()

	// The CA falls due; its successor cannot be published.
	refuse.Store(true)
	f.clock.SetTime(renewAt(oldCA))
	f.waitCached(m)
	_, err := m.sync(f.ctx)
	require.ErrorContains(t, err, "the patch is refused")
	require.Equal(t, []string{"update secrets", "patch customresourcedefinitions/" + CRDName}, f.writes())
	cas, err := parseCertificates(f.secret().Data[keyCABundle])
	require.NoError(t, err)
	require.Len(t, cas, 2)
	newCA := cas[0]

	// The serving certificate falls due while the new CA is still unpublished, long
	// after it was made: it waits.
	due := renewAt(served.Leaf)
	if limit := renewAt(oldCA).Add(2 * DefaultCAPropagation); due.Before(limit) {
		due = limit
	}
	require.True(t, due.Before(served.Leaf.NotAfter))
	f.clock.SetTime(due)
	f.waitCached(m)
	_, err = m.sync(f.ctx)
	require.ErrorContains(t, err, "the patch is refused")
	require.Equal(t, []string{"patch customresourcedefinitions/" + CRDName}, f.writes())
	require.Equal(t, served.Certificate, m.Certificate().Certificate)

	// The patch goes through: the caBundle has the new CA from now on.
	refuse.Store(false)
	published := due.Add(time.Minute)
	f.clock.SetTime(published)
	f.sync(m)
	require.Equal(t, []string{"patch customresourcedefinitions/" + CRDName}, f.writes())
	require.True(t, f.caBundle()[0].Equal(newCA))
	// The CRD's update (its watch event) brings a sync: the serving certificate, due
	// and signable by a CA made more than the delay ago, still waits the delay from now.
	next = f.sync(m)
	require.Empty(t, f.writes(), "the API servers have trusted the new CA for no time at all")
	require.Equal(t, served.Certificate, m.Certificate().Certificate)
	require.Equal(t, published.Add(DefaultCAPropagation), next)

	f.clock.SetTime(next)
	f.sync(m)
	require.Equal(t, []string{"update secrets"}, f.writes())
	require.NoError(t, m.Certificate().Leaf.CheckSignatureFrom(newCA))
	f.verifiesWithCABundle(m)
}

// TestARestartedReplicaRenewsAtOnce: a replica that starts when the CA has long been in
// the caBundle does not wait the propagation delay to renew a due certificate.
func TestARestartedReplicaRenewsAtOnce(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	first := f.replica(true)
	f.sync(first)
	f.writes()
	f.clock.SetTime(renewAt(first.Certificate().Leaf))
	restarted := f.replica(true)
	f.sync(restarted)
	require.Equal(t, []string{"update secrets"}, f.writes())
	f.verifiesWithCABundle(restarted)
}

func TestCABundleOnlyForAWebhookConvertedCRD(t *testing.T) {
	t.Run("strategy None", func(t *testing.T) {
		f := newFixture(t, webhookCRD(apiextensionsv1.NoneConverter))
		m := f.replica(true)
		f.sync(m)
		require.Equal(t, []string{"create secrets"}, f.writes())
		require.NotNil(t, m.Certificate())
	})
	t.Run("no CRD, then the CRD", func(t *testing.T) {
		f := newFixture(t, nil)
		m := f.replica(true)
		f.sync(m)
		require.Equal(t, []string{"create secrets"}, f.writes())
		require.NoError(t, f.ext.Tracker().Add(webhookCRD(apiextensionsv1.WebhookConverter)))
		f.sync(m)
		require.Equal(t, []string{"patch customresourcedefinitions/" + CRDName}, f.writes())
		f.verifiesWithCABundle(m)
	})
}

// TestCABundleRestored: applying the CRD's manifest again can empty its caBundle; the
// next sync sets it again.
func TestCABundleRestored(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	m := f.replica(true)
	f.sync(m)
	crd := f.crd().DeepCopy()
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = nil
	crd.ResourceVersion = "2000"
	require.NoError(t, f.ext.Tracker().Update(crdsGVR, crd, ""))
	f.writes()
	f.sync(m)
	require.Equal(t, []string{"patch customresourcedefinitions/" + CRDName}, f.writes())
	f.verifiesWithCABundle(m)
}

// TestCABundlePatchOfAStaleCRDFails: the patch is guarded by the resourceVersion read,
// so a stale cache cannot undo a change made since.
func TestCABundlePatchOfAStaleCRDFails(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	m := f.replica(false)
	require.NoError(t, m.crdInformer.GetIndexer().Add(f.crd()))
	switched := f.crd().DeepCopy()
	switched.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	switched.ResourceVersion = "2000"
	require.NoError(t, f.ext.Tracker().Update(crdsGVR, switched, ""))
	_, err := m.sync(f.ctx)
	require.ErrorContains(t, err, "setting the conversion webhook's caBundle of CRD "+CRDName)
	require.Equal(t, apiextensionsv1.NoneConverter, f.crd().Spec.Conversion.Strategy)
	require.Nil(t, f.crd().Spec.Conversion.Webhook)
}

func TestASecretOfAnotherTypeIsReported(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	require.NoError(t, f.kube.Tracker().Add(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: testSecret, Namespace: testNamespace, ResourceVersion: "5"},
		Type:       corev1.SecretTypeOpaque,
	}))
	m := f.replica(true)
	f.waitCached(m)
	_, err := m.sync(f.ctx)
	require.ErrorContains(t, err, `Secret system/webhook-cert is of type "Opaque", not "kubernetes.io/tls": delete it`)
	require.Empty(t, f.writes())
	require.Nil(t, m.Certificate())
}

// TestRunKeepsTheCABundle runs the CertManager as the controller will: it creates the
// Secret, sets the caBundle, and, on the CRD's watch event, sets it again after an
// apply emptied it.
func TestRunKeepsTheCABundle(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	m := f.replica(false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(f.ctx)
	}()
	bundleSet := func(context.Context) (bool, error) {
		bundle, _ := webhookCABundle(f.crd())
		return len(bundle) > 0 && m.Certificate() != nil, nil
	}
	require.NoError(t, wait.PollUntilContextTimeout(f.ctx, 5*time.Millisecond, 10*time.Second, true, bundleSet))
	f.verifiesWithCABundle(m)

	crd := f.crd().DeepCopy()
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = nil
	crd.ResourceVersion = "3000"
	require.NoError(t, f.ext.Tracker().Update(crdsGVR, crd, ""))
	require.NoError(t, wait.PollUntilContextTimeout(f.ctx, 5*time.Millisecond, 10*time.Second, true, bundleSet))
	f.verifiesWithCABundle(m)
}

func TestNewCertManagerChecksItsConfig(t *testing.T) {
	tests := map[string]struct {
		cfg  CertConfig
		want string
	}{
		"no namespace":     {CertConfig{ServiceName: "webhook"}, "the Secret's namespace is required"},
		"no host":          {CertConfig{Namespace: "ns"}, "a Service name or an extra host is required"},
		"bad Service name": {CertConfig{Namespace: "ns", ServiceName: "Web_hook"}, `Service name "Web_hook"`},
		"bad extra host":   {CertConfig{Namespace: "ns", ExtraHosts: []string{"a b"}}, `host "a b" is neither an IP address nor a DNS name`},
		"CA too short": {CertConfig{Namespace: "ns", ServiceName: "webhook", CAValidity: 200 * 24 * time.Hour},
			"webhook certificates: the serving certificate validity (2160h0m0s) must be at most a third of the CA validity (4800h0m0s)"},
		"propagation too long": {CertConfig{Namespace: "ns", ServiceName: "webhook", ServingValidity: 24 * time.Hour, CAPropagation: 12 * time.Hour},
			"the CA propagation delay (12h0m0s) must be at most a third of the serving certificate validity (24h0m0s)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := NewCertManager(tc.cfg, k8sfake.NewClientset(), apiextensionsfake.NewClientset())
			require.ErrorContains(t, err, tc.want)
		})
	}
	m, err := NewCertManager(CertConfig{Namespace: "ns", ExtraHosts: []string{"localhost", "127.0.0.1", "::1"}}, k8sfake.NewClientset(), apiextensionsfake.NewClientset())
	require.NoError(t, err)
	require.Equal(t, []string{"localhost", "127.0.0.1", "::1"}, m.policy.hosts)
	require.Equal(t, DefaultSecretName, m.cfg.SecretName)
	require.Equal(t, certPolicy{hosts: m.policy.hosts, caValidity: DefaultCAValidity, servingValidity: DefaultServingValidity, caPropagation: DefaultCAPropagation}, m.policy)
	m, err = NewCertManager(CertConfig{Namespace: "ns", ExtraHosts: []string{"localhost"}, CAValidity: time.Minute, ServingValidity: 20 * time.Second, CAPropagation: 3 * time.Second},
		k8sfake.NewClientset(), apiextensionsfake.NewClientset())
	require.NoError(t, err)
	require.Equal(t, certPolicy{hosts: []string{"localhost"}, caValidity: time.Minute, servingValidity: 20 * time.Second, caPropagation: 3 * time.Second}, m.policy)
}

func TestCheckTimes(t *testing.T) {
	good := []struct{ ca, serving, propagation time.Duration }{
		{0, 0, 0},
		{DefaultCAValidity, DefaultServingValidity, DefaultCAPropagation},
		{time.Minute, 20 * time.Second, 3 * time.Second},
		// At the limits: a third of the CA, a third of the serving certificate.
		{30 * time.Second, MinServingValidity, MinServingValidity / 3},
		// Only the serving validity given: the default CA (3 years) and propagation (1 h).
		{0, 3 * time.Hour, 0},
	}
	for _, tc := range good {
		require.NoError(t, CheckTimes(tc.ca, tc.serving, tc.propagation), "%v", tc)
	}
	bad := map[string]struct {
		ca, serving, propagation time.Duration
		want                     []string
	}{
		"negative": {-time.Second, time.Hour, -time.Second, []string{
			"the CA validity must not be negative, got -1s", "the CA propagation delay must not be negative, got -1s"}},
		"serving below the minimum": {time.Minute, 9 * time.Second, time.Second, []string{
			"the serving certificate validity (9s) must be at least 10s"}},
		"serving above a third of the CA": {time.Minute, 21 * time.Second, 3 * time.Second, []string{
			"the serving certificate validity (21s) must be at most a third of the CA validity (1m0s)"}},
		"the default serving validity with a short CA": {24 * time.Hour, 0, time.Minute, []string{
			"the serving certificate validity (2160h0m0s) must be at most a third of the CA validity (24h0m0s)"}},
		"propagation above a third of the serving validity": {time.Minute, 20 * time.Second, 7 * time.Second, []string{
			"the CA propagation delay (7s) must be at most a third of the serving certificate validity (20s)"}},
		"the default propagation with a short serving validity": {time.Hour, time.Minute, 0, []string{
			"the CA propagation delay (1h0m0s) must be at most a third of the serving certificate validity (1m0s)"}},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			err := CheckTimes(tc.ca, tc.serving, tc.propagation)
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}
