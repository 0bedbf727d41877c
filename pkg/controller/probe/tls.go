package probe

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// TLS is how the controller reaches a server that serves HTTPS.
type TLS struct {
	// RootCAs are PEM certificates trusted to sign the server's certificate, beside the
	// system's: the TLS Secret's ca.crt and the CR's CA bundle.
	RootCAs []byte
}

// key identifies t for State: "" for plain HTTP.
func (t *TLS) key() string {
	if t == nil {
		return ""
	}
	sum := sha256.Sum256(t.RootCAs)
	return "https:" + hex.EncodeToString(sum[:8])
}

// maxTLSClients bounds the clients kept per set of trusted CAs; past it they are made
// anew (each CR usually has its own CA, so this is about the number of TLS servers).
const maxTLSClients = 256

// tlsClients are the HTTPS clients of ServiceEndpoints, one per set of trusted CAs.
type tlsClients struct {
	base  *http.Client
	mu    sync.Mutex
	byKey map[string]*http.Client
}

// forServer is the client that verifies the certificate of the server behind svc
// against t's CAs.
func (c *tlsClients) forServer(svc Service, t *TLS) *http.Client {
	names := svc.names()
	key := t.key() + "/" + strings.Join(names, ",")
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.byKey[key]; ok {
		return cl
	}
	if len(c.byKey) >= maxTLSClients {
		clear(c.byKey)
	}
	var transport *http.Transport
	if base, ok := c.base.Transport.(*http.Transport); ok && base != nil {
		transport = base.Clone()
	} else {
		transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	transport.TLSClientConfig = serverTLSConfig(t.RootCAs, names)
	cl := &http.Client{Transport: transport, Timeout: c.base.Timeout}
	c.byKey[key] = cl
	return cl
}

// names are the names a certificate of the server Service may carry: the short ones
// in-cluster clients use, and svc.<cluster domain> under any cluster domain.
func (svc Service) names() []string {
	return []string{svc.Name, svc.Name + "." + svc.Namespace, svc.Name + "." + svc.Namespace + ".svc"}
}

// serverTLSConfig verifies the server's certificate chain against the system's roots
// and rootsPEM, and its name against names or any <names[2]>.<cluster domain>. Go's own
// name check would accept only the host of the URL, and certificates are as often made
// for the full name (svc.ns.svc.cluster.local) as for the short one.
func serverTLSConfig(rootsPEM []byte, names []string) *tls.Config {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	roots.AppendCertsFromPEM(rootsPEM)
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain and the name are verified by VerifyConnection.
		InsecureSkipVerify: true, //nolint:gosec // verified below
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyServerCertificate(cs.PeerCertificates, roots, names)
		},
	}
}

func verifyServerCertificate(chain []*x509.Certificate, roots *x509.CertPool, names []string) error {
	if len(chain) == 0 {
		return errors.New("the server sent no certificate")
	}
	leaf := chain[0]
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("%w (the controller trusts the TLS Secret's ca.crt, spec.networking.tls.caBundle and the system's CAs)", err)
	}
	for _, n := range names {
		if leaf.VerifyHostname(n) == nil {
			return nil
		}
	}
	full := names[len(names)-1] + "."
	for _, d := range leaf.DNSNames {
		if strings.HasPrefix(strings.ToLower(d), full) {
			return nil
		}
	}
	return fmt.Errorf("the server's certificate is for %s, not for the Service (%s or %s<cluster domain>)",
		strings.Join(leaf.DNSNames, ", "), strings.Join(names, ", "), full)
}
