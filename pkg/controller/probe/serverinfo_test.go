package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
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

// proxyPrefix is where the fake API server serves the service proxy of proxied's server.
const proxyPrefix = "/api/v1/namespaces/ns/services/demo-service:8321/proxy"

// proxiedService is the Service of the server the fake API server proxies.
var proxiedService = Service{Namespace: "ns", Name: "demo-service", Port: 8321}

// probeModes are the two ways of reaching a server: each serves h and returns an
// endpoint for it.
var probeModes = []struct {
	name  string
	serve func(t *testing.T, h http.Handler) Endpoint
}{
	{"direct", func(t *testing.T, h http.Handler) Endpoint {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return NewHTTPEndpoint(srv.Client(), srv.URL)
	}},
	{"service proxy", func(t *testing.T, h http.Handler) Endpoint {
		return proxyEndpointFor(t, h, nil)
	}},
}

// proxyEndpointFor serves h as the API server's service proxy of proxiedService's server
// and returns the endpoint ProxyEndpoints makes for it, whose client waits on limiter
// (nil: its own).
func proxyEndpointFor(t *testing.T, h http.Handler, limiter flowcontrol.RateLimiter) Endpoint {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(proxyPrefix+"/", http.StripPrefix(proxyPrefix, h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	endpoints, err := ProxyEndpoints(&rest.Config{Host: srv.URL, QPS: -1}, limiter)
	require.NoError(t, err)
	return endpoints(proxiedService, nil)
}

// forEachMode runs test in each probe mode with a serverClient and f's endpoint.
func (f *fakeServer) forEachMode(t *testing.T, timeout time.Duration, test func(t *testing.T, client *serverClient, ep Endpoint)) {
	for _, m := range probeModes {
		t.Run(m.name, func(t *testing.T) {
			f.reset()
			test(t, &serverClient{timeout: timeout}, m.serve(t, f))
		})
	}
}

// reset forgets the requests seen.
func (f *fakeServer) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = map[string]int{}
	f.accept = map[string]string{}
}

func wantProviders() []v1alpha2.ProviderInfo {
	return []v1alpha2.ProviderInfo{
		{
			API: "agents", ProviderID: "meta-reference", ProviderType: "inline::meta-reference",
			Health: v1alpha2.ProviderHealthStatus{Status: providerNotImplemented, Message: providerNoHealthMessage},
		},
		{
			API: "inference", ProviderID: "ollama", ProviderType: "remote::ollama",
			Health: v1alpha2.ProviderHealthStatus{Status: "Error", Message: ""},
		},
		{
			API: "inference", ProviderID: "vllm", ProviderType: "remote::vllm",
			Health: v1alpha2.ProviderHealthStatus{Status: "OK", Message: "reachable"},
		},
	}
}

func TestProbeHealthyServer(t *testing.T) {
	f := healthyServer(nil)
	f.forEachMode(t, 2*time.Second, func(t *testing.T, client *serverClient, ep Endpoint) {
		info := client.probe(context.Background(), ep)
		checkHealthyProbe(t, f, info)
	})
}

func TestProbeBaseURLWithTrailingSlash(t *testing.T) {
	f := healthyServer(nil)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)

	// A trailing slash on the base URL must not double the slash.
	info := (&serverClient{}).probe(context.Background(), NewHTTPEndpoint(srv.Client(), srv.URL+"/"))

	checkHealthyProbe(t, f, info)
}

