package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/wait"
)

// startServer serves h with src on a free loopback port until the test ends.
func startServer(t *testing.T, ctx context.Context, src CertificateSource, h http.Handler, f *fixture) (*Server, <-chan error) {
	t.Helper()
	srv, err := NewServer(ServerOptions{BindAddress: "127.0.0.1:0", Certificates: src, Handler: h, Clock: f.clock})
	require.NoError(t, err)
	require.ErrorContains(t, srv.Ready(), "the conversion webhook is not serving")
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return srv, done
}

// apiServerClient trusts the CRD's caBundle, as the API server does, and checks the
// certificate at the fixture's time. Each request makes a new connection.
func (f *fixture) apiServerClient(serverName string, maxVersion uint16) *http.Client {
	var minVersion uint16
	if maxVersion != 0 {
		minVersion = tls.VersionTLS10
	}
	roots := x509.NewCertPool()
	for _, ca := range f.caBundle() {
		roots.AddCert(ca)
	}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: serverName, Time: f.clock.Now, MinVersion: minVersion, MaxVersion: maxVersion},
		},
	}
}

// convertOverTLS posts a review of one v1alpha1 object and returns the served
// certificate and the converted object.
func convertOverTLS(t *testing.T, c *http.Client, srv *Server) (*x509.Certificate, *unstructured.Unstructured) {
	t.Helper()
	body := reviewJSON("tls-1", "llamastack.io/v1alpha2", llsdJSON("llamastack.io/v1alpha1", "a"))
	resp, err := c.Post("https://"+srv.Addr().String()+ConvertPath, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "HTTP/1.1", resp.Proto, "no HTTP/2")
	require.GreaterOrEqual(t, resp.TLS.Version, uint16(tls.VersionTLS12))
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var review apiextensionsv1.ConversionReview
	require.NoError(t, json.Unmarshal(data, &review))
	require.Equal(t, "tls-1", string(review.Response.UID))
	require.Equal(t, metav1.StatusSuccess, review.Response.Result.Status, review.Response.Result.Message)
	require.Len(t, review.Response.ConvertedObjects, 1)
	obj := &unstructured.Unstructured{}
	require.NoError(t, obj.UnmarshalJSON(review.Response.ConvertedObjects[0].Raw))
	return resp.TLS.PeerCertificates[0], obj
}

// TestServingOverTLSAndRenewingWithoutRestart: a client that trusts the CRD's caBundle
// converts through /convert over TLS; when the certificate is renewed, the same server
// serves the new one from the next connection on.
func TestServingOverTLSAndRenewingWithoutRestart(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	m := f.replica(true)
	f.sync(m)
	srv, done := startServer(t, f.ctx, m, newTestHandler(t, stubConverter, 0), f)
	require.NoError(t, wait.PollUntilContextTimeout(f.ctx, time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return srv.Ready() == nil, nil }))

	for _, name := range []string{"webhook.system.svc", "localhost", ""} { // "" checks the IP address
		served, obj := convertOverTLS(t, f.apiServerClient(name, 0), srv)
		require.Equal(t, m.Certificate().Leaf.SerialNumber, served.SerialNumber)
		require.Equal(t, "llamastack.io/v1alpha2", obj.GetAPIVersion())
		require.Equal(t, "llamastack.io/v1alpha1", obj.GetAnnotations()["test/converted-from"])
	}
	first := m.Certificate().Leaf
	f.writes()

	f.clock.SetTime(renewAt(first))
	f.sync(m)
	require.Equal(t, []string{"update secrets"}, f.writes())
	served, _ := convertOverTLS(t, f.apiServerClient("webhook.system.svc", 0), srv)
	require.NotEqual(t, first.SerialNumber, served.SerialNumber, "the renewed certificate is served")
	require.Equal(t, m.Certificate().Leaf.SerialNumber, served.SerialNumber)
	require.NoError(t, srv.Ready())

	// Past the certificate's end, without a renewal, the replica is not ready.
	f.clock.SetTime(m.Certificate().Leaf.NotAfter)
	require.ErrorContains(t, srv.Ready(), "certificate is valid from")
	select {
	case err := <-done:
		t.Fatalf("the server stopped: %v", err)
	default:
	}
}

func TestServerRefusesTLS11(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	m := f.replica(true)
	f.sync(m)
	srv, _ := startServer(t, f.ctx, m, newTestHandler(t, stubConverter, 0), f)
	_, err := f.apiServerClient("localhost", tls.VersionTLS11).Post("https://"+srv.Addr().String()+ConvertPath, "application/json", strings.NewReader("{}"))
	require.ErrorContains(t, err, "protocol version")
}

type noCertificate struct{}

func (noCertificate) Certificate() *tls.Certificate { return nil }

func TestServerWithoutACertificateIsNotReady(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	m := f.replica(true)
	f.sync(m) // for the client's roots only
	srv, _ := startServer(t, f.ctx, noCertificate{}, newTestHandler(t, stubConverter, 0), f)
	require.NoError(t, wait.PollUntilContextTimeout(f.ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(srv.Ready().Error(), "no serving certificate yet"), nil
	}))
	_, err := f.apiServerClient("localhost", 0).Post("https://"+srv.Addr().String()+ConvertPath, "application/json", strings.NewReader("{}"))
	require.Error(t, err, "no handshake without a certificate")
}

func TestServerStopsWithItsContext(t *testing.T) {
	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	m := f.replica(true)
	f.sync(m)
	srv, err := NewServer(ServerOptions{BindAddress: "127.0.0.1:0", Certificates: m, Handler: http.NotFoundHandler(), Clock: f.clock})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	require.NoError(t, wait.PollUntilContextTimeout(f.ctx, time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return srv.Ready() == nil, nil }))
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop")
	}
	require.ErrorContains(t, srv.Ready(), "not serving")

	_, err = NewServer(ServerOptions{BindAddress: "127.0.0.1:0"})
	require.ErrorContains(t, err, "a certificate source and a handler are required")
	_, err = NewServer(ServerOptions{BindAddress: "256.0.0.1:0", Certificates: m, Handler: http.NotFoundHandler()})
	require.ErrorContains(t, err, "serving the conversion webhook on 256.0.0.1:0")
}
