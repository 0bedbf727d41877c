package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// FileCertificates is the CertificateSource of a certificate managed by someone else,
// such as cert-manager: tls.crt and tls.key from files (a Secret volume the kubelet
// keeps current), read again periodically and served from the next handshake on when
// they change.
type FileCertificates struct {
	certFile, keyFile string
	current           atomic.Pointer[tls.Certificate]

	mu                sync.Mutex
	lastCert, lastKey []byte
}

// NewFileCertificates loads the certificate and its key, which must be there.
func NewFileCertificates(certFile, keyFile string) (*FileCertificates, error) {
	c := &FileCertificates{certFile: certFile, keyFile: keyFile}
	if _, err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Certificate implements CertificateSource.
func (c *FileCertificates) Certificate() *tls.Certificate { return c.current.Load() }

// Run reads the files again every interval until ctx ends. A pair that does not load
// (the kubelet swaps both files at once, but a hand-made volume might not) is logged
// and the previous certificate kept.
func (c *FileCertificates) Run(ctx context.Context, interval time.Duration) {
	logger := klog.FromContext(ctx)
	wait.UntilWithContext(ctx, func(context.Context) {
		changed, err := c.reload()
		switch {
		case err != nil:
			logger.Error(err, "Keeping the webhook certificate served")
		case changed:
			leaf := c.Certificate().Leaf
			logger.Info("Serving a new webhook certificate", "file", c.certFile, "serial", leaf.SerialNumber.Text(16), "notAfter", leaf.NotAfter)
		}
	}, interval)
}

// reload loads the files if their content changed, and reports whether it did.
func (c *FileCertificates) reload() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	certPEM, err := os.ReadFile(c.certFile)
	if err != nil {
		return false, fmt.Errorf("reading the webhook certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(c.keyFile)
	if err != nil {
		return false, fmt.Errorf("reading the webhook certificate's key: %w", err)
	}
	if bytes.Equal(certPEM, c.lastCert) && bytes.Equal(keyPEM, c.lastKey) {
		return false, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("loading the webhook certificate from %s and %s: %w", c.certFile, c.keyFile, err)
	}
	c.current.Store(&cert)
	c.lastCert, c.lastKey = certPEM, keyPEM
	return true, nil
}