func checkHealthyProbe(t *testing.T, f *fakeServer, info Info) {
	t.Helper()
	assert.True(t, info.Healthy)
	assert.Equal(t, healthPassedMessage, info.HealthMessage)
	assert.Equal(t, "0.2.23", info.Version)
	assert.Equal(t, wantProviders(), info.Providers)
	for _, p := range info.Providers {
		assert.Equal(t, runtime.RawExtension{}, p.Config, "config of %s must be dropped", p.ProviderID)
	}
	for _, path := range []string{"/v1/health", "/v1/version", "/v1/providers"} {
		assert.Equal(t, 1, f.count(path), path)
		assert.Equal(t, "application/json", f.acceptHeader(path), path)
	}
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
			f.forEachMode(t, 2*time.Second, func(t *testing.T, client *serverClient, ep Endpoint) {
				info := client.probe(context.Background(), ep)

				assert.False(t, info.Healthy)
				if _, proxied := ep.(*proxyEndpoint); proxied && strings.Contains(tt.wantMsg, "HTTP") {
					// Through the proxy, the answer may be the API server's: it says so.
					assert.True(t, strings.HasPrefix(info.HealthMessage, tt.wantMsg+" through the API server's service proxy"), info.HealthMessage)
				} else {
					assert.Equal(t, tt.wantMsg, info.HealthMessage)
				}
				assert.LessOrEqual(t, len(info.HealthMessage), maxHealthMessage)
				assert.Empty(t, info.Version)
				assert.Nil(t, info.Providers)
				assert.Zero(t, f.count("/v1/version"), "version must not be asked of an unhealthy server")
				assert.Zero(t, f.count("/v1/providers"), "providers must not be asked of an unhealthy server")
			})
		})
	}
}

func TestProbeHealthStatusIsCaseInsensitive(t *testing.T) {
	for _, status := range []string{"OK", "ok", "Ok", " OK "} {
		f := healthyServer(map[string]http.HandlerFunc{
			"/v1/health": reply(http.StatusOK, `{"status":"`+status+`","extra":{"a":[1,2]}}`),
		})
		f.forEachMode(t, 2*time.Second, func(t *testing.T, client *serverClient, ep Endpoint) {
			info := client.probe(context.Background(), ep)
			assert.True(t, info.Healthy, "status %q", status)
			assert.Equal(t, healthPassedMessage, info.HealthMessage)
		})
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
			// Cleanups run last-in first-out: the handler is released before the servers close.
			t.Cleanup(func() { close(release) })
			f.forEachMode(t, 100*time.Millisecond, func(t *testing.T, client *serverClient, ep Endpoint) {
				start := time.Now()
				info := client.probe(context.Background(), ep)
				elapsed := time.Since(start)

				assert.Less(t, elapsed, time.Second)
				assert.False(t, info.Healthy)
				assert.Equal(t, "health check timed out (limit 100ms)", info.HealthMessage)
			})
		})
	}
}

func TestProbeCanceledContext(t *testing.T) {
	f := healthyServer(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.forEachMode(t, 2*time.Second, func(t *testing.T, client *serverClient, ep Endpoint) {
		info := client.probe(ctx, ep)

		assert.False(t, info.Healthy)
		assert.Equal(t, "health check canceled", info.HealthMessage)
	})
}

func TestProbeConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	proxied, err := ProxyEndpoints(&rest.Config{Host: base, QPS: -1}, nil)
	require.NoError(t, err)
	// The server, or through the proxy, the API server, is not listening.
	for name, ep := range map[string]Endpoint{
		"direct":        NewHTTPEndpoint(&http.Client{}, base),
		"service proxy": proxied(proxiedService, nil),
	} {
		t.Run(name, func(t *testing.T) {
			info := (&serverClient{timeout: time.Second}).probe(context.Background(), ep)

			assert.False(t, info.Healthy)
			assert.Equal(t, "connection refused", info.HealthMessage)
			assert.Empty(t, info.Version)
			assert.Nil(t, info.Providers)
		})
	}
}

