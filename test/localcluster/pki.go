package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long the generated certificates are valid. A cluster
// lives for a test run; a kept run dir should still be usable for a while.
const certValidity = 365 * 24 * time.Hour

// keyPair is a PEM-encoded certificate and its PEM-encoded private key.
type keyPair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// certSpec describes a leaf certificate issued by the cluster CA.
type certSpec struct {
	commonName    string
	organizations []string
	dnsNames      []string
	ips           []net.IP
	server        bool
	client        bool
}

// certAuthority is the self-signed EC P-256 CA that signs every certificate
// of one cluster (serving, client, front-proxy) and the controller-manager's
// CSR signer.
type certAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	keyPair
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func encodeECKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func newCertAuthority(commonName string) (*certAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeECKey(key)
	if err != nil {
		return nil, err
	}
	return &certAuthority{cert: cert, key: key, keyPair: keyPair{CertPEM: encodeCert(der), KeyPEM: keyPEM}}, nil
}

// issue creates an EC P-256 key and a certificate for it signed by the CA.
func (ca *certAuthority) issue(spec certSpec) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	serial, err := randomSerial()
	if err != nil {
		return keyPair{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.commonName, Organization: spec.organizations},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     spec.dnsNames,
		IPAddresses:  spec.ips,
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, crypto.PublicKey(key.Public()), ca.key)
	if err != nil {
		return keyPair{}, err
	}
	keyPEM, err := encodeECKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// pki holds the credentials of one cluster; the *File fields are paths in
// the run dir.
type pki struct {
	ca         *certAuthority
	apiserver  keyPair
	admin      keyPair
	kcm        keyPair
	scheduler  keyPair
	kwok       keyPair
	frontProxy keyPair
	saKeyPEM   []byte
	saPubPEM   []byte
	caFile     string
	caKeyFile  string
	saKeyFile  string
	saPubFile  string
	serverCert string
	serverKey  string
	proxyCert  string
	proxyKey   string
}

// generatePKI creates the CA, the apiserver serving certificate, the client
// certificates of every identity and the service-account key pair, and writes
// the files the components read into dir.
func generatePKI(dir string) (*pki, error) {
	ca, err := newCertAuthority("llama-stack-controller-local-ca")
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	p := &pki{ca: ca}

	specs := []struct {
		dst  *keyPair
		spec certSpec
	}{
		{&p.apiserver, certSpec{
			commonName: "kube-apiserver",
			dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			ips:    []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)},
			server: true,
		}},
		{&p.admin, certSpec{commonName: "local-admin", organizations: []string{"system:masters"}, client: true}},
		{&p.kcm, certSpec{commonName: "system:kube-controller-manager", client: true}},
		{&p.scheduler, certSpec{commonName: "system:kube-scheduler", client: true}},
		{&p.kwok, certSpec{commonName: "kwok-controller", organizations: []string{"system:masters"}, client: true}},
		{&p.frontProxy, certSpec{commonName: "front-proxy-client", client: true}},
	}
	for _, s := range specs {
		kp, err := ca.issue(s.spec)
		if err != nil {
			return nil, fmt.Errorf("certificate %q: %w", s.spec.commonName, err)
		}
		*s.dst = kp
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	p.saKeyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)})
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("service-account public key: %w", err)
	}
	p.saPubPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p.caFile = filepath.Join(dir, "ca.crt")
	p.caKeyFile = filepath.Join(dir, "ca.key")
	p.serverCert = filepath.Join(dir, "apiserver.crt")
	p.serverKey = filepath.Join(dir, "apiserver.key")
	p.proxyCert = filepath.Join(dir, "front-proxy-client.crt")
	p.proxyKey = filepath.Join(dir, "front-proxy-client.key")
	p.saKeyFile = filepath.Join(dir, "sa.key")
	p.saPubFile = filepath.Join(dir, "sa.pub")
	files := []struct {
		path string
		data []byte
	}{
		{p.caFile, ca.CertPEM},
		{p.caKeyFile, ca.KeyPEM},
		{p.serverCert, p.apiserver.CertPEM},
		{p.serverKey, p.apiserver.KeyPEM},
		{p.proxyCert, p.frontProxy.CertPEM},
		{p.proxyKey, p.frontProxy.KeyPEM},
		{p.saKeyFile, p.saKeyPEM},
		{p.saPubFile, p.saPubPEM},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}
