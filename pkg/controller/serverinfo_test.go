package controller

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

const (
	healthOKBody  = `{"status":"OK"}`
	versionBody   = `{"version":"0.2.23"}`
	providersBody = `{"data":[
		{"api":"inference","provider_id":"vllm","provider_type":"remote::vllm",
		 "config":{"url":"http://vllm:8000","api_token":"secret-token"},
		 "health":{"status":"OK","message":"reachable"}},
		{"api":"agents","provider_id":"meta-reference","provider_type":"inline::meta-reference",
		 "config":{"persistence_store":{"type":"sqlite"}}},
		{"api":"inference","provider_id":"ollama","provider_type":"remote::ollama",
		 "health":{"status":"Error"}}
	]}`
)

// fakeServer serves fixed replies per path and counts the requests it saw.
type fakeServer struct {
	mu       sync.Mutex
	requests map[string]int
	accept   map[string]string
	handlers map[string]http.HandlerFunc
}

func reply(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}

// healthyServer answers every endpoint well; overrides replace single paths.
func healthyServer(overrides map[string]http.HandlerFunc) *fakeServer {
	f := &fakeServer{
		requests: map[string]int{},
		accept:   map[string]string{},
		handlers: map[string]http.HandlerFunc{
			"/v1/health":    reply(http.StatusOK, healthOKBody),
			"/v1/version":   reply(http.StatusOK, versionBody),
			"/v1/providers": reply(http.StatusOK, providersBody),
		},
	}
	for path, h := range overrides {
		f.handlers[path] = h
	}
	return f
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests[r.URL.Path]++
	f.accept[r.URL.Path] = r.Header.Get("Accept")
	h := f.handlers[r.URL.Path]
	f.mu.Unlock()
	if h == nil {
		http.NotFound(w, r)
		return
	}
	h(w, r)
}

func (f *fakeServer) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[path]
}

func (f *fakeServer) acceptHeader(path string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accept[path]
}

// start runs f behind httptest and returns a client for it.
func (f *fakeServer) start(t *testing.T) (*httptest.Server, *serverClient) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv, &serverClient{http: srv.Client(), timeout: 2 * time.Second}
}

func wantProviders() []v1alpha1.ProviderInfo {
	return []v1alpha1.ProviderInfo{
		{
			API: "agents", ProviderID: "meta-reference", ProviderType: "inline::meta-reference",
			Health: v1alpha1.ProviderHealthStatus{Status: providerNotImplemented, Message: providerNoHealthMessage},
		},
		{
			API: "inference", ProviderID: "ollama", ProviderType: "remote::ollama",
			Health: v1alpha1.ProviderHealthStatus{Status: "Error", Message: ""},
		},
		{
			API: "inference", ProviderID: "vllm", ProviderType: "remote::vllm",
			Health: v1alpha1.ProviderHealthStatus{Status: "OK", Message: "reachable"},
		},
	}
}

func TestProbeHealthyServer(t *testing.T) {
	f := healthyServer(nil)
	srv, client := f.start(t)

	// A trailing slash on the base URL must not double the slash.
	info := client.probe(context.Background(), srv.URL+"/")

	assert.True(t, info.healthy)
	assert.Equal(t, healthPassedMessage, info.healthMsg)
	assert.Equal(t, "0.2.23", info.version)
	assert.Equal(t, wantProviders(), info.providers)
	for _, p := range info.providers {
		assert.Equal(t, runtime.RawExtension{}, p.Config, "config of %s must be dropped", p.ProviderID)
	}
	for _, path := range []string{"/v1/health", "/v1/version", "/v1/providers"} {
		assert.Equal(t, 1, f.count(path), path)
		assert.Equal(t, "application/json", f.acceptHeader(path), path)
	}
}

func TestProbeBehindProxyPrefix(t *testing.T) {
	f := healthyServer(nil)
	mux := http.NewServeMux()
	mux.Handle("/api/v1/namespaces/ns/services/demo-service:8321/proxy/",
		http.StripPrefix("/api/v1/namespaces/ns/services/demo-service:8321/proxy", f))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	client := &serverClient{http: srv.Client()}

	info := client.probe(context.Background(), srv.URL+"/api/v1/namespaces/ns/services/demo-service:8321/proxy")

	assert.True(t, info.healthy)
	assert.Equal(t, "0.2.23", info.version)
	assert.Len(t, info.providers, 3)
}

