// Package testcert makes PEM certificates for the tests of the controller's packages
// (the CA bundle, the server's TLS).
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// caKey signs every test certificate: one key keeps generating a thousand certificates quick.
var caKey = sync.OnceValues(func() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
})

// CertPEMs returns n distinct self-signed CA certificates (serials 1..n), PEM-encoded.
func CertPEMs(t testing.TB, n int) []string {
	t.Helper()
	key := Key(t)
	out := make([]string, n)
	for i := range out {
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(int64(i + 1)),
			Subject:               pkix.Name{CommonName: fmt.Sprintf("test-ca-%d", i+1)},
			NotBefore:             time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
			NotAfter:              time.Date(2035, 1, 1, 0, 0, 0, 0, time.UTC),
			IsCA:                  true,
			BasicConstraintsValid: true,
			KeyUsage:              x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		require.NoError(t, err)
		out[i] = PEMBlock("CERTIFICATE", der)
	}
	return out
}

// PEMBlock is body PEM-encoded as a block of type typ.
func PEMBlock(typ string, body []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: body}))
}

// Key is the key that signs every test certificate, for a test that makes its own.
func Key(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := caKey()
	require.NoError(t, err)
	return key
}

// Serving is a CA and a serving certificate it signed, with the certificate's key,
// PEM-encoded as a kubernetes.io/tls Secret holds them (ca.crt, tls.crt, tls.key).
type Serving struct {
	CA, Cert, Key []byte
}

// NewServing makes a CA and a serving certificate for dnsNames signed by it, valid
// from an hour ago for 90 days (no warning of its expiry comes).
func NewServing(t testing.TB, dnsNames ...string) Serving {
	t.Helper()
	return NewServingValid(t, time.Now().Add(-time.Hour), time.Now().Add(90*24*time.Hour), dnsNames...)
}

// NewServingValid is NewServing with a certificate valid from notBefore to notAfter:
// one that has expired, or is not valid yet, or expires soon. The CA is valid from
// before notBefore to after notAfter. Each call makes a new CA, certificate and key:
// the key of one Serving does not match the certificate of another.
func NewServingValid(t testing.TB, notBefore, notAfter time.Time, dnsNames ...string) Serving {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test serving CA"},
		NotBefore: notBefore.Add(-time.Hour), NotAfter: notAfter.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsNames[0]}, DNSNames: dnsNames,
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return Serving{
		CA:   []byte(PEMBlock("CERTIFICATE", caDER)),
		Cert: []byte(PEMBlock("CERTIFICATE", der)),
		Key:  []byte(PEMBlock("EC PRIVATE KEY", keyDER)),
	}
}
