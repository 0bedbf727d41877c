package probe

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/truncate"
)

const (
	// defaultServerTimeout bounds each request to a llama-stack server.
	defaultServerTimeout = 5 * time.Second
	// maxServerBody is the most of a response body that is read.
	maxServerBody = 1 << 20
	// maxHealthMessage bounds Info.healthMsg.
	maxHealthMessage = 512
	// maxProviderMessage bounds a provider's health message copied into status.
	maxProviderMessage = 256
	// maxVersionLength is the longest version string taken as a version.
	maxVersionLength = 128

	healthPassedMessage      = "Health check passed"
	providerNotImplemented   = "Not Implemented"
	providerNoHealthMessage  = "Server reported no health for this provider"
	serverHealthStatusOK     = "OK"
	serverHealthPath         = "/v1/health"
	serverVersionPath        = "/v1/version"
	serverProvidersPath      = "/v1/providers"
	serverRequestAcceptValue = "application/json"
)

// errBodyTooLarge reports a response body over maxServerBody.
var errBodyTooLarge = errors.New("response body larger than 1 MiB")

// Info is what a running llama-stack server reports.
type Info struct {
	Healthy bool
	// HealthMessage says why it is not healthy (or "Health check passed").
	HealthMessage string
	// Version is /v1/version's version; "" if unknown.
	Version string
	// Providers are /v1/providers' data, Config left empty (it may hold secrets).
	Providers []v1alpha2.ProviderInfo
	// ProvidersKnown is false when /v1/providers did not answer usefully: the last list
	// reported is then kept rather than cleared.
	ProvidersKnown bool
}

// serverClient calls llama-stack servers, each through its Endpoint.
type serverClient struct {
	timeout time.Duration // per request, default 5s
}

// probe checks the server's health and, only when it is healthy, reads its version and providers.
// Version and providers are best effort: an error leaves version "" and providers nil.
func (s *serverClient) probe(ctx context.Context, ep Endpoint) Info {
	healthy, msg := s.health(ctx, ep)
	info := Info{Healthy: healthy, HealthMessage: truncate.String(msg, maxHealthMessage, truncate.Ellipsis)}
	if !healthy {
		return info
	}
	info.Version = s.version(ctx, ep)
	info.Providers, info.ProvidersKnown = s.providers(ctx, ep)
	return info
}

// health calls /v1/health and says whether the server is healthy, and if not, why.
func (s *serverClient) health(ctx context.Context, ep Endpoint) (bool, string) {
	code, body, err := s.get(ctx, ep, serverHealthPath)
	if err != nil {
		return false, s.describeError(err)
	}
	if code != http.StatusOK {
		if p, ok := ep.(*proxyEndpoint); ok {
			return false, p.proxyRefusal(code, body)
		}
		return false, fmt.Sprintf("health endpoint returned HTTP %d", code)
	}
	var reply struct {
		Status *string `json:"status"`
	}
	if err := json.Unmarshal(body, &reply); err != nil {
		return false, "health endpoint returned a body that is not the expected JSON"
	}
	if reply.Status == nil {
		return false, "health endpoint returned JSON without a status"
	}
	if !strings.EqualFold(strings.TrimSpace(*reply.Status), serverHealthStatusOK) {
		return false, "server reported health status " + strconv.Quote(truncate.String(*reply.Status, 64, truncate.Ellipsis))
	}
	return true, healthPassedMessage
}

// version calls /v1/version; "" on any error.
func (s *serverClient) version(ctx context.Context, ep Endpoint) string {
	code, body, err := s.get(ctx, ep, serverVersionPath)
	if err != nil || code != http.StatusOK {
		return ""
	}
	var reply struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(body, &reply) != nil {
		return ""
	}
	v := strings.TrimSpace(reply.Version)
	if len(v) > maxVersionLength || !utf8.ValidString(v) {
		return ""
	}
	return v
}

// serverProvider is one element of /v1/providers .data. Config is not decoded: it may hold secrets.
type serverProvider struct {
	API          string `json:"api"`
	ProviderID   string `json:"provider_id"`
	ProviderType string `json:"provider_type"`
	Health       *struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"health"`
}

// providers calls /v1/providers; nil and false on any error. The result is sorted by
// (API, ProviderID, ProviderType).
func (s *serverClient) providers(ctx context.Context, ep Endpoint) ([]v1alpha2.ProviderInfo, bool) {
	code, body, err := s.get(ctx, ep, serverProvidersPath)
	if err != nil || code != http.StatusOK {
		return nil, false
	}
	var reply struct {
		Data *[]serverProvider `json:"data"`
	}
	if json.Unmarshal(body, &reply) != nil || reply.Data == nil {
		return nil, false
	}
	out := make([]v1alpha2.ProviderInfo, 0, len(*reply.Data))
	for _, p := range *reply.Data {
		info := v1alpha2.ProviderInfo{API: p.API, ProviderID: p.ProviderID, ProviderType: p.ProviderType}
		if p.Health == nil || strings.TrimSpace(p.Health.Status) == "" {
			info.Health = v1alpha2.ProviderHealthStatus{Status: providerNotImplemented, Message: providerNoHealthMessage}
		} else {
			info.Health = v1alpha2.ProviderHealthStatus{
				Status:  p.Health.Status,
				Message: truncate.String(p.Health.Message, maxProviderMessage, truncate.Ellipsis),
			}
		}
		out = append(out, info)
	}
	slices.SortStableFunc(out, func(a, b v1alpha2.ProviderInfo) int {
		return cmp.Or(cmp.Compare(a.API, b.API), cmp.Compare(a.ProviderID, b.ProviderID),
			cmp.Compare(a.ProviderType, b.ProviderType))
	})
	return out, true
}

// get does one GET of path with its own timeout.
func (s *serverClient) get(ctx context.Context, ep Endpoint, path string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout())
	defer cancel()
	return ep.Get(ctx, path)
}

func (s *serverClient) requestTimeout() time.Duration {
	if s.timeout <= 0 {
		return defaultServerTimeout
	}
	return s.timeout
}

// describeError turns a request error into a short message without the URL.
func (s *serverClient) describeError(err error) string {
	// A name that does not resolve is one failure whether the resolver answered "no such
	// host" or timed out: a resolver that alternates between the two must not make the
	// answer change (and the status be rewritten) at every probe.
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "server unreachable: its name could not be resolved"
	}
	var netErr net.Error
	switch {
	case errors.Is(err, errBodyTooLarge):
		return "health endpoint returned a body larger than 1 MiB"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("health check timed out (limit %s)", s.requestTimeout())
	case errors.Is(err, context.Canceled):
		return "health check canceled"
	case errors.Is(err, errRateLimited):
		return "health check not sent: the controller's API client rate limit would delay it past the timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by the server"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the server closed the connection"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "server unreachable: no route to host"
	}
	// Fixed wording for network errors: their text carries local ports that change on
	// every attempt, and a message that changes would rewrite the status every probe.
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return "server unreachable: " + opErr.Op + " failed"
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return "server unreachable: " + err.Error()
}
