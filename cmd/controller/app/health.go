package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"
)

// health answers the kubelet's probes. /healthz (liveness) fails only when this process
// leads but has not renewed its Lease well past its expiry: it should have stopped, and a
// restart unsticks it. /readyz is ready while standing by for the Lease, and while the
// controller runs with every informer cache synced.
type health struct {
	// watchdog checks the leader's renewals; nil without leader election.
	watchdog *leaderelection.HealthzAdaptor

	mu      sync.Mutex
	standby bool
	synced  func() bool
	// webhook is the conversion webhook's readiness (it serves with a valid
	// certificate); nil without the webhook.
	webhook func() error
}

func newHealth(leaderElection bool) *health {
	h := &health{standby: leaderElection}
	if leaderElection {
		h.watchdog = leaderelection.NewLeaderHealthzAdaptor(leaderHealthzGracePeriod)
	}
	return h
}

// setStandby records whether this process waits for the Lease.
func (h *health) setStandby(standby bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.standby = standby
}

// setWebhook records the conversion webhook's readiness check.
func (h *health) setWebhook(ready func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.webhook = ready
}

// setRunning records the running controller's sync check, or nil once it stopped.
func (h *health) setRunning(synced func() bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.synced = synced
}

func (h *health) healthz(w http.ResponseWriter, r *http.Request) {
	if h.watchdog != nil {
		if err := h.watchdog.Check(r); err != nil {
			http.Error(w, "leader election: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	_, _ = fmt.Fprintln(w, "ok")
}

func (h *health) readyz(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	standby, synced, webhook := h.standby, h.synced, h.webhook
	h.mu.Unlock()
	if webhook != nil {
		// The API server calls any ready replica for conversions.
		if err := webhook(); err != nil {
			http.Error(w, "conversion webhook: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	switch {
	case synced != nil && synced():
		_, _ = fmt.Fprintln(w, "ok")
	case synced != nil:
		http.Error(w, "informer caches not synced yet", http.StatusServiceUnavailable)
	case standby:
		_, _ = fmt.Fprintln(w, "ok: standing by for the leader lease")
	default:
		http.Error(w, "the controller is not running", http.StatusServiceUnavailable)
	}
}

func (h *health) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /readyz", h.readyz)
	return mux
}

// serveHealth serves /healthz and /readyz on addr. The returned function stops the
// server; Run calls it on return, so that the probes are answered while the controller
// drains and releases its Lease.
func serveHealth(ctx context.Context, addr string, h *health) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving health probes on %s: %w", addr, err)
	}
	logger := klog.FromContext(ctx)
	srv := &http.Server{Handler: h.handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			logger.Error(err, "Health probe server stopped")
		}
	}()
	logger.Info("Serving health probes", "address", ln.Addr().String())
	return func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		<-done
	}, nil
}
