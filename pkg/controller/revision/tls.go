package revision

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// Where the server container finds its certificate (spec.networking.tls.enabled with
// secretName): the Secret is mounted read-only at ServerTLSMountPath.
const (
	ServerTLSMountPath = "/etc/llama-stack-tls"
	ServerCertFile     = ServerTLSMountPath + "/" + corev1.TLSCertKey
	ServerKeyFile      = ServerTLSMountPath + "/" + corev1.TLSPrivateKeyKey

	EnvUvicornCertFile = "UVICORN_SSL_CERTFILE"
	EnvUvicornKeyFile  = "UVICORN_SSL_KEYFILE"
)

// TLSSecretName is the Secret with the server's certificate; "" without TLS.
func TLSSecretName(l *v1alpha2.LlamaStackDistribution) string {
	if !llsd.TLSEnabled(l) {
		return ""
	}
	return llsd.Networking(l).TLS.SecretName
}

// TLS is what a sync knows of the server's certificate.
type TLS struct {
	// Hash is of tls.crt and tls.key, for the pod-template annotation.
	Hash string
	// CA is the certificates of the Secret's ca.crt, PEM-encoded anew (nothing else
	// of the key is kept); empty when it has none.
	CA []byte
	// NotBefore and NotAfter are the certificate's dates.
	NotBefore, NotAfter time.Time
}
