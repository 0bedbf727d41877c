package webhook

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// clockSkew backdates every certificate's NotBefore, so that an API server whose clock
// is a little behind accepts a certificate made a moment ago.
const clockSkew = 5 * time.Minute

// backdate is how long before it is made a certificate valid for validity starts:
// clockSkew, or a tenth of the validity when that is shorter. Renewal is due at two
// thirds of the span from NotBefore to NotAfter, so a certificate of a few minutes or
// seconds (the renewal test) backdated by the whole clockSkew would be due as it is
// made, and made again at every sync.
func backdate(validity time.Duration) time.Duration {
	return min(clockSkew, validity/10)
}

// madeAt is when newCA made ca: its NotBefore plus the backdate, which its span
// (validity plus backdate) tells.
func madeAt(ca *x509.Certificate) time.Time {
	return ca.NotBefore.Add(min(clockSkew, ca.NotAfter.Sub(ca.NotBefore)/11))
}

// keyPair is a certificate with its private key, parsed and in PEM.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// renewAt is when a certificate is due for renewal: at two thirds of its life.
func renewAt(c *x509.Certificate) time.Time {
	return c.NotBefore.Add(c.NotAfter.Sub(c.NotBefore) * 2 / 3)
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding a key: %w", err)
	}
	return key, keyPEM, nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return serial, nil
}

// newCA makes a self-signed CA valid from now (less its backdate) for validity. Its common
// name carries the time, so that an old and a new CA in one bundle are told apart.
func newCA(now time.Time, validity time.Duration) (*keyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("llama-stack-controller-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-backdate(validity)).UTC(),
		NotAfter:              now.Add(validity).UTC(),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, tmpl, key, key, keyPEM)
}

// newServingCert makes a serving certificate for hosts (DNS names and IP addresses),
// signed by ca, valid for validity but never past the CA.
func newServingCert(ca *keyPair, now time.Time, validity time.Duration, hosts []string) (*keyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	notBefore := now.Add(-backdate(validity))
	if notBefore.Before(ca.cert.NotBefore) {
		notBefore = ca.cert.NotBefore
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    notBefore.UTC(),
		NotAfter:     notAfter.UTC(),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return sign(tmpl, ca.cert, key, ca.key, keyPEM)
}

func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, signer crypto.Signer, keyPEM []byte) (*keyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return &keyPair{cert: cert, key: key, keyPEM: keyPEM, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// parseCertificates reads every CERTIFICATE block of data; other blocks are an error.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a %s block where certificates were expected", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing a certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(bytes.TrimSpace(data)) > 0 {
		return nil, errors.New("data after the last certificate")
	}
	return out, nil
}

// encodeCertificates writes certificates as PEM, in order.
func encodeCertificates(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

// parseKeyPair reads a certificate (the first block) and its private key.
func parseKeyPair(certPEM, keyPEM []byte) (*keyPair, error) {
	certs, err := parseCertificates(certPEM)
	if err != nil {
		return nil, err
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate")
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing the private key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a private key of type %T cannot sign", key)
	}
	if !publicKeysEqual(certs[0].PublicKey, signer.Public()) {
		return nil, errors.New("the private key does not match the certificate")
	}
	return &keyPair{cert: certs[0], key: signer, certPEM: certPEM, keyPEM: keyPEM}, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// hostsOf lists what a serving certificate is valid for: its DNS names, then its IP
// addresses, as newServingCert writes them from hosts.
func hostsOf(c *x509.Certificate) []string {
	out := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}

// issuedBy reports whether c is signed by one of cas, and which.
func issuedBy(c *x509.Certificate, cas []*x509.Certificate) *x509.Certificate {
	for _, ca := range cas {
		if c.CheckSignatureFrom(ca) == nil {
			return ca
		}
	}
	return nil
}
