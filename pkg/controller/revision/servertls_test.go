package revision

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/testcert"
)

// tlsSecret is the kubernetes.io/tls Secret demo/serving of s, with its ca.crt.
func tlsSecret(s testcert.Serving) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "serving", Namespace: "demo", UID: "secret-uid", ResourceVersion: "1"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: s.Cert, corev1.TLSPrivateKeyKey: s.Key, SecretCAKey: s.CA},
	}
}

func TestCheckTLSSecret(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	dns := "app-service.demo.svc"
	valid := func() testcert.Serving {
		return testcert.NewServingValid(t, now.AddDate(0, -1, 0), now.AddDate(0, 2, 0), dns)
	}
	good, other := valid(), valid()
	expired := testcert.NewServingValid(t, time.Date(2020, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2021, 3, 1, 0, 0, 0, 0, time.UTC), dns)
	future := testcert.NewServingValid(t, now.AddDate(0, 0, 3), now.AddDate(1, 0, 0), dns)
	soon := testcert.NewServingValid(t, now.AddDate(0, -2, 0), now.AddDate(0, 0, 10), dns)
	endsNow := testcert.NewServingValid(t, now.AddDate(0, -2, 0), now, dns)
	tests := map[string]struct {
		serving testcert.Serving
		edit    func(*corev1.Secret)
		// problem are parts of the problem's message; none: no problem.
		problem []string
		// ca is what TLS.CA must be; nil: the ca.crt of serving.
		ca []byte
	}{
		"a certificate and its key":     {serving: good},
		"without ca.crt":                {serving: good, edit: func(s *corev1.Secret) { delete(s.Data, SecretCAKey) }, ca: []byte{}},
		"an empty ca.crt":               {serving: good, edit: func(s *corev1.Secret) { s.Data[SecretCAKey] = []byte("\n") }, ca: []byte{}},
		"no tls.key":                    {serving: good, edit: func(s *corev1.Secret) { delete(s.Data, corev1.TLSPrivateKeyKey) }, problem: []string{"has no tls.key"}},
		"no tls.crt":                    {serving: good, edit: func(s *corev1.Secret) { s.Data[corev1.TLSCertKey] = nil }, problem: []string{"has no tls.crt"}},
		"a certificate that is not PEM": {serving: good, edit: func(s *corev1.Secret) { s.Data[corev1.TLSCertKey] = []byte("hello") }, problem: []string{"could not load tls.crt and tls.key"}},
		"a key of another certificate": {
			serving: good, edit: func(s *corev1.Secret) { s.Data[corev1.TLSPrivateKeyKey] = other.Key },
			problem: []string{"tls.key is not the key of the certificate in tls.crt", "renew the certificate"},
		},
		"an expired certificate": {
			serving: expired,
			problem: []string{"expired on 2021-03-01T00:00:00Z", "valid from 2020-03-01T00:00:00Z to 2021-03-01T00:00:00Z", "renew the certificate"},
		},
		"a certificate not valid yet": {
			serving: future,
			problem: []string{"not valid before 2026-06-04T12:00:00Z", "to 2027-06-01T12:00:00Z", "renew the certificate"},
		},
		// The controller warns of it (resolveServerTLS); the server serves it.
		"a certificate that expires in ten days": {serving: soon},
		"a certificate on its last second":       {serving: endsNow},
		"a ca.crt of garbage": {
			serving: good, edit: func(s *corev1.Secret) { s.Data[SecretCAKey] = []byte("garbage") },
			problem: []string{"ca.crt is not PEM certificates", "holds no PEM certificate"},
		},
		"a ca.crt of a key": {
			serving: good, edit: func(s *corev1.Secret) { s.Data[SecretCAKey] = good.Key },
			problem: []string{"ca.crt is not PEM certificates"},
		},
		"a ca.crt whose certificate does not parse": {
			serving: good, edit: func(s *corev1.Secret) { s.Data[SecretCAKey] = []byte(testcert.PEMBlock("CERTIFICATE", []byte("nope"))) },
			problem: []string{"ca.crt is not PEM certificates", "certificate 1 does not parse"},
		},
		// Only the certificates are passed on, never the key or the text around them.
		"a ca.crt with a comment and a key beside its certificates": {
			serving: good, edit: func(s *corev1.Secret) {
				s.Data[SecretCAKey] = []byte("# the CA\n" + string(good.CA) + string(good.Key) + string(other.CA))
			},
			ca: []byte(string(good.CA) + string(other.CA)),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := tlsSecret(tc.serving)
			if tc.edit != nil {
				tc.edit(s)
			}
			got, problem := CheckTLSSecret(s, now)
			if len(tc.problem) > 0 {
				require.NotNil(t, problem)
				assert.Equal(t, v1alpha2.ReasonTLSSecretInvalid, problem.Reason)
				for _, part := range append(tc.problem, "spec.networking.tls.secretName: Secret demo/serving", "what runs is kept") {
					assert.Contains(t, problem.Message, part)
				}
				assert.Empty(t, got.Hash, "nothing to roll out")
				return
			}
			require.Nil(t, problem, "%v", problem)
			assert.Len(t, got.Hash, 32)
			want := tc.ca
			if want == nil {
				want = tc.serving.CA
			}
			assert.Equal(t, string(want), string(got.CA))
			assert.False(t, got.NotAfter.IsZero())
		})
	}
	a, _ := CheckTLSSecret(tlsSecret(good), now)
	b, _ := CheckTLSSecret(tlsSecret(other), now)
	assert.NotEqual(t, a.Hash, b.Hash, "another certificate, another hash")
}

