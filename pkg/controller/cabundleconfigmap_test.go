package controller

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/testcert"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

func withCABundle(name, namespace string, keys ...v1alpha1.ConfigMapKey) func(*v1alpha1.LlamaStackDistribution) {
	return func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.TLSConfig = &v1alpha1.TLSConfig{CABundle: &v1alpha1.CABundleConfig{
			ConfigMapName: name, ConfigMapNamespace: namespace, ConfigMapKeys: keys,
		}}
	}
}

// managedCA reads the managed CA bundle ConfigMap; nil when there is none.
func (f *fixture) managedCA(name string) *corev1.ConfigMap {
	f.t.Helper()
	cm, err := f.kubeclient.CoreV1().ConfigMaps(testNamespace).Get(f.ctx, name+"-ca-bundle", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(f.t, err)
	return cm
}

// caMount tells whether the server pod mounts the CA bundle and points SSL_CERT_FILE at it.
func caMount(t *testing.T, d *appsv1.Deployment) bool {
	t.Helper()
	ctr := serverContainerOf(t, d)
	var env, mount, volume bool
	for _, e := range ctr.Env {
		env = env || e.Name == "SSL_CERT_FILE" && e.Value == "/etc/ssl/certs/ca-bundle/ca-bundle.crt"
	}
	for _, m := range ctr.VolumeMounts {
		mount = mount || m.Name == "ca-bundle" && m.MountPath == "/etc/ssl/certs/ca-bundle" && m.ReadOnly
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volume = volume || v.Name == "ca-bundle" && v.ConfigMap != nil && v.ConfigMap.Name == d.Name+"-ca-bundle"
	}
	require.Equal(t, env, mount, "SSL_CERT_FILE and the mount go together")
	require.Equal(t, mount, volume, "the mount and the volume go together")
	return mount
}

func TestCABundleLifecycle(t *testing.T) {
	certs := testcert.CertPEMs(t, 3)
	f := newFixture(t,
		newLLSDv1("app", withCABundle("custom-ca", "")),
		configMap(testNamespace, "custom-ca", map[string]string{revision.CABundleKey: certs[0]}, nil))
	f.converge("app")

	cm := f.managedCA("app")
	require.NotNil(t, cm)
	assertControlledChild(t, cm, f.llsd("app"))
	assert.Equal(t, certs[0], cm.Data[revision.CABundleKey])
	assert.Equal(t, "ca-bundle", cm.Labels["app.kubernetes.io/component"])
	d := f.deployment("app")
	assert.True(t, caMount(t, d))
	first := d.Spec.Template.Annotations[llsd.AnnotationCABundleHash]
	require.NotEmpty(t, first)
	assert.Empty(t, f.sync("app"), "a resync of an unchanged CR sends nothing")

	// A source change rolls the pods through the content hash.
	f.putConfigMap(configMap(testNamespace, "custom-ca", map[string]string{revision.CABundleKey: certs[0] + certs[1]}, nil))
	f.converge("app")
	assert.Equal(t, certs[0]+"\n"+certs[1], f.managedCA("app").Data[revision.CABundleKey])
	second := f.deployment("app").Spec.Template.Annotations[llsd.AnnotationCABundleHash]
	assert.NotEqual(t, first, second)

	// A metadata-only edit of the source rolls nothing and writes nothing.
	src := configMap(testNamespace, "custom-ca", map[string]string{revision.CABundleKey: certs[0] + certs[1]}, map[string]string{"note": "x"})
	f.putConfigMap(src)
	assert.Empty(t, mutating(f.sync("app")))

	// An edit of the managed ConfigMap is repaired.
	tampered := f.managedCA("app")
	tampered.Data[revision.CABundleKey] = certs[2]
	_, err := f.kubeclient.CoreV1().ConfigMaps(testNamespace).Update(f.ctx, tampered, metav1.UpdateOptions{FieldManager: "kubectl"})
	require.NoError(t, err)
	f.refreshCaches()
	f.converge("app")
	assert.Equal(t, certs[0]+"\n"+certs[1], f.managedCA("app").Data[revision.CABundleKey])

	// Removing tlsConfig deletes the mount, and the managed ConfigMap once rolled out
	// (upstream's RBAC could not).
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.TLSConfig = nil })
	f.converge("app")
	assert.NotNil(t, f.managedCA("app"), "deleted while the old pods may still mount it")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	assert.Nil(t, f.managedCA("app"))
	d = f.deployment("app")
	assert.False(t, caMount(t, d))
	assert.NotContains(t, d.Spec.Template.Annotations, llsd.AnnotationCABundleHash)
}

