package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The Secret's keys. It is of type kubernetes.io/tls, so tls.crt and tls.key are the
// serving certificate; ca.crt is the trust bundle the CRD's caBundle carries (every CA
// not yet expired, newest first) and ca.key the newest CA's key, with which the
// serving certificate is signed.
const (
	keyCABundle = "ca.crt"
	keyCAKey    = "ca.key"
	keyTLSCert  = corev1.TLSCertKey
	keyTLSKey   = corev1.TLSPrivateKeyKey
)

// certPolicy says what certificates to keep.
type certPolicy struct {
	hosts           []string
	caValidity      time.Duration
	servingValidity time.Duration
	// caPropagation is how long a new CA is in the trust bundle before it signs a
	// renewed serving certificate, so that every API server has read the CRD's new
	// caBundle before any replica serves a certificate only the new CA verifies.
	caPropagation time.Duration
}

// certPlan is what the Secret should hold, and when to look again.
type certPlan struct {
	data    map[string][]byte
	changed bool
	// reasons says what changed, for the log.
	reasons []string
	// serving is the serving certificate in data; caBundle is data[keyCABundle].
	serving  *tls.Certificate
	caBundle []byte
	// next is when something falls due: a renewal, a CA to drop, a CA that may sign.
	next time.Time
}

// publication tells whether the API servers are given a CA through the CRD's caBundle,
// and since when: the time this replica first saw it there, or the zero time when that
// is not known (it was there when the replica first looked, or there is nothing to
// publish it in).
type publication func(ca *x509.Certificate) (since time.Time, published bool)