func TestProbeUnhealthy(t *testing.T) {
	tests := []struct {
		name    string
		health  http.HandlerFunc
		wantMsg string
	}{
		{
			name:    "service unavailable",
			health:  reply(http.StatusServiceUnavailable, `{"status":"Error"}`),
			wantMsg: "health endpoint returned HTTP 503",
		},
		{
			name:    "not found",
			health:  http.NotFound,
			wantMsg: "health endpoint returned HTTP 404",
		},
		{
			name:    "status Error",
			health:  reply(http.StatusOK, `{"status":"Error"}`),
			wantMsg: `server reported health status "Error"`,
		},
		{
			name:    "HTML page",
			health:  reply(http.StatusOK, "<html><body><h1>Welcome to nginx!</h1></body></html>"),
			wantMsg: "health endpoint returned a body that is not the expected JSON",
		},
		{
			name:    "JSON without status",
			health:  reply(http.StatusOK, `{"healthy":true}`),
			wantMsg: "health endpoint returned JSON without a status",
		},
		{
			name:    "status of the wrong type",
			health:  reply(http.StatusOK, `{"status":1}`),
			wantMsg: "health endpoint returned a body that is not the expected JSON",
		},
		{
			name:    "JSON array",
			health:  reply(http.StatusOK, `["OK"]`),
			wantMsg: "health endpoint returned a body that is not the expected JSON",
		},
		{
			name:    "empty body",
			health:  reply(http.StatusOK, ""),
			wantMsg: "health endpoint returned a body that is not the expected JSON",
		},
		{
			name:    "long status value is cut",
			health:  reply(http.StatusOK, `{"status":"`+strings.Repeat("x", 5000)+`"}`),
			wantMsg: `server reported health status "` + strings.Repeat("x", 61) + `..."`,
		},
		{
			name: "5 MiB body",
			health: func(w http.ResponseWriter, _ *http.Request) {
				chunk := []byte(strings.Repeat(" ", 64<<10))
				_, _ = w.Write([]byte(`{"status":"OK"`))
				for range 5 * 16 {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
				_, _ = w.Write([]byte(`}`))
			},
			wantMsg: "health endpoint returned a body larger than 1 MiB",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := healthyServer(map[string]http.HandlerFunc{"/v1/health": tt.health})
			srv, client := f.start(t)

			info := client.probe(context.Background(), srv.URL)

			assert.False(t, info.healthy)
			assert.Equal(t, tt.wantMsg, info.healthMsg)
			assert.LessOrEqual(t, len(info.healthMsg), maxHealthMessage)
			assert.Empty(t, info.version)
			assert.Nil(t, info.providers)
			assert.Zero(t, f.count("/v1/version"), "version must not be asked of an unhealthy server")
			assert.Zero(t, f.count("/v1/providers"), "providers must not be asked of an unhealthy server")
		})
	}
}

func TestProbeHealthStatusIsCaseInsensitive(t *testing.T) {
	for _, status := range []string{"OK", "ok", "Ok", " OK "} {
		f := healthyServer(map[string]http.HandlerFunc{
			"/v1/health": reply(http.StatusOK, `{"status":"`+status+`","extra":{"a":[1,2]}}`),
		})
		srv, client := f.start(t)
		info := client.probe(context.Background(), srv.URL)
		assert.True(t, info.healthy, "status %q", status)
		assert.Equal(t, healthPassedMessage, info.healthMsg)
	}
}

func TestProbeTimeout(t *testing.T) {
	stall := func(release <-chan struct{}, flushFirst bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if flushFirst {
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte(`{"status":`))
				w.(http.Flusher).Flush()
			}
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}
	for name, flushFirst := range map[string]bool{"no headers": false, "body stalls": true} {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			f := healthyServer(map[string]http.HandlerFunc{"/v1/health": stall(release, flushFirst)})
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			// Cleanups run last-in first-out: the handler is released before the server closes.
			t.Cleanup(func() { close(release) })
			client := &serverClient{http: srv.Client(), timeout: 100 * time.Millisecond}

			start := time.Now()
			info := client.probe(context.Background(), srv.URL)
			elapsed := time.Since(start)

			assert.Less(t, elapsed, time.Second)
			assert.False(t, info.healthy)
			assert.Equal(t, "health check timed out (limit 100ms)", info.healthMsg)
		})
	}
}

func TestProbeCanceledContext(t *testing.T) {
	f := healthyServer(nil)
	srv, client := f.start(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	info := client.probe(ctx, srv.URL)

	assert.False(t, info.healthy)
	assert.Equal(t, "health check canceled", info.healthMsg)
}

func TestProbeConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	client := &serverClient{http: &http.Client{}, timeout: time.Second}

	info := client.probe(context.Background(), base)

	assert.False(t, info.healthy)
	assert.Equal(t, "connection refused", info.healthMsg)
	assert.Empty(t, info.version)
	assert.Nil(t, info.providers)
}

func TestProbeRequestErrorHidesURL(t *testing.T) {
	client := &serverClient{http: &http.Client{}, timeout: time.Second}

	info := client.probe(context.Background(), "ftp://example.invalid:8321")

	assert.False(t, info.healthy)
	assert.True(t, strings.HasPrefix(info.healthMsg, "server unreachable: "), info.healthMsg)
	assert.NotContains(t, info.healthMsg, "example.invalid")
	assert.LessOrEqual(t, len(info.healthMsg), maxHealthMessage)
}

