package controller

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// testCAKey signs every test certificate: one key keeps generating a thousand certificates quick.
var testCAKey = sync.OnceValues(func() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
})

// testCertPEMs returns n distinct self-signed CA certificates (serials 1..n), PEM-encoded.
func testCertPEMs(t testing.TB, n int) []string {
	t.Helper()
	key, err := testCAKey()
	require.NoError(t, err)
	out := make([]string, n)
	for i := range out {
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(int64(i + 1)),
			Subject:               pkix.Name{CommonName: fmt.Sprintf("test-ca-%d", i+1)},
			NotBefore:             time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
			NotAfter:              time.Date(2035, 1, 1, 0, 0, 0, 0, time.UTC),
			IsCA:                  true,
			BasicConstraintsValid: true,
			KeyUsage:              x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		require.NoError(t, err)
		out[i] = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	return out
}

func pemBlock(typ string, body []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: body}))
}

func explicitCA(keys []string, data map[string]string) caSource {
	return caSource{Namespace: "ns", Name: "ca", Data: data, Keys: keys}
}

func defaultCAKeys() []string { return []string{revision.CABundleKey} }

func odhCA(data map[string]string) caSource {
	return caSource{Namespace: "ns", Name: odhTrustedCABundle, Data: data, Optional: true}
}

func TestValidateCAKeys(t *testing.T) {
	cases := []struct {
		name    string
		keys    []string
		wantErr string
	}{
		{name: "none", keys: nil},
		{name: "valid keys", keys: []string{revision.CABundleKey, "tls_ca.pem", "a", "A1", "ca-bundle-2.crt", strings.Repeat("a", 253)}},
		{name: "empty", keys: []string{""}, wantErr: "a CA bundle ConfigMap key is empty"},
		{name: "254 characters", keys: []string{strings.Repeat("a", 254)},
			wantErr: "CA bundle ConfigMap key '" + strings.Repeat("a", 254) + "' is too long (at most 253 characters)"},
		{name: "parent path", keys: []string{"../x"}, wantErr: "CA bundle ConfigMap key '../x' contains invalid path characters ('..' or '/')"},
		{name: "slash", keys: []string{"a/b"}, wantErr: "CA bundle ConfigMap key 'a/b' contains invalid path characters ('..' or '/')"},
		{name: "double dot inside", keys: []string{"a..b"}, wantErr: "CA bundle ConfigMap key 'a..b' contains invalid path characters ('..' or '/')"},
		{name: "semicolon", keys: []string{"a;b"},
			wantErr: "CA bundle ConfigMap key 'a;b' contains invalid characters: only alphanumerics, hyphens, underscores and dots are allowed, and it must start and end with an alphanumeric"},
		{name: "pipe", keys: []string{"a|b"}, wantErr: "CA bundle ConfigMap key 'a|b' contains invalid characters"},
		{name: "command substitution", keys: []string{"$(id)"}, wantErr: "CA bundle ConfigMap key '$(id)' contains invalid characters"},
		{name: "space", keys: []string{"a b"}, wantErr: "CA bundle ConfigMap key 'a b' contains invalid characters"},
		{name: "starts with a hyphen", keys: []string{"-a"}, wantErr: "CA bundle ConfigMap key '-a' contains invalid characters"},
		{name: "ends with a dot", keys: []string{"a."}, wantErr: "CA bundle ConfigMap key 'a.' contains invalid characters"},
		{name: "first bad key is reported", keys: []string{"ok.crt", "a/b", ";"}, wantErr: "CA bundle ConfigMap key 'a/b' contains invalid path characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := validateCAKeys(tc.keys)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), tc.wantErr), "got %q", err)
			assert.NotContains(t, err.Error(), "failed to")
		})
	}
}

