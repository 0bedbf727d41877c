package controller

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

// Test certificates, for the controller's tests of the CA bundle and the server's TLS
// (the package revision's tests make their own the same way).

// testCAKey signs every test certificate: one key keeps generating a thousand certificates quick.
var testCAKey = sync.OnceValues(func() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
})

// testCertPEMs returns n distinct self-signed CA certificates (serials 1..n), PEM-encoded.
func testCertPEMs(t testing.TB, n int) []string {
	t.Helper()
	key, err := testCAKey()
	require.NoError(t, err)
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
		out[i] = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	return out
}

func pemBlock(typ string, body []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: body}))
}
