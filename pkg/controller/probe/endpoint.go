package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/truncate"
)

// Endpoint reaches one CR's llama-stack server.
type Endpoint interface {
	// Get does one GET of path (such as "/v1/health") and returns the HTTP status code
	// and at most maxServerBody bytes of body; a longer body is errBodyTooLarge. err is
	// set only when no status code was received.
	Get(ctx context.Context, path string) (code int, body []byte, err error)
}

// ServiceEndpoints returns an Endpoint function that reaches each server at its
// Service's DNS name, without the cluster domain (so clusters with another domain than
// cluster.local work), with client: for a controller running in the cluster. A server
// that serves HTTPS is reached with a copy of client's transport that verifies its
// certificate (verifyServerCertificate); the copies are kept per set of trusted CAs.
func ServiceEndpoints(client *http.Client) func(svc Service, tls *TLS) Endpoint {
	clients := &tlsClients{base: client, byKey: map[string]*http.Client{}}
	return func(svc Service, tls *TLS) Endpoint {
		if tls == nil {
			return NewHTTPEndpoint(client, fmt.Sprintf("http://%s.%s.svc:%d", svc.Name, svc.Namespace, svc.Port))
		}
		return NewHTTPEndpoint(clients.forServer(svc, tls), fmt.Sprintf("https://%s.%s.svc:%d", svc.Name, svc.Namespace, svc.Port))
	}
}

// httpEndpoint calls a server with a plain HTTP client.
type httpEndpoint struct {
	client *http.Client
	base   string // no trailing slash
}

// NewHTTPEndpoint reaches a server at baseURL with client (http.DefaultClient when
// nil).
func NewHTTPEndpoint(client *http.Client, baseURL string) Endpoint {
	if client == nil {
		client = http.DefaultClient
	}
	return &httpEndpoint{client: client, base: strings.TrimRight(baseURL, "/")}
}

func (e *httpEndpoint) String() string { return e.base }

func (e *httpEndpoint) Get(ctx context.Context, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", serverRequestAcceptValue)
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxServerBody+1))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if len(body) > maxServerBody {
		return resp.StatusCode, nil, errBodyTooLarge
	}
	return resp.StatusCode, body, nil
}

// ProxyEndpoints returns an Endpoint function that reaches each server through the API
// server's service proxy: for a controller running outside the cluster. The requests
// are made by a client-go REST client built from cfg, so they are counted in
// rest_client_requests_total, and wait on limiter: pass the Kubernetes client's
// (RESTClient().GetRateLimiter()) so that probes share its QPS budget. The client reads
// at most maxServerBody+1 bytes of each response.
func ProxyEndpoints(cfg *rest.Config, limiter flowcontrol.RateLimiter) (func(svc Service, tls *TLS) Endpoint, error) {
	cfg = rest.CopyConfig(cfg)
	if limiter != nil {
		cfg.RateLimiter = probeLimiter{limiter}
	}
	cfg.Wrap(limitResponseBodies)
	core, err := typedcorev1.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	client := core.RESTClient()
	return func(svc Service, tls *TLS) Endpoint {
		// The API server's proxy speaks HTTPS to the pods when the service name says so
		// (it does not verify their certificate).
		return &proxyEndpoint{client: client, namespace: svc.Namespace, service: svc.Name, port: svc.Port, https: tls != nil}
	}, nil
}

// errRateLimited reports a probe that the client's rate limiter would not let out
// before its timeout.
var errRateLimited = errors.New("the API client's rate limit would delay the request past its timeout")

// probeLimiter waits on the shared rate limiter, and reports its refusal as errRateLimited.
type probeLimiter struct {
	flowcontrol.RateLimiter
}

func (l probeLimiter) Wait(ctx context.Context) error {
	err := l.RateLimiter.Wait(ctx)
	if err == nil || ctx.Err() != nil {
		return err // a timeout or cancellation, reported as such
	}
	return fmt.Errorf("%w: %w", errRateLimited, err)
}

// proxyEndpoint calls a server through the API server's service proxy, with a REST
// client of the core/v1 API.
type proxyEndpoint struct {
	client             rest.Interface
	namespace, service string
	port               int32
	https              bool
}

// target is the service proxy's name of the server's port: [https:]service:port.
func (e *proxyEndpoint) target() string {
	t := e.service + ":" + strconv.Itoa(int(e.port))
	if e.https {
		t = "https:" + t
	}
	return t
}

// endpointAddressRE matches an IPv4 or bracketed IPv6 address with an optional port.
var endpointAddressRE = regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\[[0-9a-fA-F:.]+\](?::\d+)?`)

// proxyRefusal describes a non-2xx answer that came through the API server's service
// proxy: it may be the API server's own (it could not reach the pods) rather than the
// server's, so the message says so, with the proxy's words (a Status message, or a
// short plain-text body). It is stable from one probe to the next, so the status is
// not rewritten each time.
func (e *proxyEndpoint) proxyRefusal(code int, body []byte) string {
	msg := fmt.Sprintf("health endpoint returned HTTP %d through the API server's service proxy", code)
	var st metav1.Status
	detail := ""
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		detail = st.Message
	} else if len(body) <= 256 && utf8.Valid(body) && !bytes.ContainsAny(body, "{}<>") {
		detail = strings.TrimSpace(string(body))
	}
	// client-go adds the request to the words it could not decode.
	detail = strings.TrimSuffix(detail, fmt.Sprintf(" (get services %s)", e.target()))
	// The API server proxies each request to one endpoint picked at random: its address
	// would change the message from one probe to the next. Other digits (a request id,
	// a time) would too: such words are left out.
	detail = endpointAddressRE.ReplaceAllString(detail, "<pod address>")
	if strings.ContainsAny(detail, "0123456789") {
		detail = ""
	}
	if detail != "" {
		msg += ": " + truncate.String(detail, 256, truncate.Ellipsis)
	}
	return msg + " (if the API server cannot reach the pods, as with the fake nodes of make run, this says nothing of the server)"
}

func (e *proxyEndpoint) String() string {
	return fmt.Sprintf("/api/v1/namespaces/%s/services/%s/proxy", e.namespace, e.target())
}

func (e *proxyEndpoint) Get(ctx context.Context, path string) (int, []byte, error) {
	res := e.client.Get().
		Namespace(e.namespace).Resource("services").Name(e.target()).
		SubResource("proxy").Suffix(path).
		SetHeader("Accept", serverRequestAcceptValue).
		// One request per call, as with the in-cluster client: the probe interval is the retry.
		MaxRetries(0).
		Do(ctx)
	var code int
	res.StatusCode(&code)
	body, err := res.Raw()
	if code == 0 && err != nil {
		// client-go keeps no status code for an error response it cannot decode (such as
		// text/plain); the error it makes of it carries the code.
		var status apierrors.APIStatus
		if !errors.As(err, &status) || status.Status().Code == 0 {
			return 0, nil, err
		}
		return int(status.Status().Code), []byte(status.Status().Message), nil
	}
	// Any other error is client-go's reading of a non-2xx answer: the code says it.
	if len(body) > maxServerBody {
		return code, nil, errBodyTooLarge
	}
	return code, body, nil
}

// limitResponseBodies cuts response bodies after maxServerBody+1 bytes, so that a
// server cannot make the REST client, which reads whole bodies, hold more; Get reports
// a body that long as errBodyTooLarge.
func limitResponseBodies(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if resp != nil && resp.Body != nil {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.LimitReader(resp.Body, maxServerBody+1), resp.Body}
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
