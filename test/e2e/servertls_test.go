//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// servingSecret is a kubernetes.io/tls Secret as cert-manager writes it: a certificate
// for the Service's names, its key, and the CA that signed it; valid for 90 days, so
// that no Warning of its expiry comes.
func servingSecret(t *testing.T, name string, dnsNames ...string) *corev1.Secret {
	t.Helper()
	return servingSecretValid(t, name, time.Now().Add(-time.Hour), time.Now().Add(90*24*time.Hour), dnsNames...)
}

// servingSecretValid is servingSecret with a certificate valid from notBefore to notAfter.
func servingSecretValid(t *testing.T, name string, notBefore, notAfter time.Time, dnsNames ...string) *corev1.Secret {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e serving CA"},
		NotBefore: notBefore.Add(-time.Hour), NotAfter: notAfter.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsNames[0]}, DNSNames: dnsNames,
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	enc := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey: enc("CERTIFICATE", der), corev1.TLSPrivateKeyKey: enc("EC PRIVATE KEY", keyDER),
			"ca.crt": enc("CERTIFICATE", caDER),
		},
	}
}

// waitHub waits until the v1alpha2 CR satisfies cond, and returns it.
func waitHub(t *testing.T, ns, name, what string, cond func(*v1alpha2.LlamaStackDistribution) bool) *v1alpha2.LlamaStackDistribution {
	t.Helper()
	var l *v1alpha2.LlamaStackDistribution
	eventually(t, 60*time.Second, what, func(ctx context.Context) (bool, error) {
		var err error
		l, err = env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && l.Status.ObservedGeneration == l.Generation && cond(l), err
	})
	return l
}

// A named distribution with networking.tls: while its Secret is missing the CR says so
// and nothing is rolled out; once the Secret exists the server (the fake, started as
// OGX 1.3.0 starts: the generated config at $RUN_CONFIG_PATH naming the certificate)
// serves HTTPS with the Secret's certificate, and the controller's health and providers
// probe reaches it over HTTPS through the API server's proxy.
func TestServerServesTLS(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	servers := env.servers.readConfig(t, ns, "secure")
	crs := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns)
	_, err := crs.Create(ctx, &v1alpha2.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: "secure"},
		Spec: v1alpha2.LlamaStackDistributionSpec{
			Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Providers: &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{
				Provider: "vllm", Endpoint: "http://vllm.models.svc:8000/v1",
			}}},
			Networking: &v1alpha2.NetworkingSpec{TLS: &v1alpha2.TLSSpec{Enabled: true, SecretName: "secure-cert"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	l := waitHub(t, ns, "secure", "TLSSecretNotFound", func(l *v1alpha2.LlamaStackDistribution) bool {
		c := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionDeploymentReady)
		return c != nil && c.Reason == v1alpha2.ReasonTLSSecretNotFound
	})
	assert.Contains(t, meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionDeploymentReady).Message, "Secret "+ns+"/secure-cert was not found")
	_, err = env.kube.AppsV1().Deployments(ns).Get(ctx, "secure", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing is rolled out without the certificate: %v", err)

	_, err = env.kube.CoreV1().Secrets(ns).Create(ctx, servingSecret(t, "secure-cert", "secure-service."+ns+".svc"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitReady(t, ns, "secure")
	got := waitServed(t, servers, ns, "secure", "")
	require.NotNil(t, got.server.tls, "the server serves HTTPS")
	assert.Equal(t, "/etc/llama-stack-tls/tls.crt", got.server.certFile)
	assert.Equal(t, "1.3.0", got.server.version)
	assert.NotContains(t, got.server.config["server"], "insecure")

	l = waitHub(t, ns, "secure", "HealthCheck passes", func(l *v1alpha2.LlamaStackDistribution) bool {
		return meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha2.ConditionHealthCheck)
	})
	assert.Equal(t, "https://secure-service."+ns+".svc.cluster.local:8321", l.Status.ServiceURL)
	svc, err := env.kube.CoreV1().Services(ns).Get(ctx, "secure-service", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "https", svc.Spec.Ports[0].Name)
	d := deployment(t, ns, "secure")
	assert.Equal(t, corev1.URISchemeHTTPS, server(d).ReadinessProbe.HTTPGet.Scheme)

	// TLS off: back to plain HTTP, told so explicitly.
	editHub(t, ns, "secure", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Networking = nil })
	waitDeployment(t, ns, "secure", "plain HTTP probes", func(d *appsv1.Deployment) bool {
		return server(d).ReadinessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS
	})
	waitReady(t, ns, "secure")
	plain := waitServed(t, servers, ns, "secure", got.configMap)
	assert.Nil(t, plain.server.tls)
	assert.Equal(t, true, plain.server.config["server"].(map[string]any)["insecure"])
	waitHub(t, ns, "secure", "an http serviceURL", func(l *v1alpha2.LlamaStackDistribution) bool {
		return l.Status.ServiceURL == "http://secure-service."+ns+".svc.cluster.local:8321"
	})
}

