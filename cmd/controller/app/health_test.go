package app

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
)

func probe(h *health, path string) (int, string) {
	rec := httptest.NewRecorder()
	h.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestReadyz(t *testing.T) {
	synced := false
	hasSynced := func() bool { return synced }
	tests := map[string]struct {
		leaderElection bool
		edit           func(h *health)
		code           int
		body           string
	}{
		"no leader election, starting": {false, func(*health) {}, http.StatusServiceUnavailable, "the controller is not running"},
		"standing by":                  {true, func(*health) {}, http.StatusOK, "ok: standing by for the leader lease"},
		"leading, controller not made": {true, func(h *health) { h.setStandby(false) }, http.StatusServiceUnavailable, "the controller is not running"},
		"caches not synced": {false, func(h *health) { h.setRunning(hasSynced) },
			http.StatusServiceUnavailable, "informer caches not synced yet"},
		"leading, caches not synced": {true, func(h *health) { h.setStandby(false); h.setRunning(hasSynced) },
			http.StatusServiceUnavailable, "informer caches not synced yet"},
		"caches synced": {false, func(h *health) { synced = true; h.setRunning(hasSynced) }, http.StatusOK, "ok"},
		"leading, caches synced": {true, func(h *health) { synced = true; h.setStandby(false); h.setRunning(hasSynced) },
			http.StatusOK, "ok"},
		"stopped": {true, func(h *health) { h.setStandby(false); h.setRunning(hasSynced); h.setRunning(nil) },
			http.StatusServiceUnavailable, "the controller is not running"},
		"webhook without a certificate": {true, func(h *health) { h.setWebhook(func() error { return errors.New("no serving certificate yet") }) },
			http.StatusServiceUnavailable, "conversion webhook: no serving certificate yet"},
		"webhook serving, standing by": {true, func(h *health) { h.setWebhook(func() error { return nil }) },
			http.StatusOK, "ok: standing by for the leader lease"},
		"webhook failing, caches synced": {false, func(h *health) {
			synced = true
			h.setRunning(hasSynced)
			h.setWebhook(func() error { return errors.New("certificate expired") })
		}, http.StatusServiceUnavailable, "conversion webhook: certificate expired"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			synced = false
			h := newHealth(tc.leaderElection)
			tc.edit(h)
			code, body := probe(h, "/readyz")
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.body+"\n", body)
		})
	}
}

func TestHealthz(t *testing.T) {
	// Without leader election, alive is alive.
	code, body := probe(newHealth(false), "/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
	// With it, the watchdog is consulted: healthy until an elector is attached (and, in
	// client-go, while this process is not the leader or renews on time).
	h := newHealth(true)
	require.NotNil(t, h.watchdog)
	code, _ = probe(h, "/healthz")
	assert.Equal(t, http.StatusOK, code)

	code, _ = probe(h, "/metrics")
	assert.Equal(t, http.StatusNotFound, code)
	rec := httptest.NewRecorder()
	h.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/healthz", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

// serveHealth serves on a real port until stop is called.
func TestServeHealth(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	stop, err := serveHealth(ctx, addr, newHealth(true))
	require.NoError(t, err)
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(b), "standing by")

	_, err = serveHealth(ctx, addr, newHealth(false))
	assert.ErrorContains(t, err, "serving health probes on "+addr)

	stop()
	_, err = http.Get("http://" + addr + "/healthz")
	assert.Error(t, err, "stopped")
}