func TestCertificateDue(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	invalid := &fault.Problem{Reason: v1alpha2.ReasonTLSSecretInvalid}
	tests := map[string]struct {
		tls     TLS
		problem *fault.Problem
		want    time.Time
	}{
		"valid for long: when its last weeks start": {
			tls: TLS{NotBefore: now.Add(-day), NotAfter: now.Add(60 * day)}, want: now.Add(60*day - TLSExpiryWarning),
		},
		"in its last weeks: when it expires": {
			tls: TLS{NotBefore: now.Add(-day), NotAfter: now.Add(3 * day)}, want: now.Add(3*day + time.Second),
		},
		"not valid yet: when it becomes valid": {
			tls: TLS{NotBefore: now.Add(day), NotAfter: now.Add(90 * day)}, problem: invalid, want: now.Add(day),
		},
		// No busy loop: nothing comes with time.
		"expired: never":                    {tls: TLS{NotBefore: now.Add(-90 * day), NotAfter: now.Add(-day)}, problem: invalid},
		"a problem dates do not end: never": {tls: TLS{NotBefore: now.Add(-day), NotAfter: now.Add(90 * day)}, problem: invalid},
		"no certificate read: never":        {problem: invalid},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := certificateDue(tc.tls, tc.problem, now)
			assert.Equal(t, tc.want, got)
			if !got.IsZero() {
				assert.True(t, got.After(now), "always after now")
			}
		})
	}
}

// tlsResolver is a Resolver of the server's TLS only, over a fake clientset holding
// secrets, whose Secret cache holds what versions says, at the time *now.
type tlsResolver struct {
	*Resolver
	client   *fake.Clientset
	versions map[string]string
	now      time.Time
	rechecks []time.Duration
	recorder *record.FakeRecorder
}

func newTLSResolver(t *testing.T, now time.Time, secrets ...*corev1.Secret) *tlsResolver {
	r := &tlsResolver{client: fake.NewClientset(), versions: map[string]string{}, now: now, recorder: record.NewFakeRecorder(100)}
	for _, s := range secrets {
		r.put(t, s)
	}
	r.Resolver = &Resolver{
		Client:        r.client,
		SecretVersion: func(ns, name string) string { return r.versions[ns+"/"+name] },
		RecheckAfter:  func(_ cache.ObjectName, d time.Duration) { r.rechecks = append(r.rechecks, d) },
		Now:           func() time.Time { return r.now },
		Recorder:      r.recorder,
	}
	return r
}

// put creates or replaces a Secret, in the API and in the cache.
func (r *tlsResolver) put(t *testing.T, s *corev1.Secret) {
	_ = r.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("secrets"), s.Namespace, s.Name)
	require.NoError(t, r.client.Tracker().Add(s))
	r.versions[s.Namespace+"/"+s.Name] = SecretVersion(s)
}