// llama-stack 0.3 to 0.7 with a config of the user's: the controller's script starts
// uvicorn with the certificate in UVICORN_SSL_CERTFILE and _KEYFILE, which the fake
// reads as uvicorn does; the file does not name it.
func TestLlamaStackServesTLSWithAUserConfig(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	servers := env.servers.readConfig(t, ns, "old")
	_, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "run"},
		Data: map[string]string{"config.yaml": "version: 2\ndistro_name: mine\napis: [inference]\nproviders:\n  inference:\n" +
			"  - {provider_id: vllm, provider_type: remote::vllm, config: {url: 'http://vllm:8000/v1'}}\n"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.kube.CoreV1().Secrets(ns).Create(ctx, servingSecret(t, "old-cert", "old-service."+ns+".svc.cluster.local"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, &v1alpha2.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: "old"},
		Spec: v1alpha2.LlamaStackDistributionSpec{
			Distribution:   v1alpha2.DistributionSpec{Image: "docker.io/ogxai/distribution-starter:0.6.1"},
			OverrideConfig: &v1alpha2.OverrideConfigSpec{ConfigMapName: "run"},
			Networking:     &v1alpha2.NetworkingSpec{TLS: &v1alpha2.TLSSpec{Enabled: true, SecretName: "old-cert"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitReady(t, ns, "old")
	waitHub(t, ns, "old", "HealthCheck passes", func(l *v1alpha2.LlamaStackDistribution) bool {
		return meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha2.ConditionHealthCheck)
	})
	pods := runningPods(t, ns, "old")
	require.Len(t, pods, 1)
	srv, ok := servers.server(pods[0].Name)
	require.True(t, ok)
	require.NotNil(t, srv.tls, "uvicorn serves HTTPS")
	assert.Equal(t, "/etc/llama-stack-tls/tls.crt", srv.certFile)
	assert.Equal(t, "0.6.1", srv.version)
}

// The Secret of a serving CR is watched: deleted, the CR reports TLSSecretNotFound within
// seconds (no change of the CR, no recheck: those came every 10 minutes); replaced by an
// expired certificate, TLSSecretInvalid with its date, and the running pods are kept; a
// good one put back, the server is rolled out with it and Ready again.
func TestTLSSecretChangesAreSeenInSeconds(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	secrets := env.kube.CoreV1().Secrets(ns)
	dns := "watched-service." + ns + ".svc"
	_, err := secrets.Create(ctx, servingSecret(t, "watched-cert", dns), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, &v1alpha2.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: "watched"},
		Spec: v1alpha2.LlamaStackDistributionSpec{
			Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Providers: &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{
				Provider: "vllm", Endpoint: "http://vllm.models.svc:8000/v1",
			}}},
			Networking: &v1alpha2.NetworkingSpec{TLS: &v1alpha2.TLSSpec{Enabled: true, SecretName: "watched-cert"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitReady(t, ns, "watched")
	served := deployment(t, ns, "watched").Spec.Template

	// reported waits, for at most 30 s, until a condition says reason (Progressing, as
	// the server keeps serving), and returns its message.
	reported := func(what, reason string) string {
		t.Helper()
		start := time.Now()
		var msg string
		eventually(t, 30*time.Second, what, func(ctx context.Context) (bool, error) {
			l, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, "watched", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range l.Status.Conditions {
				if c.Reason == reason && c.Status == metav1.ConditionFalse {
					msg = c.Message
					return true, nil
				}
			}
			return false, nil
		})
		t.Logf("%s after %s", what, time.Since(start).Round(100*time.Millisecond))
		return msg
	}

	require.NoError(t, secrets.Delete(ctx, "watched-cert", metav1.DeleteOptions{}))
	msg := reported("the deletion is reported", v1alpha2.ReasonTLSSecretNotFound)
	assert.Contains(t, msg, "Secret "+ns+"/watched-cert was not found")

	expiredAt := time.Date(2021, 3, 1, 0, 0, 0, 0, time.UTC)
	_, err = secrets.Create(ctx, servingSecretValid(t, "watched-cert", expiredAt.AddDate(-1, 0, 0), expiredAt, dns), metav1.CreateOptions{})
	require.NoError(t, err)
	msg = reported("the expired certificate is reported", v1alpha2.ReasonTLSSecretInvalid)
	assert.Contains(t, msg, "expired on 2021-03-01T00:00:00Z")
	assert.Contains(t, msg, "renew the certificate")
	assert.Equal(t, served.Annotations, deployment(t, ns, "watched").Spec.Template.Annotations, "what runs is kept")

	renewed := servingSecret(t, "watched-cert", dns)
	eventually(t, 10*time.Second, "the Secret is replaced", func(ctx context.Context) (bool, error) {
		cur, err := secrets.Get(ctx, "watched-cert", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur.Data = renewed.Data
		_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
	waitDeployment(t, ns, "watched", "the renewed certificate rolled out", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Annotations["llamastack.io/tls-certificate-hash"] != served.Annotations["llamastack.io/tls-certificate-hash"]
	})
	waitReady(t, ns, "watched")
}