// The namespace's odh-trusted-ca-bundle is picked up by itself; one whose values are all
// blank is ignored rather than failing the CR (upstream §12.6).
func TestODHTrustedCABundle(t *testing.T) {
	certs := testcert.CertPEMs(t, 2)
	f := newFixture(t, newLLSD("app"),
		configMap(testNamespace, revision.ODHTrustedCABundle, map[string]string{"ca-bundle.crt": "  \n", "odh-ca-bundle.crt": ""}, nil))
	f.converge("app")
	l := f.llsd("app")
	assert.NotEqual(t, v1alpha2.PhaseFailed, l.Status.Phase)
	assert.False(t, caMount(t, f.deployment("app")))
	assert.Empty(t, f.sync("app"), "a blank ODH bundle is not re-read on every sync")

	// Certificates in two keys: sorted key order, so nothing churns (upstream §12.7).
	f.putConfigMap(configMap(testNamespace, revision.ODHTrustedCABundle, map[string]string{"z.crt": certs[1], "a.crt": certs[0]}, nil))
	f.converge("app")
	assert.Equal(t, certs[0]+"\n"+certs[1], f.managedCA("app").Data[revision.CABundleKey])
	assert.True(t, caMount(t, f.deployment("app")))
	// A bad key in the ODH bundle is skipped with a Warning, not a failure.
	f.putConfigMap(configMap(testNamespace, revision.ODHTrustedCABundle, map[string]string{"a.crt": certs[0], "bad.crt": "-----BEGIN CERTIFICATE-----\nZm9v\n-----END CERTIFICATE-----\n"}, nil))
	f.converge("app")
	assert.Equal(t, certs[0], f.managedCA("app").Data[revision.CABundleKey])
	assert.True(t, hasEvent(f.events(), "CABundleKeySkipped"))
	assert.NotEqual(t, v1alpha2.PhaseFailed, f.llsd("app").Status.Phase)
}

// The user errors of upstream §8/§9 that the schema cannot catch: a missing ConfigMap, a
// missing key, data without a valid certificate. Each leaves the running Deployment as it is.
func TestCABundleUserErrors(t *testing.T) {
	cert := testcert.CertPEMs(t, 1)[0]
	tests := map[string]struct {
		data   map[string]string
		keys   []v1alpha1.ConfigMapKey
		reason string
		facts  []string
	}{
		"missing ConfigMap": {reason: v1alpha2.ReasonConfigMapNotFound, facts: []string{testNamespace + "/custom-ca", "not found"}},
		"missing key": {data: map[string]string{revision.CABundleKey: cert}, keys: []v1alpha1.ConfigMapKey{"zz"},
			reason: v1alpha2.ReasonConfigMapKeyMissing, facts: []string{"'zz'", testNamespace + "/custom-ca"}},
		"no certificate": {data: map[string]string{revision.CABundleKey: "not a certificate"},
			reason: v1alpha2.ReasonCABundleInvalid, facts: []string{"'ca-bundle.crt'", "custom-ca"}},
		"a public key only": {data: map[string]string{revision.CABundleKey: testcert.PEMBlock("PUBLIC KEY", []byte("x"))},
			reason: v1alpha2.ReasonCABundleInvalid, facts: []string{"custom-ca"}},
		"a certificate that does not parse": {data: map[string]string{revision.CABundleKey: testcert.PEMBlock("CERTIFICATE", []byte("garbage"))},
			reason: v1alpha2.ReasonCABundleInvalid, facts: []string{"'ca-bundle.crt'"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, newLLSD("app"))
			f.converge("app")
			before := f.deployment("app").DeepCopy()
			if tc.data != nil {
				f.putConfigMap(configMap(testNamespace, "custom-ca", tc.data, nil))
			}
			f.updateLLSD("app", withCABundle("custom-ca", "", tc.keys...))
			f.sync("app")
			requireUserError(t, f.llsd("app"), tc.reason, tc.facts...)
			msg := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Message
			assert.False(t, strings.Contains(msg, "failed to"), "no chains of 'failed to': %s", msg)
			assert.Equal(t, before.Spec, f.deployment("app").Spec, "the running Deployment was changed")
			assert.Nil(t, f.managedCA("app"))
		})
	}
}