// resolve resolves the TLS of a CR with TLS from demo/serving, and returns the reads
// of Secrets it sent.
func (r *tlsResolver) resolve(t *testing.T) (*TLS, *fault.Problem, int) {
	r.client.ClearActions()
	l := &v1alpha2.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "demo", UID: "app-uid", Generation: 1},
		Spec:       v1alpha2.LlamaStackDistributionSpec{Networking: &v1alpha2.NetworkingSpec{TLS: &v1alpha2.TLSSpec{Enabled: true, SecretName: "serving"}}},
	}
	got, problem, err := r.resolveServerTLS(context.Background(), l)
	require.NoError(t, err)
	return got, problem, len(r.client.Actions())
}

func (r *tlsResolver) events() []string {
	var out []string
	for len(r.recorder.Events) > 0 {
		out = append(out, <-r.recorder.Events)
	}
	return out
}

// The Secret is read again only when the cache holds another version of it, or when a
// date of its certificate comes; an expiring certificate is told once.
func TestResolveServerTLS(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	dns := "app-service.demo.svc"
	first := tlsSecret(testcert.NewServingValid(t, now.Add(-30*day), now.Add(20*day), dns))
	r := newTLSResolver(t, now, first)

	got, problem, reads := r.resolve(t)
	require.Nil(t, problem)
	assert.Equal(t, 1, reads)
	assert.Equal(t, []time.Duration{6 * day}, r.rechecks, "back when its last two weeks start")
	_, _, reads = r.resolve(t)
	assert.Zero(t, reads, "the same version: not read again")
	assert.Empty(t, r.events())

	// Its last two weeks: read again, warned once.
	r.now = now.Add(6 * day)
	_, problem, reads = r.resolve(t)
	require.Nil(t, problem, "still served")
	assert.Equal(t, 1, reads)
	assert.Equal(t, 14*day+time.Second, r.rechecks[len(r.rechecks)-1], "back when it expires")
	events := r.events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "Warning TLSCertificateExpiring")
	assert.Contains(t, events[0], "Secret demo/serving expires on 2026-06-21T12:00:00Z")
	for range 3 {
		r.now = r.now.Add(time.Hour)
		_, _, reads = r.resolve(t)
		assert.Zero(t, reads)
	}
	// A read of the same certificate (another resourceVersion, a label changed) warns no more.
	relabelled := first.DeepCopy()
	relabelled.ResourceVersion = "2"
	r.put(t, relabelled)
	_, _, reads = r.resolve(t)
	assert.Equal(t, 1, reads)
	assert.Empty(t, r.events(), "one Event per certificate")

	// It expires: the recheck flips it, and no other recheck follows.
	r.now = now.Add(20*day + time.Second)
	rechecks := len(r.rechecks)
	_, problem, reads = r.resolve(t)
	require.NotNil(t, problem)
	assert.Equal(t, 1, reads)
	assert.Equal(t, v1alpha2.ReasonTLSSecretInvalid, problem.Reason)
	assert.Contains(t, problem.Message, "expired on 2026-06-21T12:00:00Z")
	assert.Len(t, r.rechecks, rechecks, "nothing to come back for")
	r.now = r.now.Add(time.Hour)
	_, _, reads = r.resolve(t)
	assert.Zero(t, reads, "not read again until the Secret changes")

	// Renewed: the cache's new version has it read again.
	renewed := tlsSecret(testcert.NewServingValid(t, r.now.Add(-time.Hour), r.now.Add(90*day), dns))
	renewed.ResourceVersion = "3"
	r.put(t, renewed)
	got2, problem, reads := r.resolve(t)
	require.Nil(t, problem)
	assert.Equal(t, 1, reads)
	assert.NotEqual(t, got.Hash, got2.Hash)

	// Deleted: read again, not found, and not read again while the cache has none.
	require.NoError(t, r.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("secrets"), "demo", "serving"))
	delete(r.versions, "demo/serving")
	_, problem, reads = r.resolve(t)
	require.NotNil(t, problem)
	assert.Equal(t, 1, reads)
	assert.Equal(t, v1alpha2.ReasonTLSSecretNotFound, problem.Reason)
	_, _, reads = r.resolve(t)
	assert.Zero(t, reads)
	assert.True(t, strings.Contains(problem.Message, "Secret demo/serving was not found"))
}
