package revision

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
)

// The server's own TLS (spec.networking.tls.enabled with secretName). The Secret is
// mounted read-only at ServerTLSMountPath, and the server is told where its
// tls.crt and tls.key are in the way its version reads them:
//   - a generated config says so in server.tls_certfile and tls_keyfile, which the CLI
//     of every version reads (how OGX and a llama-stack image's entrypoint start);
//   - the controller's script for llama-stack 0.3 to 0.7 starts uvicorn itself, which
//     ignores the config's TLS keys but reads UVICORN_SSL_CERTFILE and _KEYFILE;
//   - a user-written config must say so itself (checkUserConfigTLS).
// The probes, the Service port and status.serviceURL then use HTTPS, and the
// controller's own probe of the server trusts the Secret's ca.crt and the CA bundle.
//
// The controller watches the metadata of Secrets (the controller's Secret cache keeps of
// each its identity and resourceVersion, never its data: SecretVersion) and reads the
// content of a CR's own Secret with a GET, only when the Secret it read last is not the
// one the cache holds (deleted, replaced, rotated: the watch brings the CR back within
// seconds), when the CR changes, and when a date of the certificate comes (it becomes
// valid, it enters its last TLSExpiryWarning, it expires). Syncs in between send nothing
// for it. A renewed certificate (cert-manager renews before expiry) rolls the pods,
// whose server reads its certificate only at start.
// Of the Secret it keeps hashes, the certificate's dates and ca.crt, never the key.

const (
	// SecretCAKey is the key of the CA certificate in a Secret of cert-manager.
	SecretCAKey = "ca.crt"

	// TLSExpiryWarning is how long before its certificate expires a CR is warned, once
	// per certificate, with a Warning Event (ReasonTLSCertificateExpiring).
	TLSExpiryWarning = 14 * 24 * time.Hour
	// ReasonTLSCertificateExpiring is the Event of a certificate that expires within
	// TLSExpiryWarning.
	ReasonTLSCertificateExpiring = "TLSCertificateExpiring"
)

// serverTLSFiles are the paths the server container reads its certificate and key from.
var serverTLSFiles = configgen.TLSFiles{CertFile: ServerCertFile, KeyFile: ServerKeyFile}

// tlsSecretMemo is the last read of a CR's TLS Secret.
type tlsSecretMemo struct {
	uid        types.UID
	generation int64
	name       string
	// version is the Secret read (SecretVersion's form); "" when it was not found.
	version string
	// due is when a date of the certificate makes the read stale; zero for never.
	due     time.Time
	tls     TLS
	problem *fault.Problem
	// good is the last read of the CR's Secret without a problem, kept through the reads
	// that find one (a Secret deleted, or replaced by one refused): the pods still serve
	// the certificate they started with, and the probe verifies it with that ca.crt.
	good *TLS
}

// tlsSecretMemos holds a tlsSecretMemo per CR (cache.ObjectName).
type tlsSecretMemos struct{ m sync.Map }

func (t *tlsSecretMemos) forget(key cache.ObjectName) { t.m.Delete(key) }

// keepOnlyGood keeps, of the CR's memo, only its last good read, once the CR no longer
// asks for TLS: while a problem holds the template, its pods still serve that
// certificate, and the probe still needs its ca.crt (last). The CR's deletion forgets it.
func (t *tlsSecretMemos) keepOnlyGood(key cache.ObjectName, uid types.UID) {
	v, ok := t.m.Load(key)
	if !ok {
		return
	}
	m := v.(tlsSecretMemo)
	switch {
	case m.uid != uid || m.good == nil:
		t.m.Delete(key)
	case m.name != "":
		t.m.Store(key, tlsSecretMemo{uid: uid, good: m.good})
	}
}

// last is the last good read of the CR's Secret, for the probe's trust; nil when none.
func (t *tlsSecretMemos) last(key cache.ObjectName) *TLS {
	if v, ok := t.m.Load(key); ok {
		if m := v.(tlsSecretMemo); m.good != nil {
			t := *m.good
			return &t
		}
	}
	return nil
}

// SecretVersion is how the Secret cache and a read name one version of a Secret: its
// UID and resourceVersion.
func SecretVersion(s metav1.Object) string {
	return string(s.GetUID()) + "/" + s.GetResourceVersion()
}