func TestBuildCABundle(t *testing.T) {
	certs := testCertPEMs(t, 3)
	c1, c2, c3 := certs[0], certs[1], certs[2]
	block1, _ := pem.Decode([]byte(c1))
	withHeaders := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Note": "x"}, Bytes: block1.Bytes}))
	publicKey := pemBlock("PUBLIC KEY", []byte("not really a key"))
	garbage := pemBlock("CERTIFICATE", []byte("garbage"))
	def := defaultCAKeys()

	cases := []struct {
		name         string
		sources      []caSource
		wantBundle   string
		wantCerts    int
		wantWarnings []string // prefixes, in order
		wantErr      string   // exact
	}{
		{name: "no sources"},
		{name: "one certificate",
			sources:    []caSource{explicitCA(def, map[string]string{revision.CABundleKey: c1})},
			wantBundle: c1, wantCerts: 1},
		{name: "several certificates in one key",
			sources:    []caSource{explicitCA(def, map[string]string{revision.CABundleKey: c1 + c2 + c3})},
			wantBundle: c1 + "\n" + c2 + "\n" + c3, wantCerts: 3},
		{name: "explicit keys in the given order",
			sources:    []caSource{explicitCA([]string{"b", "a"}, map[string]string{"a": c1, "b": c2})},
			wantBundle: c2 + "\n" + c1, wantCerts: 2},
		{name: "nil keys read every key in sorted order",
			sources:    []caSource{explicitCA(nil, map[string]string{"z": c1, "a": c2, "m": c3})},
			wantBundle: c2 + "\n" + c3 + "\n" + c1, wantCerts: 3},
		{name: "sources in the given order",
			sources: []caSource{
				explicitCA(def, map[string]string{revision.CABundleKey: c3}),
				odhCA(map[string]string{"b": c1, "a": c2}),
			},
			wantBundle: c3 + "\n" + c2 + "\n" + c1, wantCerts: 3},
		{name: "a whitespace-only key next to a certificate",
			sources:    []caSource{explicitCA([]string{"blank", "ca"}, map[string]string{"blank": " \n\t\n", "ca": c1})},
			wantBundle: c1, wantCerts: 1},
		{name: "explicit whitespace only",
			sources: []caSource{explicitCA(def, map[string]string{revision.CABundleKey: "  \n\n "})},
			wantErr: "no valid certificate found in CA bundle ConfigMap ns/ca (keys read: 'ca-bundle.crt')"},
		{name: "explicit empty value",
			sources: []caSource{explicitCA([]string{"a", "b"}, map[string]string{"a": "", "b": ""})},
			wantErr: "no valid certificate found in CA bundle ConfigMap ns/ca (keys read: 'a', 'b')"},
		{name: "explicit without keys",
			sources: []caSource{explicitCA(nil, map[string]string{})},
			wantErr: "no valid certificate found in CA bundle ConfigMap ns/ca (no keys read)"},
		{name: "optional whitespace only is fine",
			sources: []caSource{odhCA(map[string]string{"a": "", "b": "\n  \n"})}},
		{name: "optional without keys is fine",
			sources: []caSource{odhCA(nil)}},
		{name: "optional without certificates next to explicit ones",
			sources: []caSource{
				odhCA(map[string]string{"a": " "}),
				explicitCA(def, map[string]string{revision.CABundleKey: c1}),
			},
			wantBundle: c1, wantCerts: 1},
		{name: "explicit without certificates next to optional ones",
			sources: []caSource{
				explicitCA(def, map[string]string{revision.CABundleKey: "\n"}),
				odhCA(map[string]string{"a": c1}),
			},
			wantBundle: c1, wantCerts: 1},
		{name: "non-certificate blocks are skipped",
			sources:    []caSource{explicitCA(def, map[string]string{revision.CABundleKey: publicKey + c1 + publicKey})},
			wantBundle: c1, wantCerts: 1},
		{name: "explicit key with only a public key",
			sources: []caSource{explicitCA(def, map[string]string{revision.CABundleKey: publicKey})},
			wantErr: "key 'ca-bundle.crt' of CA bundle ConfigMap ns/ca: it holds no PEM certificate"},
		{name: "explicit key with plain text",
			sources: []caSource{explicitCA(def, map[string]string{revision.CABundleKey: "hello"})},
			wantErr: "key 'ca-bundle.crt' of CA bundle ConfigMap ns/ca: it holds no PEM certificate"},
		{name: "optional key with only a public key is skipped",
			sources:    []caSource{odhCA(map[string]string{"pub": publicKey, "ca": c1})},
			wantBundle: c1, wantCerts: 1,
			wantWarnings: []string{"key 'pub' of CA bundle ConfigMap ns/odh-trusted-ca-bundle: it holds no PEM certificate"}},
		{name: "explicit garbage in a certificate block",
			sources: []caSource{explicitCA(def, map[string]string{revision.CABundleKey: garbage})},
			wantErr: "key 'ca-bundle.crt' of CA bundle ConfigMap ns/ca: certificate 1 does not parse: "},
		{name: "explicit garbage after a good certificate",
			sources: []caSource{explicitCA([]string{"x.crt"}, map[string]string{"x.crt": c1 + garbage})},
			wantErr: "key 'x.crt' of CA bundle ConfigMap ns/ca: certificate 2 does not parse: "},
		{name: "optional garbage is skipped with a warning",
			sources:    []caSource{odhCA(map[string]string{"a": garbage, "b": c1, "c": c2 + garbage})},
			wantBundle: c1, wantCerts: 1,
			wantWarnings: []string{
				"key 'a' of CA bundle ConfigMap ns/odh-trusted-ca-bundle: certificate 1 does not parse: ",
				"key 'c' of CA bundle ConfigMap ns/odh-trusted-ca-bundle: certificate 2 does not parse: ",
			}},
		{name: "text around blocks is ignored",
			sources:    []caSource{explicitCA(def, map[string]string{revision.CABundleKey: "# corporate CA\n" + c1 + "trailing text\n"})},
			wantBundle: c1, wantCerts: 1},
		{name: "CRLF line endings",
			sources:    []caSource{explicitCA(def, map[string]string{revision.CABundleKey: strings.ReplaceAll(c1, "\n", "\r\n")})},
			wantBundle: c1, wantCerts: 1},
		{name: "headers are dropped",
			sources:    []caSource{explicitCA(def, map[string]string{revision.CABundleKey: withHeaders})},
			wantBundle: c1, wantCerts: 1},
		{name: "duplicates in one key are removed",
			sources:    []caSource{explicitCA(def, map[string]string{revision.CABundleKey: c1 + c2 + c1 + withHeaders})},
			wantBundle: c1 + "\n" + c2, wantCerts: 2},
		{name: "duplicates across keys and sources are removed, first place kept",
			sources: []caSource{
				odhCA(map[string]string{"a": c2, "b": c1}),
				explicitCA([]string{"x", "y"}, map[string]string{"x": c1 + c3, "y": c2}),
			},
			wantBundle: c2 + "\n" + c1 + "\n" + c3, wantCerts: 3},
		{name: "explicit key missing",
			sources: []caSource{explicitCA([]string{"a", "zz"}, map[string]string{"a": c1})},
			wantErr: "CA bundle ConfigMap ns/ca has no key 'zz'"},
		{name: "optional key missing is skipped",
			sources: []caSource{{Namespace: "ns", Name: odhTrustedCABundle, Optional: true,
				Keys: []string{"zz", "a"}, Data: map[string]string{"a": c1}}},
			wantBundle: c1, wantCerts: 1,
			wantWarnings: []string{"CA bundle ConfigMap ns/odh-trusted-ca-bundle has no key 'zz'"}},
		{name: "errors of explicit sources keep the warnings so far",
			sources: []caSource{
				odhCA(map[string]string{"a": publicKey}),
				explicitCA(def, map[string]string{revision.CABundleKey: garbage}),
			},
			wantWarnings: []string{"key 'a' of CA bundle ConfigMap ns/odh-trusted-ca-bundle: it holds no PEM certificate"},
			wantErr:      "key 'ca-bundle.crt' of CA bundle ConfigMap ns/ca: certificate 1 does not parse: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bundle, n, warnings, err := buildCABundle(tc.sources)
			require.Len(t, warnings, len(tc.wantWarnings), "warnings: %q", warnings)
			for i, w := range tc.wantWarnings {
				assert.True(t, strings.HasPrefix(warnings[i], w), "warning %d: got %q, want prefix %q", i, warnings[i], w)
			}
			if tc.wantErr != "" {
				require.Error(t, err)
				if strings.HasSuffix(tc.wantErr, ": ") {
					assert.True(t, strings.HasPrefix(err.Error(), tc.wantErr), "got %q", err)
				} else {
					assert.EqualError(t, err, tc.wantErr)
				}
				assert.NotContains(t, err.Error(), "failed to")
				assert.Empty(t, bundle)
				assert.Zero(t, n)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantBundle, bundle)
			assert.Equal(t, tc.wantCerts, n)
			if bundle != "" {
				assert.True(t, strings.HasSuffix(bundle, "-----END CERTIFICATE-----\n"), "bundle ends with one newline")
				assert.Equal(t, n, strings.Count(bundle, "-----BEGIN CERTIFICATE-----"))
				pool := x509.NewCertPool()
				assert.True(t, pool.AppendCertsFromPEM([]byte(bundle)))
				// The bundle read back is itself.
				again, m, _, err := buildCABundle([]caSource{explicitCA(def, map[string]string{revision.CABundleKey: bundle})})
				require.NoError(t, err)
				assert.Equal(t, bundle, again)
				assert.Equal(t, n, m)
			}
		})
	}
}

