package webhook

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func writePair(t *testing.T, dir string, kp *keyPair) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), kp.certPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), kp.keyPEM, 0o600))
}

func TestFileCertificatesReloadWhenTheFilesChange(t *testing.T) {
	ca, err := newCA(testStart, testPolicy.caValidity)
	require.NoError(t, err)
	issue := func() *keyPair {
		kp, err := newServingCert(ca, testStart, testPolicy.servingValidity, testHosts)
		require.NoError(t, err)
		return kp
	}
	dir := t.TempDir()
	_, err = NewFileCertificates(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	require.ErrorContains(t, err, "reading the webhook certificate")

	first, second := issue(), issue()
	writePair(t, dir, first)
	c, err := NewFileCertificates(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	require.NoError(t, err)
	require.Equal(t, first.cert.Raw, c.Certificate().Leaf.Raw)

	changed, err := c.reload()
	require.NoError(t, err)
	require.False(t, changed, "the same files")

	writePair(t, dir, second)
	changed, err = c.reload()
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, second.cert.Raw, c.Certificate().Leaf.Raw)

	// A key of another certificate: the served one stays.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), first.keyPEM, 0o600))
	_, err = c.reload()
	require.ErrorContains(t, err, "loading the webhook certificate from")
	require.Equal(t, second.cert.Raw, c.Certificate().Leaf.Raw)
}