// A CA bundle ConfigMap in another namespace follows the same opt-in as user config.
func TestCABundleCrossNamespace(t *testing.T) {
	cert := testcert.CertPEMs(t, 1)[0]
	f := newFixture(t, newLLSDv1("app", withCABundle("shared-ca", "other")),
		configMap("other", "shared-ca", map[string]string{revision.CABundleKey: cert}, nil))
	f.sync("app")
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonConfigMapNotAllowed, "other/shared-ca")

	f.putConfigMap(configMap("other", "shared-ca", map[string]string{revision.CABundleKey: cert}, map[string]string{AllowedNamespacesAnnotation: "*"}))
	f.converge("app")
	assert.Equal(t, cert, f.managedCA("app").Data[revision.CABundleKey])
	assert.True(t, caMount(t, f.deployment("app")))
}

// A CA bundle that does not build is not read again on every sync: only a source change
// makes the controller look again.
func TestInvalidCABundleIsNotReReadEverySync(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withCABundle("custom-ca", "")),
		configMap(testNamespace, "custom-ca", map[string]string{revision.CABundleKey: "no certificate"}, nil))
	f.sync("app")
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonCABundleInvalid)
	assert.Empty(t, f.sync("app"), "no reads and no writes while nothing changed")

	cert := testcert.CertPEMs(t, 1)[0]
	f.putConfigMap(configMap(testNamespace, "custom-ca", map[string]string{revision.CABundleKey: cert}, nil))
	f.converge("app")
	assert.Equal(t, cert, f.managedCA("app").Data[revision.CABundleKey])
}

// A bundle larger than a ConfigMap can hold is the user's problem, not an apply the API
// server rejects: two sources, each within a ConfigMap's limit, whose certificates
// together are not (found by FuzzCABundle's ConfigMap check).
func TestCABundleTooLargeForConfigMap(t *testing.T) {
	key := testcert.Key(t)
	largeCert := func(serial int64) string {
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(serial),
			Subject:               pkix.Name{CommonName: fmt.Sprintf("large-ca-%d", serial)},
			NotBefore:             time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
			NotAfter:              time.Date(2035, 1, 1, 0, 0, 0, 0, time.UTC),
			IsCA:                  true,
			BasicConstraintsValid: true,
			ExtraExtensions:       []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Value: make([]byte, 400*1024)}},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		require.NoError(t, err)
		return testcert.PEMBlock("CERTIFICATE", der)
	}
	a, b := largeCert(1), largeCert(2)
	require.Less(t, len(a), maxConfigMapBytes)
	_, _, _, err := revision.BuildCABundle([]revision.CASource{{Namespace: "ns", Name: "ca", Data: map[string]string{revision.CABundleKey: a}, Keys: []string{revision.CABundleKey}}, {Namespace: "ns", Name: revision.ODHTrustedCABundle, Data: map[string]string{"b": b}, Optional: true}})
	require.ErrorContains(t, err, "more than the 1048563 a ConfigMap can hold")

	bundle, n, _, err := revision.BuildCABundle([]revision.CASource{{Namespace: "ns", Name: "ca", Data: map[string]string{revision.CABundleKey: a}, Keys: []string{revision.CABundleKey}}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	l := newLLSD("big")
	require.Empty(t, configMapErrors(newCABundleConfigMap(l, bundle, "h")))
}
