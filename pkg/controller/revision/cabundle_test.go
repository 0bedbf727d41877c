package revision

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/testcert"
)

func explicitCA(keys []string, data map[string]string) CASource {
	return CASource{Namespace: "ns", Name: "ca", Data: data, Keys: keys}
}

func defaultCAKeys() []string { return []string{CABundleKey} }

func odhCA(data map[string]string) CASource {
	return CASource{Namespace: "ns", Name: ODHTrustedCABundle, Data: data, Optional: true}
}

func TestValidateCAKeys(t *testing.T) {
	cases := []struct {
		name    string
		keys    []string
		wantErr string
	}{
		{name: "none", keys: nil},
		{name: "valid keys", keys: []string{CABundleKey, "tls_ca.pem", "a", "A1", "ca-bundle-2.crt", strings.Repeat("a", 253)}},
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
			err := ValidateCAKeys(tc.keys)
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
	certs := testcert.CertPEMs(t, 3)
	c1, c2, c3 := certs[0], certs[1], certs[2]
	block1, _ := pem.Decode([]byte(c1))
	withHeaders := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Note": "x"}, Bytes: block1.Bytes}))
	publicKey := testcert.PEMBlock("PUBLIC KEY", []byte("not really a key"))
	garbage := testcert.PEMBlock("CERTIFICATE", []byte("garbage"))
	def := defaultCAKeys()

	cases := []struct {
		name         string
		sources      []CASource
		wantBundle   string
		wantCerts    int
		wantWarnings []string // prefixes, in order
		wantErr      string   // exact
	}{
		{name: "no sources"},
		{name: "one certificate",
			sources:    []CASource{explicitCA(def, map[string]string{CABundleKey: c1})},
			wantBundle: c1, wantCerts: 1},
		{name: "several certificates in one key",
			sources:    []CASource{explicitCA(def, map[string]string{CABundleKey: c1 + c2 + c3})},
			wantBundle: c1 + "\n" + c2 + "\n" + c3, wantCerts: 3},
		{name: "explicit keys in the given order",
			sources:    []CASource{explicitCA([]string{"b", "a"}, map[string]string{"a": c1, "b": c2})},
			wantBundle: c2 + "\n" + c1, wantCerts: 2},
		{name: "nil keys read every key in sorted order",
			sources:    []CASource{explicitCA(nil, map[string]string{"z": c1, "a": c2, "m": c3})},
			wantBundle: c2 + "\n" + c3 + "\n" + c1, wantCerts: 3},
		{name: "sources in the given order",
			sources: []CASource{
				explicitCA(def, map[string]string{CABundleKey: c3}),
				odhCA(map[string]string{"b": c1, "a": c2}),
			},
			wantBundle: c3 + "\n" + c2 + "\n" + c1, wantCerts: 3},
		{name: "a whitespace-only key next to a certificate",
			sources:    []CASource{explicitCA([]string{"blank", "ca"}, map[string]string{"blank": " \n\t\n", "ca": c1})},
			wantBundle: c1, wantCerts: 1},
		{name: "explicit whitespace only",
			sources: []CASource{explicitCA(def, map[string]string{CABundleKey: "  \n\n "})},
			wantErr: "no valid certificate found in CA bundle ConfigMap ns/ca (keys read: 'ca-bundle.crt')"},
		{name: "explicit empty value",
			sources: []CASource{explicitCA([]string{"a", "b"}, map[string]string{"a": "", "b": ""})},
			wantErr: "no valid certificate found in CA bundle ConfigMap ns/ca (keys read: 'a', 'b')"},
		{name: "explicit without keys",
			sources: []CASource{explicitCA(nil, map[string]string{})},
			wantErr: "no valid certificate found in CA bundle ConfigMap ns/ca (no keys read)"},
		{name: "optional whitespace only is fine",
			sources: []CASource{odhCA(map[string]string{"a": "", "b": "\n  \n"})}},
		{name: "optional without keys is fine",
			sources: []CASource{odhCA(nil)}},
		{name: "optional without certificates next to explicit ones",
			sources: []CASource{
				odhCA(map[string]string{"a": " "}),
				explicitCA(def, map[string]string{CABundleKey: c1}),
			},
			wantBundle: c1, wantCerts: 1},
		{name: "explicit without certificates next to optional ones",
			sources: []CASource{
				explicitCA(def, map[string]string{CABundleKey: "\n"}),
				odhCA(map[string]string{"a": c1}),
			},
			wantBundle: c1, wantCerts: 1},
		{name: "non-certificate blocks are skipped",
			sources:    []CASource{explicitCA(def, map[string]string{CABundleKey: publicKey + c1 + publicKey})},
			wantBundle: c1, wantCerts: 1},
		{name: "explicit key with only a public key",
			sources: []CASource{explicitCA(def, map[string]string{CABundleKey: publicKey})},
			wantErr: "key 'ca-bundle.crt' of CA bundle ConfigMap ns/ca: it holds no PEM certificate"},
		{name: "explicit key with plain text",
			sources: []CASource{explicitCA(def, map[string]string{CABundleKey: "hello"})},
			wantErr: "key 'ca-bundle.crt' of CA bundle ConfigMap ns/ca: it holds no PEM certificate"},
		{name: "optional key with only a public key is skipped",
			sources:    []CASource{odhCA(map[string]string{"pub": publicKey, "ca": c1})},
			wantBundle: c1, wantCerts: 1,
			wantWarnings: []string{"key 'pub' of CA bundle ConfigMap ns/odh-trusted-ca-bundle: it holds no PEM certificate"}},
		{name: "explicit garbage in a certificate block",
			sources: []CASource{explicitCA(def, map[string]string{CABundleKey: garbage})},
			wantErr: "key 'ca-bundle.crt' of CA bundle ConfigMap ns/ca: certificate 1 does not parse: "},
		{name: "explicit garbage after a good certificate",
			sources: []CASource{explicitCA([]string{"x.crt"}, map[string]string{"x.crt": c1 + garbage})},
			wantErr: "key 'x.crt' of CA bundle ConfigMap ns/ca: certificate 2 does not parse: "},
		{name: "optional garbage is skipped with a warning",
			sources:    []CASource{odhCA(map[string]string{"a": garbage, "b": c1, "c": c2 + garbage})},
			wantBundle: c1, wantCerts: 1,
			wantWarnings: []string{
				"key 'a' of CA bundle ConfigMap ns/odh-trusted-ca-bundle: certificate 1 does not parse: ",
				"key 'c' of CA bundle ConfigMap ns/odh-trusted-ca-bundle: certificate 2 does not parse: ",
			}},
		{name: "text around blocks is ignored",
			sources:    []CASource{explicitCA(def, map[string]string{CABundleKey: "# corporate CA\n" + c1 + "trailing text\n"})},
			wantBundle: c1, wantCerts: 1},
		{name: "CRLF line endings",
			sources:    []CASource{explicitCA(def, map[string]string{CABundleKey: strings.ReplaceAll(c1, "\n", "\r\n")})},
			wantBundle: c1, wantCerts: 1},
		{name: "headers are dropped",
			sources:    []CASource{explicitCA(def, map[string]string{CABundleKey: withHeaders})},
			wantBundle: c1, wantCerts: 1},
		{name: "duplicates in one key are removed",
			sources:    []CASource{explicitCA(def, map[string]string{CABundleKey: c1 + c2 + c1 + withHeaders})},
			wantBundle: c1 + "\n" + c2, wantCerts: 2},
		{name: "duplicates across keys and sources are removed, first place kept",
			sources: []CASource{
				odhCA(map[string]string{"a": c2, "b": c1}),
				explicitCA([]string{"x", "y"}, map[string]string{"x": c1 + c3, "y": c2}),
			},
			wantBundle: c2 + "\n" + c1 + "\n" + c3, wantCerts: 3},
		{name: "explicit key missing",
			sources: []CASource{explicitCA([]string{"a", "zz"}, map[string]string{"a": c1})},
			wantErr: "CA bundle ConfigMap ns/ca has no key 'zz'"},
		{name: "optional key missing is skipped",
			sources: []CASource{{Namespace: "ns", Name: ODHTrustedCABundle, Optional: true,
				Keys: []string{"zz", "a"}, Data: map[string]string{"a": c1}}},
			wantBundle: c1, wantCerts: 1,
			wantWarnings: []string{"CA bundle ConfigMap ns/odh-trusted-ca-bundle has no key 'zz'"}},
		{name: "errors of explicit sources keep the warnings so far",
			sources: []CASource{
				odhCA(map[string]string{"a": publicKey}),
				explicitCA(def, map[string]string{CABundleKey: garbage}),
			},
			wantWarnings: []string{"key 'a' of CA bundle ConfigMap ns/odh-trusted-ca-bundle: it holds no PEM certificate"},
			wantErr:      "key 'ca-bundle.crt' of CA bundle ConfigMap ns/ca: certificate 1 does not parse: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bundle, n, warnings, err := BuildCABundle(tc.sources)
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
				again, m, _, err := BuildCABundle([]CASource{explicitCA(def, map[string]string{CABundleKey: bundle})})
				require.NoError(t, err)
				assert.Equal(t, bundle, again)
				assert.Equal(t, n, m)
			}
		})
	}
}