// resolveServerTLS reads the CR's TLS Secret when it has to (see above) and checks it:
// it must hold a certificate valid now and the key that goes with it, as the server
// would load them, and a ca.crt, if any, of PEM certificates. A missing or unusable
// Secret is a problem: what runs is kept, and the watch of Secrets brings the CR back
// when the Secret changes.
func (r *Resolver) resolveServerTLS(ctx context.Context, l *v1alpha2.LlamaStackDistribution) (*TLS, *fault.Problem, error) {
	key := cache.ObjectName{Namespace: l.Namespace, Name: l.Name}
	name := TLSSecretName(l)
	if name == "" {
		r.tlsSecrets.keepOnlyGood(key, l.UID)
		r.expiryTold.Delete(key)
		return nil, nil, nil
	}
	now := r.Now()
	if v, ok := r.tlsSecrets.m.Load(key); ok {
		m := v.(tlsSecretMemo)
		if m.uid == l.UID && m.name == name && m.generation == l.Generation &&
			m.version == r.SecretVersion(l.Namespace, name) && (m.due.IsZero() || now.Before(m.due)) {
			if m.problem != nil {
				return nil, m.problem, nil
			}
			t := m.tls
			return &t, nil, nil
		}
	}
	secret, err := r.Client.CoreV1().Secrets(l.Namespace).Get(ctx, name, metav1.GetOptions{})
	memo := tlsSecretMemo{uid: l.UID, generation: l.Generation, name: name}
	switch {
	case apierrors.IsNotFound(err):
		memo.problem = &fault.Problem{Reason: v1alpha2.ReasonTLSSecretNotFound, Message: fmt.Sprintf(
			"spec.networking.tls.secretName: Secret %s/%s was not found; create it (type kubernetes.io/tls with tls.crt and tls.key, as cert-manager writes) and the server is rolled out serving HTTPS; until then what runs is kept",
			l.Namespace, name)}
	case err != nil:
		return nil, nil, fmt.Errorf("reading TLS Secret %s/%s: %w", l.Namespace, name, err)
	default:
		memo.version = SecretVersion(secret)
		memo.tls, memo.problem = CheckTLSSecret(secret, now)
		memo.due = certificateDue(memo.tls, memo.problem, now)
		r.warnExpiring(l, key, secret, memo.tls, memo.problem, now)
	}
	if memo.problem == nil {
		t := memo.tls
		memo.good = &t
	} else if v, ok := r.tlsSecrets.m.Load(key); ok && v.(tlsSecretMemo).uid == l.UID {
		memo.good = v.(tlsSecretMemo).good
	}
	r.tlsSecrets.m.Store(key, memo)
	if !memo.due.IsZero() {
		// The CR comes back when the certificate's next date comes, whatever else brings it back.
		r.RecheckAfter(key, memo.due.Sub(now))
	}
	if memo.problem != nil {
		return nil, memo.problem, nil
	}
	t := memo.tls
	return &t, nil, nil
}

// certificateDue is the next date at which what CheckTLSSecret said of a certificate
// read at now changes: when it becomes valid, when it enters its last TLSExpiryWarning
// (to warn), when it expires; zero when none (a certificate that has expired, a problem
// that only a change of the Secret ends). It is always after now.
func certificateDue(t TLS, problem *fault.Problem, now time.Time) time.Time {
	switch {
	case t.NotAfter.IsZero() || now.After(t.NotAfter):
		return time.Time{}
	case now.Before(t.NotBefore):
		return t.NotBefore
	case problem != nil:
		return time.Time{}
	case now.Before(t.NotAfter.Add(-TLSExpiryWarning)):
		return t.NotAfter.Add(-TLSExpiryWarning)
	default:
		// x509 takes a certificate for valid through NotAfter: it has expired a second on.
		return t.NotAfter.Add(time.Second)
	}
}

// warnExpiring records a Warning Event on the CR when its certificate, usable now,
// expires within TLSExpiryWarning: once per certificate (its hash), not at each read.
func (r *Resolver) warnExpiring(l *v1alpha2.LlamaStackDistribution, key cache.ObjectName, secret *corev1.Secret, t TLS, problem *fault.Problem, now time.Time) {
	if problem != nil || now.Before(t.NotAfter.Add(-TLSExpiryWarning)) {
		return
	}
	if prev, ok := r.expiryTold.Load(key); ok && prev.(string) == t.Hash {
		return
	}
	r.expiryTold.Store(key, t.Hash)
	r.Recorder.Eventf(l, corev1.EventTypeWarning, ReasonTLSCertificateExpiring,
		"spec.networking.tls.secretName: the certificate of Secret %s/%s expires on %s (in %s); renew the certificate (cert-manager renews it before then when its Certificate is ready): the server is rolled out with the new one when the Secret changes; until then it serves this one",
		secret.Namespace, secret.Name, t.NotAfter.UTC().Format(time.RFC3339), t.NotAfter.Sub(now).Round(time.Hour))
}