func TestProbeBestEffortDetails(t *testing.T) {
	huge := func(w http.ResponseWriter, _ *http.Request) {
		chunk := []byte(strings.Repeat(" ", 64<<10))
		_, _ = w.Write([]byte(`{"data":[]`))
		for range 5 * 16 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = w.Write([]byte(`}`))
	}
	tests := []struct {
		name          string
		overrides     map[string]http.HandlerFunc
		wantVersion   string
		wantProviders []v1alpha1.ProviderInfo
	}{
		{
			name:          "version 404",
			overrides:     map[string]http.HandlerFunc{"/v1/version": http.NotFound},
			wantVersion:   "",
			wantProviders: wantProviders(),
		},
		{
			name:          "version not JSON",
			overrides:     map[string]http.HandlerFunc{"/v1/version": reply(http.StatusOK, "0.2.23")},
			wantProviders: wantProviders(),
		},
		{
			name:          "version of the wrong type",
			overrides:     map[string]http.HandlerFunc{"/v1/version": reply(http.StatusOK, `{"version":23}`)},
			wantProviders: wantProviders(),
		},
		{
			name: "version too long",
			overrides: map[string]http.HandlerFunc{
				"/v1/version": reply(http.StatusOK, `{"version":"`+strings.Repeat("9", 1000)+`"}`),
			},
			wantProviders: wantProviders(),
		},
		{
			name:        "providers malformed",
			overrides:   map[string]http.HandlerFunc{"/v1/providers": reply(http.StatusOK, `{"data":[{"api":`)},
			wantVersion: "0.2.23",
		},
		{
			name:        "providers data not a list",
			overrides:   map[string]http.HandlerFunc{"/v1/providers": reply(http.StatusOK, `{"data":{"api":"x"}}`)},
			wantVersion: "0.2.23",
		},
		{
			name:        "providers without data",
			overrides:   map[string]http.HandlerFunc{"/v1/providers": reply(http.StatusOK, `{}`)},
			wantVersion: "0.2.23",
		},
		{
			name: "provider health of the wrong type",
			overrides: map[string]http.HandlerFunc{
				"/v1/providers": reply(http.StatusOK, `{"data":[{"api":"a","provider_id":"b","health":"OK"}]}`),
			},
			wantVersion: "0.2.23",
		},
		{
			name:        "providers 500",
			overrides:   map[string]http.HandlerFunc{"/v1/providers": reply(http.StatusInternalServerError, providersBody)},
			wantVersion: "0.2.23",
		},
		{
			name:        "providers 5 MiB",
			overrides:   map[string]http.HandlerFunc{"/v1/providers": huge},
			wantVersion: "0.2.23",
		},
		{
			name:          "providers empty list",
			overrides:     map[string]http.HandlerFunc{"/v1/providers": reply(http.StatusOK, `{"data":[]}`)},
			wantVersion:   "0.2.23",
			wantProviders: []v1alpha1.ProviderInfo{},
		},
		{
			name: "provider health null or without status",
			overrides: map[string]http.HandlerFunc{"/v1/providers": reply(http.StatusOK, `{"data":[
				{"api":"b","provider_id":"x","provider_type":"t","health":null},
				{"api":"a","provider_id":"y","provider_type":"t","health":{"message":"m"}}]}`)},
			wantVersion: "0.2.23",
			wantProviders: []v1alpha1.ProviderInfo{
				{API: "a", ProviderID: "y", ProviderType: "t", Health: v1alpha1.ProviderHealthStatus{
					Status: providerNotImplemented, Message: providerNoHealthMessage}},
				{API: "b", ProviderID: "x", ProviderType: "t", Health: v1alpha1.ProviderHealthStatus{
					Status: providerNotImplemented, Message: providerNoHealthMessage}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, client := healthyServer(tt.overrides).start(t)

			info := client.probe(context.Background(), srv.URL)

			assert.True(t, info.healthy)
			assert.Equal(t, healthPassedMessage, info.healthMsg)
			assert.Equal(t, tt.wantVersion, info.version)
			if tt.wantProviders == nil {
				assert.Nil(t, info.providers)
			} else {
				assert.Equal(t, tt.wantProviders, info.providers)
			}
		})
	}
}

func TestProbeProviderMessageIsCut(t *testing.T) {
	long := strings.Repeat("é", 400)
	srv, client := healthyServer(map[string]http.HandlerFunc{
		"/v1/providers": reply(http.StatusOK,
			`{"data":[{"api":"a","provider_id":"b","provider_type":"c","health":{"status":"Error","message":"`+long+`"}}]}`),
	}).start(t)

	info := client.probe(context.Background(), srv.URL)

	require.Len(t, info.providers, 1)
	msg := info.providers[0].Health.Message
	assert.LessOrEqual(t, len(msg), maxProviderMessage)
	assert.True(t, strings.HasSuffix(msg, "..."))
	assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(msg, "...")))
}
