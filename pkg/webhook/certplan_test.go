package webhook

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	testHosts  = []string{"webhook.system.svc", "webhook.system.svc.cluster.local", "localhost", "127.0.0.1"}
	testPolicy = certPolicy{
		hosts:           testHosts,
		caValidity:      360 * 24 * time.Hour,
		servingValidity: 30 * 24 * time.Hour,
		caPropagation:   time.Hour,
	}
	testStart                   = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	alwaysPublished publication = func(*x509.Certificate) (time.Time, bool) { return time.Time{}, true }
)

func mustPlan(t *testing.T, data map[string][]byte, now time.Time, p certPolicy, published publication) *certPlan {
	t.Helper()
	plan, err := planCertificates(data, now, p, published)
	require.NoError(t, err)
	return plan
}

func bundleOf(t *testing.T, plan *certPlan) []*x509.Certificate {
	t.Helper()
	cas, err := parseCertificates(plan.data[keyCABundle])
	require.NoError(t, err)
	return cas
}

// verifyServing checks the plan's serving certificate as the API server would, with
// the plan's bundle as roots, for each host, at now.
func verifyServing(t *testing.T, plan *certPlan, now time.Time) {
	t.Helper()
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(plan.caBundle))
	leaf, err := x509.ParseCertificate(plan.serving.Certificate[0])
	require.NoError(t, err)
	for _, h := range testHosts {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: h, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		require.NoError(t, err, "host %s at %s", h, now)
	}
}

func TestPlanMakesCertificatesThenKeepsThem(t *testing.T) {
	plan := mustPlan(t, nil, testStart, testPolicy, alwaysPublished)
	require.True(t, plan.changed)
	require.ElementsMatch(t, []string{"no valid CA", "no serving certificate"}, plan.reasons)
	require.Len(t, bundleOf(t, plan), 1)
	verifyServing(t, plan, testStart)
	leaf, err := x509.ParseCertificate(plan.serving.Certificate[0])
	require.NoError(t, err)
	require.Equal(t, testStart.Add(30*24*time.Hour), leaf.NotAfter)
	require.Equal(t, renewAt(leaf), plan.next, "the next look is the serving certificate's renewal")
	require.Equal(t, testStart.Add(-clockSkew+(30*24*time.Hour+clockSkew)*2/3), plan.next)

	again := mustPlan(t, plan.data, plan.next.Add(-time.Second), testPolicy, alwaysPublished)
	require.False(t, again.changed, "%v", again.reasons)
	require.Equal(t, plan.data, again.data)
	require.Equal(t, plan.next, again.next)
}

func TestPlanRenewsTheServingCertificateWithTheSameCA(t *testing.T) {
	first := mustPlan(t, nil, testStart, testPolicy, alwaysPublished)
	renewed := mustPlan(t, first.data, first.next, testPolicy, alwaysPublished)
	require.True(t, renewed.changed)
	require.Len(t, renewed.reasons, 1)
	require.Contains(t, renewed.reasons[0], "the serving certificate is due for renewal")
	require.Equal(t, first.data[keyCABundle], renewed.data[keyCABundle])
	require.Equal(t, first.data[keyCAKey], renewed.data[keyCAKey])
	require.NotEqual(t, first.data[keyTLSCert], renewed.data[keyTLSCert])
	require.NotEqual(t, first.data[keyTLSKey], renewed.data[keyTLSKey], "a renewal makes a new key")
	verifyServing(t, renewed, first.next)
}

// TestPlanRenewsWithTheSameCAAtOnce: a serving certificate renewed by the CA that
// signed it does not wait for that CA's publication: the API servers trust the new
// certificate exactly as they trusted the old.
func TestPlanRenewsWithTheSameCAAtOnce(t *testing.T) {
	first := mustPlan(t, nil, testStart, testPolicy, alwaysPublished)
	for name, published := range map[string]publication{
		"published a moment ago": func(*x509.Certificate) (time.Time, bool) { return first.next, true },
		"not published":          func(*x509.Certificate) (time.Time, bool) { return time.Time{}, false },
	} {
		renewed := mustPlan(t, first.data, first.next, testPolicy, published)
		require.True(t, renewed.changed, name)
		require.Equal(t, first.data[keyCABundle], renewed.data[keyCABundle], name)
		require.NotEqual(t, first.data[keyTLSCert], renewed.data[keyTLSCert], name)
	}
}