// planCertificates decides the Secret's data from its current data at now: it keeps
// whatever is valid and not yet due, and makes what is missing, invalid or due.
// published tells whether, and since when, a CA is in the CRD's caBundle.
//
// A CA is due at two thirds of its life: a new one is made and put first in the bundle,
// the old one stays in the bundle until it expires, and a serving certificate it signed
// stays valid. The serving certificate is due at two thirds of its life, or at once
// when it is missing, broken, expired, for other hosts, or signed by no CA of the
// bundle; a due certificate is signed by the newest CA, which, when it did not sign
// the certificate it replaces, must be published and have been for caPropagation first
// (a merely due certificate, still valid for a third of its life, waits for that; a
// broken one does not). The wait counts from when the CA was made or, if later, first
// seen in the caBundle: a caBundle set late (an API server refusing the patch for a
// while) still gives the API servers the whole delay. A certificate renewed by the CA
// that signed it waits for nothing: the API servers trust the new one as they trusted
// the old.
func planCertificates(current map[string][]byte, now time.Time, p certPolicy, published publication) (*certPlan, error) {
	plan := &certPlan{data: maps.Clone(current)}
	if plan.data == nil {
		plan.data = map[string][]byte{}
	}
	cas := plan.trustedCAs(current[keyCABundle], now)
	signer, cas, err := plan.signingCA(cas, current[keyCAKey], now, p.caValidity)
	if err != nil {
		return nil, err
	}
	next := []time.Time{renewAt(signer.cert)}
	for _, old := range cas[1:] {
		next = append(next, old.NotAfter)
	}
	serving, servingNext, err := plan.servingCert(current, now, p, published, signer, cas)
	if err != nil {
		return nil, err
	}
	next = append(next, servingNext...)

	plan.caBundle = encodeCertificates(cas)
	plan.set(keyCABundle, plan.caBundle)
	plan.set(keyCAKey, signer.keyPEM)
	plan.set(keyTLSCert, serving.certPEM)
	plan.set(keyTLSKey, serving.keyPEM)
	if !plan.changed {
		plan.reasons = nil
	}
	tlsCert, err := tls.X509KeyPair(serving.certPEM, serving.keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	plan.serving = &tlsCert
	plan.next = slices.MinFunc(next, time.Time.Compare)
	return plan, nil
}

// trustedCAs is the trust bundle of the PEM bundle: the CAs still valid, newest first.
func (plan *certPlan) trustedCAs(bundle []byte, now time.Time) []*x509.Certificate {
	cas, err := parseCertificates(bundle)
	if err != nil {
		plan.reasons = append(plan.reasons, "the CA bundle does not parse: "+err.Error())
		cas = nil
	}
	if n := len(cas); n > 0 {
		cas = slices.DeleteFunc(cas, func(c *x509.Certificate) bool { return !now.Before(c.NotAfter) || !c.IsCA })
		if dropped := n - len(cas); dropped > 0 {
			plan.reasons = append(plan.reasons, fmt.Sprintf("%d expired or non-CA certificate(s) dropped from the bundle", dropped))
		}
	}
	slices.SortStableFunc(cas, func(a, b *x509.Certificate) int { return b.NotBefore.Compare(a.NotBefore) })
	return slices.CompactFunc(cas, func(a, b *x509.Certificate) bool { return a.Equal(b) })
}

// signingCA is the CA that signs: the newest of cas, with its key (keyPEM), and not due;
// else a new one of validity, put first in the bundle it returns.
func (plan *certPlan) signingCA(cas []*x509.Certificate, keyPEM []byte, now time.Time, validity time.Duration) (*keyPair, []*x509.Certificate, error) {
	var signer *keyPair
	if len(cas) > 0 {
		if kp, err := parseKeyPair(encodeCertificates(cas[:1]), keyPEM); err == nil {
			signer = kp
		}
	}
	switch {
	case len(cas) == 0:
		plan.reasons = append(plan.reasons, "no valid CA")
	case signer == nil:
		plan.reasons = append(plan.reasons, "no key for the newest CA")
	case !now.Before(renewAt(signer.cert)):
		plan.reasons = append(plan.reasons, fmt.Sprintf("the CA is due for renewal since %s", renewAt(signer.cert).Format(time.RFC3339)))
		signer = nil
	}
	if signer != nil {
		return signer, cas, nil
	}
	signer, err := newCA(now, validity)
	if err != nil {
		return nil, nil, err
	}
	return signer, append([]*x509.Certificate{signer.cert}, cas...), nil
}

// servingCert is the serving certificate: the current one while it is valid, not due
// and signed by a CA that has reached the API servers; else a new one signed by signer.
// It returns with it the times the plan is to be looked at again for it.
func (plan *certPlan) servingCert(current map[string][]byte, now time.Time, p certPolicy, published publication,
	signer *keyPair, cas []*x509.Certificate) (*keyPair, []time.Time, error) {
	serving, problem := checkServing(current, now, p.hosts, cas)
	unusable := problem != ""
	if problem == "" && !now.Before(renewAt(serving.cert)) {
		problem = fmt.Sprintf("the serving certificate is due for renewal since %s", renewAt(serving.cert).Format(time.RFC3339))
	}
	publishedSince, isPublished := published(signer.cert)
	settled := madeAt(signer.cert)
	if publishedSince.After(settled) {
		settled = publishedSince
	}
	settled = settled.Add(p.caPropagation)
	switch {
	case problem == "":
		return serving, []time.Time{renewAt(serving.cert)}, nil
	case !unusable && serving.cert.CheckSignatureFrom(signer.cert) != nil && (now.Before(settled) || !isPublished):
		// Still valid for a third of its life, and to move to a new CA: wait until the
		// new CA has reached the API servers (the CRD's update, when it is not published
		// yet, triggers a sync of its own).
		next := []time.Time{serving.cert.NotAfter}
		if now.Before(settled) {
			next = append(next, settled)
		}
		return serving, next, nil
	}
	plan.reasons = append(plan.reasons, problem)
	serving, err := newServingCert(signer, now, p.servingValidity, p.hosts)
	if err != nil {
		return nil, nil, err
	}
	return serving, []time.Time{renewAt(serving.cert)}, nil
}

func (p *certPlan) set(key string, value []byte) {
	if !bytes.Equal(p.data[key], value) {
		p.data[key] = value
		p.changed = true
	}
}

// checkServing returns the serving certificate of data if it can be served: it parses,
// matches its key, is valid at now, is for exactly hosts, and a CA of cas signed it.
// Otherwise it says why not.
func checkServing(data map[string][]byte, now time.Time, hosts []string, cas []*x509.Certificate) (*keyPair, string) {
	if len(data[keyTLSCert]) == 0 {
		return nil, "no serving certificate"
	}
	kp, err := parseKeyPair(data[keyTLSCert], data[keyTLSKey])
	switch {
	case err != nil:
		return nil, "the serving certificate does not load: " + err.Error()
	case now.Before(kp.cert.NotBefore) || !now.Before(kp.cert.NotAfter):
		return nil, fmt.Sprintf("the serving certificate is valid only from %s to %s", kp.cert.NotBefore.Format(time.RFC3339), kp.cert.NotAfter.Format(time.RFC3339))
	case !sets.New(hostsOf(kp.cert)...).Equal(sets.New(hosts...)):
		return nil, fmt.Sprintf("the serving certificate is for %s, not %s", strings.Join(hostsOf(kp.cert), ", "), strings.Join(hosts, ", "))
	case issuedBy(kp.cert, cas) == nil:
		return nil, "no CA of the bundle signed the serving certificate"
	}
	return kp, ""
}