func TestBuildCABundleCertificateLimit(t *testing.T) {
	certs := testCertPEMs(t, maxCABundleCerts+1)
	limit := "the CA bundle holds more than the maximum of 1000 certificates"

	bundle, n, _, err := buildCABundle([]caSource{explicitCA(nil, map[string]string{
		"a": strings.Join(certs[:maxCABundleCerts], ""),
		"b": certs[0] + certs[maxCABundleCerts-1], // duplicates do not count
	})})
	require.NoError(t, err)
	assert.Equal(t, maxCABundleCerts, n)
	assert.Equal(t, strings.Join(certs[:maxCABundleCerts], "\n"), bundle)

	_, _, _, err = buildCABundle([]caSource{explicitCA(defaultCAKeys(), map[string]string{revision.CABundleKey: strings.Join(certs, "")})})
	assert.EqualError(t, err, limit)

	// The limit is across sources, optional ones included.
	_, _, warnings, err := buildCABundle([]caSource{
		explicitCA(defaultCAKeys(), map[string]string{revision.CABundleKey: strings.Join(certs[:600], "")}),
		odhCA(map[string]string{"a": strings.Join(certs[600:], "")}),
	})
	assert.EqualError(t, err, limit)
	assert.Empty(t, warnings)
}

// The size limit counts the length of every value read, certificates or not, summed
// across keys and sources; padding with blanks reaches it without building certificates.
func TestBuildCABundleSizeLimit(t *testing.T) {
	c1 := testCertPEMs(t, 1)[0]
	limit := "the CA bundle sources hold more than the maximum of 10485760 bytes"
	require.Equal(t, 10485760, maxCABundleBytes)

	padded := c1 + strings.Repeat(" ", maxCABundleBytes-len(c1))
	bundle, n, _, err := buildCABundle([]caSource{explicitCA(defaultCAKeys(), map[string]string{revision.CABundleKey: padded})})
	require.NoError(t, err, "exactly the limit is allowed")
	assert.Equal(t, c1, bundle)
	assert.Equal(t, 1, n)

	_, _, _, err = buildCABundle([]caSource{explicitCA(defaultCAKeys(), map[string]string{revision.CABundleKey: padded + "\n"})})
	assert.EqualError(t, err, limit)

	half := strings.Repeat("\n", maxCABundleBytes/2)
	_, _, _, err = buildCABundle([]caSource{
		explicitCA(defaultCAKeys(), map[string]string{revision.CABundleKey: c1}),
		odhCA(map[string]string{"a": half, "b": half}),
	})
	assert.EqualError(t, err, limit, "summed across keys and sources")

	// Keys not read do not count.
	bundle, _, _, err = buildCABundle([]caSource{explicitCA(defaultCAKeys(), map[string]string{revision.CABundleKey: c1, "other": padded + padded})})
	require.NoError(t, err)
	assert.Equal(t, c1, bundle)
}