func TestPlanRepairs(t *testing.T) {
	good := mustPlan(t, nil, testStart, testPolicy, alwaysPublished).data
	with := func(edit func(d map[string][]byte)) map[string][]byte {
		d := map[string][]byte{}
		for k, v := range good {
			d[k] = v
		}
		edit(d)
		return d
	}
	other := mustPlan(t, nil, testStart, testPolicy, alwaysPublished).data
	tests := map[string]struct {
		data        map[string][]byte
		policy      certPolicy
		wantReasons []string
		keepsCA     bool
		keepsTLS    bool
	}{
		"garbage everywhere": {
			data:        map[string][]byte{keyCABundle: []byte("x"), keyCAKey: []byte("y"), keyTLSCert: []byte("z"), keyTLSKey: []byte("w")},
			wantReasons: []string{"the CA bundle does not parse: data after the last certificate", "no valid CA", "the serving certificate does not load: data after the last certificate"},
		},
		"a key in the bundle": {
			data:        with(func(d map[string][]byte) { d[keyCABundle] = d[keyCAKey] }),
			wantReasons: []string{"the CA bundle does not parse: a EC PRIVATE KEY block where certificates were expected", "no valid CA", "no CA of the bundle signed the serving certificate"},
		},
		"the CA key lost": {
			data:        with(func(d map[string][]byte) { delete(d, keyCAKey) }),
			wantReasons: []string{"no key for the newest CA"},
			keepsTLS:    true,
		},
		"the serving key of another certificate": {
			data:        with(func(d map[string][]byte) { d[keyTLSKey] = other[keyTLSKey] }),
			wantReasons: []string{"the serving certificate does not load: the private key does not match the certificate"},
			keepsCA:     true,
		},
		"a serving certificate of another CA": {
			data:        with(func(d map[string][]byte) { d[keyTLSCert], d[keyTLSKey] = other[keyTLSCert], other[keyTLSKey] }),
			wantReasons: []string{"no CA of the bundle signed the serving certificate"},
			keepsCA:     true,
		},
		"other hosts": {
			data:   good,
			policy: certPolicy{hosts: []string{"webhook.other.svc", "webhook.other.svc.cluster.local"}, caValidity: testPolicy.caValidity, servingValidity: testPolicy.servingValidity},
			wantReasons: []string{"the serving certificate is for webhook.system.svc, webhook.system.svc.cluster.local, localhost, 127.0.0.1, " +
				"not webhook.other.svc, webhook.other.svc.cluster.local"},
			keepsCA: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := tc.policy
			if p.hosts == nil {
				p = testPolicy
			}
			plan := mustPlan(t, tc.data, testStart.Add(time.Minute), p, alwaysPublished)
			require.True(t, plan.changed)
			require.Equal(t, tc.wantReasons, plan.reasons)
			require.Equal(t, tc.keepsTLS, string(plan.data[keyTLSCert]) == string(good[keyTLSCert]), "serving certificate kept")
			require.Equal(t, tc.keepsCA, string(plan.data[keyCABundle]) == string(good[keyCABundle]), "CA bundle kept")
			if name == "the CA key lost" {
				cas := bundleOf(t, plan)
				require.Len(t, cas, 2, "the new CA and the one whose key was lost, which signed the serving certificate")
				require.Equal(t, string(encodeCertificates(cas[1:])), string(good[keyCABundle]))
			}
			leaf, err := x509.ParseCertificate(plan.serving.Certificate[0])
			require.NoError(t, err)
			require.ElementsMatch(t, p.hosts, hostsOf(leaf))
			again := mustPlan(t, plan.data, testStart.Add(2*time.Minute), p, alwaysPublished)
			require.False(t, again.changed, "a repaired Secret is kept: %v", again.reasons)
		})
	}
}

// shortPolicy is the timing of the renewal test under load (test/e2e): certificates
// that live for seconds, far shorter than the backdating of a certificate's start for
// clock skew.
var shortPolicy = certPolicy{
	hosts:           testHosts,
	caValidity:      70 * time.Second,
	servingValidity: 20 * time.Second,
	caPropagation:   6 * time.Second,
}

// TestPlanRotatesTheCAWithoutABreak follows the Secret through three CA lifetimes, from
// one due date to the next, as the sync would, with the CRD's caBundle following the
// Secret after a delay. At every step the serving certificate verifies against the
// caBundle the API servers have, the bundle holds at most two CAs and no expired one,
// and a serving certificate is signed by a CA only once that CA has been in the
// published bundle for the propagation delay. With lifetimes of days and of seconds.
func TestPlanRotatesTheCAWithoutABreak(t *testing.T) {
	for name, tc := range map[string]struct {
		policy certPolicy
		// apiServerLag is how long the CRD's caBundle takes to reach the API servers:
		// less than the policy's propagation delay.
		apiServerLag time.Duration
	}{
		"days":    {testPolicy, 10 * time.Minute},
		"seconds": {shortPolicy, time.Second},
	} {
		t.Run(name, func(t *testing.T) { followRotations(t, tc.policy, tc.apiServerLag) })
	}
}