func TestProbeRequestErrorHidesURL(t *testing.T) {
	client := &serverClient{timeout: time.Second}

	info := client.probe(context.Background(), NewHTTPEndpoint(&http.Client{}, "ftp://example.invalid:8321"))

	assert.False(t, info.Healthy)
	assert.True(t, strings.HasPrefix(info.HealthMessage, "server unreachable: "), info.HealthMessage)
	assert.NotContains(t, info.HealthMessage, "example.invalid")
	assert.LessOrEqual(t, len(info.HealthMessage), maxHealthMessage)
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
		wantProviders []v1alpha2.ProviderInfo
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
			wantProviders: []v1alpha2.ProviderInfo{},
		},
		{
			name: "provider health null or without status",
			overrides: map[string]http.HandlerFunc{"/v1/providers": reply(http.StatusOK, `{"data":[
				{"api":"b","provider_id":"x","provider_type":"t","health":null},
				{"api":"a","provider_id":"y","provider_type":"t","health":{"message":"m"}}]}`)},
			wantVersion: "0.2.23",
			wantProviders: []v1alpha2.ProviderInfo{
				{API: "a", ProviderID: "y", ProviderType: "t", Health: v1alpha2.ProviderHealthStatus{
					Status: providerNotImplemented, Message: providerNoHealthMessage}},
				{API: "b", ProviderID: "x", ProviderType: "t", Health: v1alpha2.ProviderHealthStatus{
					Status: providerNotImplemented, Message: providerNoHealthMessage}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			healthyServer(tt.overrides).forEachMode(t, 2*time.Second, func(t *testing.T, client *serverClient, ep Endpoint) {
				info := client.probe(context.Background(), ep)

				assert.True(t, info.Healthy)
				assert.Equal(t, healthPassedMessage, info.HealthMessage)
				assert.Equal(t, tt.wantVersion, info.Version)
				if tt.wantProviders == nil {
					assert.Nil(t, info.Providers)
				} else {
					assert.Equal(t, tt.wantProviders, info.Providers)
				}
			})
		})
	}
}

func TestProbeProviderMessageIsCut(t *testing.T) {
	long := strings.Repeat("é", 400)
	f := healthyServer(map[string]http.HandlerFunc{
		"/v1/providers": reply(http.StatusOK,
			`{"data":[{"api":"a","provider_id":"b","provider_type":"c","health":{"status":"Error","message":"`+long+`"}}]}`),
	})
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)

	info := (&serverClient{}).probe(context.Background(), NewHTTPEndpoint(srv.Client(), srv.URL))

	require.Len(t, info.Providers, 1)
	msg := info.Providers[0].Health.Message
	assert.LessOrEqual(t, len(msg), maxProviderMessage)
	assert.True(t, strings.HasSuffix(msg, "..."))
	assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(msg, "...")))
}

// describeError's messages are fixed per kind of failure: the error texts they come
// from carry addresses and ports, and a resolver may answer "no such host" or time out
// for the same name; a message that changed would rewrite the status at every probe.
func TestDescribeErrorIsStable(t *testing.T) {
	s := &serverClient{timeout: 5 * time.Second}
	dial := func(err error) error {
		return &url.Error{Op: "Get", URL: "http://app-service.ns.svc:8321/v1/health", Err: &net.OpError{Op: "dial", Net: "tcp", Err: err}}
	}
	for _, tc := range []struct {
		name string
		errs []error
		want string
	}{
		{"name not found or resolver timeout", []error{
			dial(&net.DNSError{Err: "no such host", Name: "app-service.ns.svc", IsNotFound: true}),
			dial(&net.DNSError{Err: "i/o timeout", Name: "app-service.ns.svc", Server: "10.0.0.10:53", IsTimeout: true}),
			dial(&net.DNSError{Err: "server misbehaving", Name: "app-service.ns.svc", Server: "10.0.0.10:53", IsTemporary: true}),
		}, "server unreachable: its name could not be resolved"},
		{"connection refused on any port", []error{
			dial(&os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}),
			&url.Error{Op: "Get", URL: "http://10.2.0.7:8321/v1/health", Err: &net.OpError{Op: "dial", Net: "tcp",
				Source: &net.TCPAddr{IP: net.IPv4(10, 2, 0, 1), Port: 40112}, Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}},
		}, "connection refused"},
		{"timeouts", []error{
			context.DeadlineExceeded,
			&url.Error{Op: "Get", URL: "http://x/v1/health", Err: context.DeadlineExceeded},
		}, "health check timed out (limit 5s)"},
		{"other dial failures", []error{
			dial(errors.New("socket: too many open files")),
			dial(errors.New("something else")),
		}, "server unreachable: dial failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range tc.errs {
				assert.Equal(t, tc.want, s.describeError(err), "%v", err)
			}
		})
	}
}