func TestBuildCABundleIsDeterministic(t *testing.T) {
	certs := testCertPEMs(t, 20)
	keys := make([]string, len(certs))
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%02d", i)
	}
	forward, backward := map[string]string{}, map[string]string{}
	for i := range certs {
		forward[keys[i]] = certs[i]
		j := len(certs) - 1 - i
		backward[keys[j]] = certs[j]
	}
	want := strings.Join(certs, "\n")
	for range 20 {
		for _, data := range []map[string]string{forward, backward} {
			bundle, n, _, err := buildCABundle([]caSource{odhCA(data), explicitCA(nil, data)})
			require.NoError(t, err)
			assert.Equal(t, len(certs), n)
			require.Equal(t, want, bundle)
		}
	}
}

func TestCABundlePaths(t *testing.T) {
	assert.Equal(t, "/etc/ssl/certs/ca-bundle/ca-bundle.crt", revision.CABundleFile)
}

// A bundle larger than a ConfigMap can hold is the user's problem, not an apply the API
// server rejects: two sources, each within a ConfigMap's limit, whose certificates
// together are not (found by FuzzCABundle's ConfigMap check).
func TestCABundleTooLargeForConfigMap(t *testing.T) {
	key, err := testCAKey()
	require.NoError(t, err)
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
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	a, b := largeCert(1), largeCert(2)
	require.Less(t, len(a), maxConfigMapBytes)
	_, _, _, err = buildCABundle([]caSource{explicitCA(defaultCAKeys(), map[string]string{revision.CABundleKey: a}), odhCA(map[string]string{"b": b})})
	require.ErrorContains(t, err, "more than the 1048563 a ConfigMap can hold")

	bundle, n, _, err := buildCABundle([]caSource{explicitCA(defaultCAKeys(), map[string]string{revision.CABundleKey: a})})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	l := newLLSD("big")
	require.Empty(t, configMapErrors(newCABundleConfigMap(l, bundle, "h")))
}
