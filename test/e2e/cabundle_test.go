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
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// testCertificate makes a self-signed CA certificate, PEM-encoded.
func testCertificate(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// Upstream's TLS scenario: the sample with user config and a CA bundle; the CA
// ConfigMap first holds no certificate (the CR reports it), then a real one: the
// managed bundle is mounted with SSL_CERT_FILE and the CR becomes Ready. Removing the
// bundle removes the managed ConfigMap and the mount.
func TestCABundleEndToEnd(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	cms := env.kube.CoreV1().ConfigMaps(ns)
	_, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "custom-ca-bundle"},
		Data:       map[string]string{"ca-bundle.crt": "placeholder, no certificate yet"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	objs, err := readObjects(filepath.Join(env.root, "artifacts", "examples", "example-with-ca-bundle.yaml"))
	require.NoError(t, err)
	for _, o := range objs {
		o.SetNamespace(ns)
		gvr := llsdResource
		if o.GetKind() == "ConfigMap" {
			gvr = corev1.SchemeGroupVersion.WithResource("configmaps")
		}
		_, err := env.dynamic.Resource(gvr).Namespace(ns).Create(ctx, o, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waitCondition(t, ns, "llamastack-with-config", v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonCABundleInvalid)

	cert := testCertificate(t, "e2e-ca")
	cm, err := cms.Get(ctx, "custom-ca-bundle", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["ca-bundle.crt"] = cert
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitReady(t, ns, "llamastack-with-config")

	d := deployment(t, ns, "llamastack-with-config")
	file, ok := envValue(server(d), "SSL_CERT_FILE")
	assert.True(t, ok)
	assert.Equal(t, "/etc/ssl/certs/ca-bundle/ca-bundle.crt", file)
	var mounted bool
	for _, m := range server(d).VolumeMounts {
		mounted = mounted || m.Name == "ca-bundle" && m.MountPath == "/etc/ssl/certs/ca-bundle"
	}
	assert.True(t, mounted)
	managed, err := cms.Get(ctx, "llamastack-with-config-ca-bundle", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, cert, managed.Data["ca-bundle.crt"])

	// A second certificate rolls the pods.
	first := d.Spec.Template.Annotations["configmap.hash/ca-bundle"]
	cm, err = cms.Get(ctx, "custom-ca-bundle", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["ca-bundle.crt"] = cert + testCertificate(t, "e2e-ca-2")
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitDeployment(t, ns, "llamastack-with-config", "the new bundle rolls the pods", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Annotations["configmap.hash/ca-bundle"] != first
	})

	edit(t, ns, "llamastack-with-config", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.TLSConfig = nil })
	waitDeployment(t, ns, "llamastack-with-config", "no CA bundle mounted", func(d *appsv1.Deployment) bool {
		_, ok := envValue(server(d), "SSL_CERT_FILE")
		return !ok && len(d.Spec.Template.Spec.Volumes) == 2
	})
	eventually(t, 30*time.Second, "the managed ConfigMap is deleted", func(ctx context.Context) (bool, error) {
		_, err := cms.Get(ctx, "llamastack-with-config-ca-bundle", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	waitReady(t, ns, "llamastack-with-config")

	require.NoError(t, env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Delete(ctx, "llamastack-with-config", metav1.DeleteOptions{}))
	gone(t, "the Deployment", func(ctx context.Context) error {
		_, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "llamastack-with-config", metav1.GetOptions{})
		return err
	})
}
