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
