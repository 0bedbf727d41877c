package revision

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
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
// The controller reads the Secret with a GET (it has no informer on Secrets: they hold
// private keys, and a cache of them would grow with every Secret of the cluster): when
// the CR changes; while the Secret is missing or unusable, after a wait that doubles from
// TLSSecretRetryMin to TLSSecretRetryMax (no event announces its creation); and every
// TLSSecretRecheck otherwise, so that a renewed certificate (cert-manager renews before
// expiry) rolls the pods, whose server reads its certificate only at start. Syncs in
// between send nothing for it.
// Of the Secret it keeps hashes and ca.crt, never the key.

const (
	// SecretCAKey is the key of the CA certificate in a Secret of cert-manager.
	SecretCAKey = "ca.crt"

	// TLSSecretRecheck is how often the Secret of a serving CR is read again.
	TLSSecretRecheck = 10 * time.Minute
	// TLSSecretRetryMin and TLSSecretRetryMax bound the wait before a missing or
	// unusable Secret is read again.
	TLSSecretRetryMin = 5 * time.Second
	TLSSecretRetryMax = 2 * time.Minute
)

// serverTLSFiles are the paths the server container reads its certificate and key from.
var serverTLSFiles = configgen.TLSFiles{CertFile: ServerCertFile, KeyFile: ServerKeyFile}

// tlsSecretMemo is the last read of a CR's TLS Secret.
type tlsSecretMemo struct {
	uid        types.UID
	generation int64
	name       string
	read       time.Time
	tls        TLS
	problem    *fault.Problem
	// failures counts the reads in a row that found a problem.
	failures int
}

// valid is how long the read stays good.
func (m tlsSecretMemo) valid() time.Duration {
	if m.problem == nil {
		return TLSSecretRecheck
	}
	d := TLSSecretRetryMin
	for i := 1; i < m.failures && d < TLSSecretRetryMax; i++ {
		d *= 2
	}
	return min(d, TLSSecretRetryMax)
}

// tlsSecretMemos holds a tlsSecretMemo per CR (cache.ObjectName).
type tlsSecretMemos struct{ m sync.Map }

func (t *tlsSecretMemos) forget(key cache.ObjectName) { t.m.Delete(key) }

// last is the last good read of the CR's Secret, for the probe's trust; nil when none.
func (t *tlsSecretMemos) last(key cache.ObjectName) *TLS {
	if v, ok := t.m.Load(key); ok {
		if m := v.(tlsSecretMemo); m.problem == nil {
			return &m.tls
		}
	}
	return nil
}

// resolveServerTLS reads the CR's TLS Secret when it has to (see above) and checks it:
// it must hold a certificate and the key that goes with it, as the server would load
// them. A missing or unusable Secret is a problem: what runs is kept and the CR is looked
// at again on the recheck back-off, since no event announces the Secret's creation.
func (r *Resolver) resolveServerTLS(ctx context.Context, l *v1alpha2.LlamaStackDistribution) (*TLS, *fault.Problem, error) {
	key := cache.ObjectName{Namespace: l.Namespace, Name: l.Name}
	name := TLSSecretName(l)
	if name == "" {
		r.tlsSecrets.forget(key)
		return nil, nil, nil
	}
	now := r.Now()
	failures := 0
	if v, ok := r.tlsSecrets.m.Load(key); ok {
		m := v.(tlsSecretMemo)
		if m.uid == l.UID && m.name == name {
			if m.generation == l.Generation && now.Sub(m.read) < m.valid() {
				if m.problem != nil {
					return nil, m.problem, nil
				}
				t := m.tls
				return &t, nil, nil
			}
			failures = m.failures
		}
	}
	secret, err := r.Client.CoreV1().Secrets(l.Namespace).Get(ctx, name, metav1.GetOptions{})
	memo := tlsSecretMemo{uid: l.UID, generation: l.Generation, name: name, read: now}
	switch {
	case apierrors.IsNotFound(err):
		memo.problem = &fault.Problem{Reason: v1alpha2.ReasonTLSSecretNotFound, Message: fmt.Sprintf(
			"spec.networking.tls.secretName: Secret %s/%s was not found; create it (type kubernetes.io/tls with tls.crt and tls.key, as cert-manager writes) and the server is rolled out serving HTTPS; until then what runs is kept",
			l.Namespace, name)}
	case err != nil:
		return nil, nil, fmt.Errorf("reading TLS Secret %s/%s: %w", l.Namespace, name, err)
	default:
		memo.tls, memo.problem = CheckTLSSecret(secret)
	}
	if memo.problem != nil {
		memo.failures = failures + 1
	}
	r.tlsSecrets.m.Store(key, memo)
	// The CR comes back when the next read is due, whatever else brings it back.
	r.RecheckAfter(key, memo.valid())
	if memo.problem != nil {
		return nil, memo.problem, nil
	}
	t := memo.tls
	return &t, nil, nil
}

// CheckTLSSecret checks that secret holds a certificate and its key, as the server loads
// them, and returns their hash and the CA certificate.
func CheckTLSSecret(secret *corev1.Secret) (TLS, *fault.Problem) {
	where := fmt.Sprintf("spec.networking.tls.secretName: Secret %s/%s", secret.Namespace, secret.Name)
	crt, key := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
	for _, k := range []struct {
		name string
		data []byte
	}{{corev1.TLSCertKey, crt}, {corev1.TLSPrivateKeyKey, key}} {
		if len(k.data) == 0 {
			return TLS{}, &fault.Problem{Reason: v1alpha2.ReasonTLSSecretInvalid, Message: fmt.Sprintf(
				"%s has no %s: the server needs tls.crt and tls.key (a Secret of type kubernetes.io/tls); what runs is kept", where, k.name)}
		}
	}
	if _, err := tls.X509KeyPair(crt, key); err != nil {
		return TLS{}, &fault.Problem{Reason: v1alpha2.ReasonTLSSecretInvalid, Message: fmt.Sprintf(
			"%s: the server could not load tls.crt and tls.key (%v); what runs is kept", where, err)}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s%d:%s", len(crt), crt, len(key), key)
	return TLS{Hash: hex.EncodeToString(h.Sum(nil))[:32], CA: append([]byte(nil), secret.Data[SecretCAKey]...)}, nil
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
