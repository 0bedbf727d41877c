package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/klog/v2/ktesting"
)

// TestWebhookServesRealConversions: with --webhook-bind-address and files mode (the
// cert-manager overlay), the controller serves /convert over TLS with the real
// conversion, and is ready once it does.
func TestWebhookServesRealConversions(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dir := t.TempDir()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	o := Options{Workers: 1, QPS: 1, Burst: 1, WebhookBindAddress: addr, WebhookCertMode: WebhookCertModeFiles, WebhookCertDir: dir}
	require.NoError(t, o.Validate())
	ready, stopped, err := startWebhook(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, k8sfake.NewClientset(), o, "llama-stack-controller-system")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return ready() == nil }, 10*time.Second, 50*time.Millisecond)

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(certPEM))
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	obj := `{"apiVersion":"llamastack.io/v1alpha1","kind":"LlamaStackDistribution","metadata":{"name":"a","namespace":"demo","uid":"u1"},` +
		`"spec":{"replicas":2,"server":{"distribution":{"name":"starter"}}}}`
	body, err := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{UID: "r1", DesiredAPIVersion: "llamastack.io/v1alpha2",
			Objects: []runtime.RawExtension{{Raw: []byte(obj)}}},
	})
	require.NoError(t, err)
	resp, err := client.Post("https://"+addr+"/convert", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out apiextensionsv1.ConversionReview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.NotNil(t, out.Response)
	require.Equal(t, metav1.StatusSuccess, out.Response.Result.Status, out.Response.Result.Message)
	var converted map[string]any
	require.NoError(t, json.Unmarshal(out.Response.ConvertedObjects[0].Raw, &converted))
	assert.Equal(t, "llamastack.io/v1alpha2", converted["apiVersion"])
	assert.EqualValues(t, 2, converted["spec"].(map[string]any)["workload"].(map[string]any)["replicas"])

	// Stopped, the webhook has let go of its address: a controller started again in the
	// same process listens on it.
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the webhook did not stop within 10s of its context ending")
	}
	again, err := net.Listen("tcp", addr)
	require.NoError(t, err, "the stopped webhook's address is free")
	require.NoError(t, again.Close())
}
