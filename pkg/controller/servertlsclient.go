package controller

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// ServerTLS is how the controller reaches a server that serves HTTPS.
type ServerTLS struct {
	// RootCAs are PEM certificates trusted to sign the server's certificate, beside the
	// system's: the TLS Secret's ca.crt and the CR's CA bundle.
	RootCAs []byte
}

// key identifies t for serverState: "" for plain HTTP.
func (t *ServerTLS) key() string {
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

// forServer is the client that verifies l's server's certificate against tls's CAs.
func (c *tlsClients) forServer(l *v1alpha2.LlamaStackDistribution, t *ServerTLS) *http.Client {
	names := serviceNames(l)
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

// serviceNames are the names a certificate of the server Service may carry: the short
// ones in-cluster clients use, and svc.<cluster domain> under any cluster domain.
func serviceNames(l *v1alpha2.LlamaStackDistribution) []string {
	svc := serviceName(l)
	return []string{svc, svc + "." + l.Namespace, svc + "." + l.Namespace + ".svc"}
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

// probeTLS is how the controller reaches the server of d: nil when d's pods serve plain
// HTTP; else trusting the last good read of the TLS Secret's ca.crt and the CA bundle d
// mounts (read live only when its content changes: caTrust).
func (c *Controller) probeTLS(ctx context.Context, l *v1alpha2.LlamaStackDistribution, d *appsv1.Deployment) *ServerTLS {
	if !servesTLS(d) {
		return nil
	}
	key := cache.ObjectName{Namespace: l.Namespace, Name: l.Name}
	t := &ServerTLS{}
	if last := c.tlsSecrets.last(key); last != nil {
		t.RootCAs = append(t.RootCAs, last.ca...)
	}
	if hash := d.Spec.Template.Annotations[annotationCABundleHash]; hash != "" {
		name := caBundleConfigMapName(l)
		content, _, found, err := c.caTrust.live(ctx, c.kubeclient.CoreV1(), key, l.Namespace, name, caBundleKey, hash)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Could not read the CA bundle for the server probe", "configMap", klog.KRef(l.Namespace, name), "err", err)
		} else if found {
			if len(t.RootCAs) > 0 && !strings.HasSuffix(string(t.RootCAs), "\n") {
				t.RootCAs = append(t.RootCAs, '\n')
			}
			t.RootCAs = append(t.RootCAs, content...)
		}
	}
	return t
}