// CheckTLSSecret checks, at now, that secret holds a certificate valid now and its key,
// as the server loads them, and that its ca.crt, when it has one, holds PEM certificates
// and nothing else the controller would pass on; it returns their hash, the
// certificate's dates and the CA certificates (re-encoded, nothing but them). The dates
// are set also when the certificate is not valid now.
func CheckTLSSecret(secret *corev1.Secret, now time.Time) (TLS, *fault.Problem) {
	where := fmt.Sprintf("spec.networking.tls.secretName: Secret %s/%s", secret.Namespace, secret.Name)
	invalid := func(format string, args ...any) *fault.Problem {
		return &fault.Problem{Reason: v1alpha2.ReasonTLSSecretInvalid, Message: where + fmt.Sprintf(format, args...) + "; until then what runs is kept"}
	}
	crt, key := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
	for _, k := range []struct {
		name string
		data []byte
	}{{corev1.TLSCertKey, crt}, {corev1.TLSPrivateKeyKey, key}} {
		if len(k.data) == 0 {
			return TLS{}, invalid(" has no %s: the server needs tls.crt and tls.key (a Secret of type kubernetes.io/tls)", k.name)
		}
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		if mismatched(crt, key) {
			return TLS{}, invalid(": tls.key is not the key of the certificate in tls.crt (a key and a certificate of different issuances); put the certificate's own key in tls.key, or renew the certificate")
		}
		return TLS{}, invalid(": the server could not load tls.crt and tls.key (%v)", err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return TLS{}, invalid(": the server could not load tls.crt (%v)", err)
		}
	}
	out := TLS{NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter}
	dates := fmt.Sprintf("valid from %s to %s", leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	switch {
	case now.After(leaf.NotAfter):
		return out, invalid(": the certificate in tls.crt expired on %s (%s); renew the certificate (with cert-manager, see why its Certificate was not renewed) and the server is rolled out with the new one",
			leaf.NotAfter.UTC().Format(time.RFC3339), dates)
	case now.Before(leaf.NotBefore):
		return out, invalid(": the certificate in tls.crt is not valid before %s (%s); the server is rolled out with it then, or renew the certificate with dates valid now (a clock set wrong where it was issued?)",
			leaf.NotBefore.UTC().Format(time.RFC3339), dates)
	}
	if ca, ok := secret.Data[SecretCAKey]; ok && len(bytes.TrimSpace(ca)) > 0 {
		certs, err := parseCertificates(string(ca))
		if err == nil && len(certs) == 0 {
			err = errors.New("it holds no PEM certificate")
		}
		if err != nil {
			return out, invalid(": %s is not PEM certificates (%v): it would be given to clients to verify the server with; put the CA's certificate there (PEM), or remove the key",
				SecretCAKey, err)
		}
		for _, der := range certs {
			out.CA = append(out.CA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s%d:%s", len(crt), crt, len(key), key)
	out.Hash = hex.EncodeToString(h.Sum(nil))[:32]
	return out, nil
}

// mismatched tells whether tls.crt's first certificate and tls.key each load, and the
// key is not the certificate's.
func mismatched(crt, key []byte) bool {
	certs, err := parseCertificates(string(crt))
	if err != nil || len(certs) == 0 {
		return false
	}
	cert, err := x509.ParseCertificate(certs[0])
	if err != nil {
		return false
	}
	var block *pem.Block
	for rest := key; ; {
		if block, rest = pem.Decode(rest); block == nil {
			return false
		}
		if strings.HasSuffix(block.Type, "PRIVATE KEY") {
			break
		}
	}
	var signer crypto.Signer
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		signer, _ = k.(crypto.Signer)
	} else if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		signer = k
	} else if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		signer = k
	}
	if signer == nil {
		return false
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && !pub.Equal(cert.PublicKey)
}

// checkUserConfigTLS returns a problem when the server would serve plain HTTP with the
// user's config: a server that its own CLI starts (OGX, llama-stack before 0.3, and an
// image whose line is not known) reads its certificate only from the config, which the
// controller does not write. The controller's script for llama-stack 0.3 to 0.7 passes
// the certificate itself. The file is read as for a version move (userConfigs).
func (r *Resolver) checkUserConfigTLS(ctx context.Context, l *v1alpha2.LlamaStackDistribution, image string, uc *UserConfig) (*fault.Problem, error) {
	if uc == nil || GeneratesConfig(l) {
		return nil, nil
	}
	version := ImageServerVersion(image)
	if v, err := configgen.ParseVersion(version); err == nil && !v.OGX() && v.Minor >= 3 {
		return nil, nil
	}
	ns, name := uc.SourceName(l)
	content, found, err := r.readUserConfig(ctx, l, uc)
	if err != nil || !found {
		return nil, err
	}
	cert, key, perr := configgen.ServerTLS(content)
	if perr == nil && cert != "" && key != "" {
		return nil, nil
	}
	server := "server " + version
	if version == "" {
		server = "the server of image " + image
	}
	return &fault.Problem{Reason: v1alpha2.ReasonConfigInvalid, Message: fmt.Sprintf(
		"spec.networking.tls: %s reads its certificate only from its config, and the config of overrideConfig (ConfigMap %s/%s) names none, so it would serve plain HTTP; "+
			"add to it server.tls_certfile: %s and server.tls_keyfile: %s (where the Secret %s is mounted); until then what runs is kept",
		server, ns, name, ServerCertFile, ServerKeyFile, TLSSecretName(l))}, nil
}
