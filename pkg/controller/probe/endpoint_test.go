package probe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// countingLimiter lets every request through and counts them.
type countingLimiter struct{ waits atomic.Int64 }

func (l *countingLimiter) TryAccept() bool { return true }
func (l *countingLimiter) Accept()         {}
func (l *countingLimiter) Stop()           {}
func (l *countingLimiter) QPS() float32    { return 1 }
func (l *countingLimiter) Wait(context.Context) error {
	l.waits.Add(1)
	return nil
}

// Probes through the API server's service proxy wait on the rate limiter they are given
// (the Kubernetes client's).
func TestProxyProbesAreRateLimited(t *testing.T) {
	f := healthyServer(nil)
	limiter := &countingLimiter{}
	ep := proxyEndpointFor(t, f, limiter)

	info := (&serverClient{timeout: 2 * time.Second}).probe(context.Background(), ep)

	require.True(t, info.Healthy, info.HealthMessage)
	assert.Equal(t, int64(3), limiter.waits.Load(), "health, version and providers each wait on the limiter")
	for _, path := range []string{"/v1/health", "/v1/version", "/v1/providers"} {
		assert.Equal(t, 1, f.count(path), path)
	}
}

// A limiter that would make a probe wait past its timeout is reported as such.
func TestProxyProbeRefusedByTheRateLimiter(t *testing.T) {
	f := healthyServer(nil)
	// One request a minute, and the only token already taken.
	limiter := flowcontrol.NewTokenBucketRateLimiter(1.0/60, 1)
	require.True(t, limiter.TryAccept())
	ep := proxyEndpointFor(t, f, limiter)

	info := (&serverClient{timeout: time.Second}).probe(context.Background(), ep)

	assert.False(t, info.Healthy)
	assert.Equal(t, "health check not sent: the controller's API client rate limit would delay it past the timeout", info.HealthMessage)
	assert.Zero(t, f.count("/v1/health"))
}

// Get reports the server's status code, whatever the body, and at most maxServerBody
// bytes of body, in both modes. (The body of an error code is not read by the probes,
// and not checked here.)
func TestServerEndpointGet(t *testing.T) {
	apiStatus := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
		`"message":"no endpoints available for service \"demo-service\"","reason":"ServiceUnavailable","code":503}`
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		wantCode int
		wantBody string
		wantErr  error
		// wantLen checks the body's length instead of wantBody.
		wantLen int
	}{
		{name: "200 JSON", handler: reply(http.StatusOK, `{"status":"OK"}`), wantCode: 200, wantBody: `{"status":"OK"}`},
		{name: "200 text", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("hello"))
		}, wantCode: 200, wantBody: "hello"},
		{name: "204", handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }, wantCode: 204},
		{name: "404 text", handler: http.NotFound, wantCode: 404},
		{name: "503 JSON", handler: reply(http.StatusServiceUnavailable, `{"status":"Error"}`), wantCode: 503},
		{name: "503 API Status", handler: reply(http.StatusServiceUnavailable, apiStatus), wantCode: 503},
		{name: "500 empty", handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }, wantCode: 500},
		{name: "429 with Retry-After is not retried", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}, wantCode: 429},
		{name: "body of the limit", handler: reply(http.StatusOK, strings.Repeat("x", maxServerBody)), wantCode: 200, wantLen: maxServerBody},
		{name: "body over the limit", handler: reply(http.StatusOK, strings.Repeat("x", maxServerBody+1)), wantCode: 200, wantErr: errBodyTooLarge},
	}
	for _, tt := range tests {
		for _, m := range probeModes {
			t.Run(tt.name+"/"+m.name, func(t *testing.T) {
				var requests atomic.Int64
				ep := m.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					requests.Add(1)
					assert.Equal(t, "/v1/x", r.URL.Path)
					tt.handler(w, r)
				}))
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()

				code, body, err := ep.Get(ctx, "/v1/x")

				assert.Equal(t, int64(1), requests.Load(), "one request")
				assert.Equal(t, tt.wantCode, code)
				if tt.wantErr != nil {
					assert.True(t, errors.Is(err, tt.wantErr), "err %v", err)
					return
				}
				require.NoError(t, err)
				switch {
				case code/100 != 2:
				case tt.wantLen > 0:
					assert.Len(t, body, tt.wantLen)
				default:
					assert.Equal(t, tt.wantBody, string(body))
				}
			})
		}
	}
}

// The endpoints name the server they reach, for the log.
func TestServerEndpointNames(t *testing.T) {
	assert.Equal(t, "http://demo-service.ns.svc:8321", ServiceEndpoints(nil)(proxiedService, nil).(interface{ String() string }).String())
	proxied, err := ProxyEndpoints(&rest.Config{Host: "https://127.0.0.1:6443"}, nil)
	require.NoError(t, err)
	assert.Equal(t, proxyPrefix, proxied(proxiedService, nil).(interface{ String() string }).String())
}

// TestProxyRefusalIsStable: the API server picks a random endpoint per proxied request;
// the message must not change with it, or every probe would rewrite the status.
func TestProxyRefusalIsStable(t *testing.T) {
	ep := &proxyEndpoint{namespace: "demo", service: "app-service", port: 8321}
	status := func(addr string) []byte {
		return []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"error trying to reach service: dial tcp ` + addr + `: i/o timeout","code":503}`)
	}
	first := ep.proxyRefusal(503, status("10.244.0.1:8321"))
	assert.Equal(t, first, ep.proxyRefusal(503, status("10.244.3.17:8321")))
	assert.Equal(t, first, ep.proxyRefusal(503, status("[fd00::1:2]:8321")))
	assert.NotContains(t, first, "10.244")
}

// TestProxyRefusalIsExplained: a non-2xx answer through the API server's service proxy
// names the proxy and its words (under make run the API server cannot reach pods on
// kwok's fake nodes, and refuses with a plain-text 403); direct probes say only the code.
func TestProxyRefusalIsExplained(t *testing.T) {
	apiStatus := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
		`"message":"error trying to reach service: dial tcp 10.244.0.1:8321: i/o timeout","reason":"ServiceUnavailable","code":503}`
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    []string
	}{
		{"plain-text 403", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte("resolve_deny: denied destination\n"))
		}, []string{"HTTP 403 through the API server's service proxy: resolve_deny: denied destination", "make run"}},
		{"API Status 503", reply(http.StatusServiceUnavailable, apiStatus),
			[]string{"HTTP 503 through the API server's service proxy: error trying to reach service: dial tcp <pod address>: i/o timeout (if the API server"}},
		{"plain text with a request id", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("upstream failed, request 8f1c2"))
		}, []string{"HTTP 502 through the API server's service proxy (if"}},
		{"server's own JSON 500", reply(http.StatusInternalServerError, `{"detail":"boom"}`),
			[]string{"HTTP 500 through the API server's service proxy (if"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &serverClient{timeout: 5 * time.Second}
			healthy, msg := client.health(context.Background(), proxyEndpointFor(t, tt.handler, nil))
			assert.False(t, healthy)
			for _, w := range tt.want {
				assert.Contains(t, msg, w)
			}
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			_, direct := client.health(context.Background(), NewHTTPEndpoint(srv.Client(), srv.URL))
			assert.NotContains(t, direct, "proxy")
		})
	}
}