func TestBuildCABundleCertificateLimit(t *testing.T) {
	certs := testcert.CertPEMs(t, maxCABundleCerts+1)
	limit := "the CA bundle holds more than the maximum of 1000 certificates"

	bundle, n, _, err := BuildCABundle([]CASource{explicitCA(nil, map[string]string{
		"a": strings.Join(certs[:maxCABundleCerts], ""),
		"b": certs[0] + certs[maxCABundleCerts-1], // duplicates do not count
	})})
	require.NoError(t, err)
	assert.Equal(t, maxCABundleCerts, n)
	assert.Equal(t, strings.Join(certs[:maxCABundleCerts], "\n"), bundle)

	_, _, _, err = BuildCABundle([]CASource{explicitCA(defaultCAKeys(), map[string]string{CABundleKey: strings.Join(certs, "")})})
	assert.EqualError(t, err, limit)

	// The limit is across sources, optional ones included.
	_, _, warnings, err := BuildCABundle([]CASource{
		explicitCA(defaultCAKeys(), map[string]string{CABundleKey: strings.Join(certs[:600], "")}),
		odhCA(map[string]string{"a": strings.Join(certs[600:], "")}),
	})
	assert.EqualError(t, err, limit)
	assert.Empty(t, warnings)
}

// The size limit counts the length of every value read, certificates or not, summed
// across keys and sources; padding with blanks reaches it without building certificates.
func TestBuildCABundleSizeLimit(t *testing.T) {
	c1 := testcert.CertPEMs(t, 1)[0]
	limit := "the CA bundle sources hold more than the maximum of 10485760 bytes"
	require.Equal(t, 10485760, maxCABundleBytes)

	padded := c1 + strings.Repeat(" ", maxCABundleBytes-len(c1))
	bundle, n, _, err := BuildCABundle([]CASource{explicitCA(defaultCAKeys(), map[string]string{CABundleKey: padded})})
	require.NoError(t, err, "exactly the limit is allowed")
	assert.Equal(t, c1, bundle)
	assert.Equal(t, 1, n)

	_, _, _, err = BuildCABundle([]CASource{explicitCA(defaultCAKeys(), map[string]string{CABundleKey: padded + "\n"})})
	assert.EqualError(t, err, limit)

	half := strings.Repeat("\n", maxCABundleBytes/2)
	_, _, _, err = BuildCABundle([]CASource{
		explicitCA(defaultCAKeys(), map[string]string{CABundleKey: c1}),
		odhCA(map[string]string{"a": half, "b": half}),
	})
	assert.EqualError(t, err, limit, "summed across keys and sources")

	// Keys not read do not count.
	bundle, _, _, err = BuildCABundle([]CASource{explicitCA(defaultCAKeys(), map[string]string{CABundleKey: c1, "other": padded + padded})})
	require.NoError(t, err)
	assert.Equal(t, c1, bundle)
}

func TestBuildCABundleIsDeterministic(t *testing.T) {
	certs := testcert.CertPEMs(t, 20)
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
			bundle, n, _, err := BuildCABundle([]CASource{odhCA(data), explicitCA(nil, data)})
			require.NoError(t, err)
			assert.Equal(t, len(certs), n)
			require.Equal(t, want, bundle)
		}
	}
}

func TestCABundlePaths(t *testing.T) {
	assert.Equal(t, "/etc/ssl/certs/ca-bundle/ca-bundle.crt", CABundleFile)
}