func followRotations(t *testing.T, policy certPolicy, apiServerLag time.Duration) {
	now := testStart
	var data map[string][]byte
	// publishedAt is when each CA (by subject) reached the API servers' caBundle.
	publishedAt := map[string]time.Time{}
	published := func(ca *x509.Certificate) (time.Time, bool) {
		at, ok := publishedAt[ca.Subject.CommonName]
		if !ok || now.Before(at) {
			return time.Time{}, false
		}
		return at, true
	}
	var apiServerBundle []byte
	cas, servingIssuers := map[string]bool{}, map[string]bool{}
	servings := 0
	for step := 0; now.Before(testStart.Add(3 * policy.caValidity)); step++ {
		require.Less(t, step, 200, "too many steps: the plan does not settle")
		plan := mustPlan(t, data, now, policy, published)
		if step > 0 && string(plan.data[keyTLSCert]) != string(data[keyTLSCert]) {
			servings++
		}
		data = plan.data
		bundle := bundleOf(t, plan)
		require.LessOrEqual(t, len(bundle), 2)
		for _, ca := range bundle {
			require.True(t, now.Before(ca.NotAfter), "an expired CA in the bundle")
			cas[ca.Subject.CommonName] = true
			if _, ok := publishedAt[ca.Subject.CommonName]; !ok {
				publishedAt[ca.Subject.CommonName] = now.Add(apiServerLag)
				require.WithinDuration(t, now, madeAt(ca), time.Second, "when the CA was made, as its validity tells")
			}
		}
		leaf, err := x509.ParseCertificate(plan.serving.Certificate[0])
		require.NoError(t, err)
		issuer := issuedBy(leaf, bundle)
		require.NotNil(t, issuer)
		servingIssuers[issuer.Subject.CommonName] = true
		if step > 0 && plan.changed {
			// The API servers still have the bundle of before: a new serving
			// certificate must verify with it.
			roots := x509.NewCertPool()
			require.True(t, roots.AppendCertsFromPEM(apiServerBundle))
			_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: testHosts[0], CurrentTime: now})
			require.NoError(t, err, "step %d at %s: %v", step, now, plan.reasons)
		}
		verifyServing(t, plan, now)
		apiServerBundle = plan.caBundle
		require.True(t, plan.next.After(now), "step %d: next %s is not after %s (%v)", step, plan.next, now, plan.reasons)
		now = plan.next
		// Where the plan waits for a CA to be published, it is published by then.
		if now.Before(publishedAt[bundle[0].Subject.CommonName]) {
			now = publishedAt[bundle[0].Subject.CommonName]
		}
	}
	require.GreaterOrEqual(t, len(cas), 4, "the CA was rotated at two thirds of each life")
	require.Equal(t, len(cas), len(servingIssuers), "every CA signed serving certificates")
	// Renewed at two thirds of its life (a little later when it waits for a new CA): about
	// one and a half times per serving validity, 4.5 times per serving validity in a CA's
	// life over three of them.
	perCA := int(policy.caValidity / policy.servingValidity)
	require.GreaterOrEqual(t, servings, 3*perCA*3/2*2/3, "serving certificates renewed")
	require.LessOrEqual(t, servings, 3*perCA*3/2+3, "serving certificates renewed no more often than due")
}

// TestPlanKeepsShortLivedCertificates: certificates valid for seconds are not due the
// moment they are made. Every certificate starts a little before it is made, for API
// servers whose clocks are behind; were that five minutes whatever the validity, a
// 20 s serving certificate would be past two thirds of its life at once, and each plan
// would make a new one.
func TestPlanKeepsShortLivedCertificates(t *testing.T) {
	plan := mustPlan(t, nil, testStart, shortPolicy, alwaysPublished)
	require.True(t, plan.changed)
	verifyServing(t, plan, testStart)
	ca := bundleOf(t, plan)[0]
	leaf, err := x509.ParseCertificate(plan.serving.Certificate[0])
	require.NoError(t, err)
	for _, c := range []*x509.Certificate{ca, leaf} {
		require.True(t, renewAt(c).After(testStart.Add(c.NotAfter.Sub(testStart)/2)),
			"%s: valid %s to %s, due at %s: more than half its life from now", c.Subject.CommonName, c.NotBefore, c.NotAfter, renewAt(c))
	}
	require.True(t, plan.next.After(testStart.Add(10*time.Second)), "next look at %s", plan.next)
	again := mustPlan(t, plan.data, testStart.Add(time.Second), shortPolicy, alwaysPublished)
	require.False(t, again.changed, "%v", again.reasons)
	// The wait for a new CA to reach the API servers is measured from when it was made:
	// renew the serving certificate up to the CA's due date, then let the CA fall due.
	p := plan
	for p.next.Before(renewAt(ca)) {
		p = mustPlan(t, p.data, p.next, shortPolicy, alwaysPublished)
	}
	due := mustPlan(t, p.data, renewAt(ca), shortPolicy, alwaysPublished)
	require.Len(t, bundleOf(t, due), 2, "a new CA at two thirds of the old one's life")
	newCA := bundleOf(t, due)[0]
	require.Equal(t, p.data[keyTLSCert], due.data[keyTLSCert], "the serving certificate waits for the new CA to settle")
	last, err := x509.ParseCertificate(p.serving.Certificate[0])
	require.NoError(t, err)
	// With this policy the serving certificate falls due 4.3 s after the new CA is made,
	// and waits for it to be 6 s old.
	settled := renewAt(ca).Add(shortPolicy.caPropagation)
	require.True(t, renewAt(last).After(renewAt(ca)) && renewAt(last).Before(settled), "serving certificate due at %s, CA made at %s, settled at %s",
		renewAt(last), renewAt(ca), settled)
	require.Equal(t, renewAt(last), due.next)
	waiting := mustPlan(t, due.data, due.next, shortPolicy, alwaysPublished)
	require.False(t, waiting.changed, "due, but the new CA has not settled: %v", waiting.reasons)
	require.WithinDuration(t, settled, waiting.next, time.Second, "signed by the new CA once it has been published for the propagation delay")
	renewed := mustPlan(t, waiting.data, waiting.next, shortPolicy, alwaysPublished)
	require.True(t, renewed.changed)
	leaf, err = x509.ParseCertificate(renewed.serving.Certificate[0])
	require.NoError(t, err)
	require.NoError(t, leaf.CheckSignatureFrom(newCA))
}

func TestPlanWaitsForTheNewCAToBePublished(t *testing.T) {
	first := mustPlan(t, nil, testStart, testPolicy, alwaysPublished)
	caDue := renewAt(bundleOf(t, first)[0])
	// The serving certificate renewed just before the CA is due.
	p := first
	for !p.next.After(caDue.Add(-24 * time.Hour)) {
		p = mustPlan(t, p.data, p.next, testPolicy, alwaysPublished)
	}
	p = mustPlan(t, p.data, caDue.Add(-time.Hour), testPolicy, alwaysPublished)
	// The CA falls due: a new one joins the bundle; the serving certificate stays.
	rotated := mustPlan(t, p.data, caDue, testPolicy, alwaysPublished)
	require.True(t, rotated.changed)
	require.Len(t, bundleOf(t, rotated), 2)
	require.Equal(t, p.data[keyTLSCert], rotated.data[keyTLSCert])

	leaf, err := x509.ParseCertificate(rotated.serving.Certificate[0])
	require.NoError(t, err)
	// Due, and past the propagation delay of the new CA.
	servingDue := renewAt(leaf)
	if servingDue.Before(caDue.Add(2 * time.Hour)) {
		servingDue = caDue.Add(2 * time.Hour)
	}
	newCA := bundleOf(t, rotated)[0]
	notPublished := func(ca *x509.Certificate) (time.Time, bool) { return time.Time{}, !ca.Equal(newCA) }
	// Due, but the new CA is not in the CRD yet: the old certificate is kept.
	waiting := mustPlan(t, rotated.data, servingDue.Add(time.Hour), testPolicy, notPublished)
	require.False(t, waiting.changed, "%v", waiting.reasons)
	require.Equal(t, leaf.NotAfter, waiting.next, "no settle time left to wait for: the CRD's update or the expiry wakes it")
	// Published: renewed, signed by the new CA.
	renewed := mustPlan(t, rotated.data, servingDue.Add(time.Hour), testPolicy, alwaysPublished)
	require.True(t, renewed.changed)
	newLeaf, err := x509.ParseCertificate(renewed.serving.Certificate[0])
	require.NoError(t, err)
	require.NoError(t, newLeaf.CheckSignatureFrom(newCA))
	// Had the certificate expired meanwhile, it is renewed even without publication.
	expired := mustPlan(t, rotated.data, leaf.NotAfter, testPolicy, notPublished)
	require.True(t, expired.changed)
}
