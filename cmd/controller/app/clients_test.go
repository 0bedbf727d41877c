package app

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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// The Event client is a client of its own: its own user agent and rate limiter, so
// Events never wait on the work client's limit, nor take from it; both still go
// through the caller's transport wrappers (the suites count requests there).
func TestEventClientIsSeparate(t *testing.T) {
	var mu sync.Mutex
	byAgent := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		byAgent[r.UserAgent()]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/events") {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"kind":"Event","apiVersion":"v1","metadata":{"name":"e","namespace":"demo"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"demo"}}`))
	}))
	defer srv.Close()

	var wrapped int
	var wrappedMu sync.Mutex
	base := &rest.Config{Host: srv.URL}
	base.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			wrappedMu.Lock()
			wrapped++
			wrappedMu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	// The work client may send one request every 100 s; Events have the defaults.
	o := Options{Workers: 1, QPS: 0.01, Burst: 1, Version: "v1.0.0"}.withDefaults()
	workCfg, eventCfg := clientConfigs(base, o)
	assert.Empty(t, base.UserAgent, "the caller's configuration is not changed")
	assert.Equal(t, "llama-stack-controller/v1.0.0", workCfg.UserAgent)
	assert.Equal(t, "llama-stack-controller/v1.0.0/events", eventCfg.UserAgent)
	assert.Equal(t, float32(DefaultEventQPS), eventCfg.QPS)
	assert.Equal(t, DefaultEventBurst, eventCfg.Burst)

	work, err := kubernetes.NewForConfig(workCfg)
	require.NoError(t, err)
	events, err := kubernetes.NewForConfig(eventCfg)
	require.NoError(t, err)
	ctx := context.Background()

	// The work client spends its only token.
	_, err = work.CoreV1().ConfigMaps("demo").Get(ctx, "c", metav1.GetOptions{})
	require.NoError(t, err)
	// Twenty Events go through at once, although the work client has nothing left...
	start := time.Now()
	for range 20 {
		_, err := events.CoreV1().Events("demo").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	assert.Less(t, time.Since(start), 5*time.Second, "Events did not wait on the work client's limit")
	// ...which still has nothing left: its next request would wait about 100 s, so a
	// deadline of a second fails it at once, without a request.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = work.CoreV1().ConfigMaps("demo").Get(short, "c", metav1.GetOptions{})
	require.Error(t, err, "the work client's limit is its own")

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{"llama-stack-controller/v1.0.0": 1, "llama-stack-controller/v1.0.0/events": 20}, byAgent)
	wrappedMu.Lock()
	defer wrappedMu.Unlock()
	assert.Equal(t, 21, wrapped, "both clients go through the caller's wrappers")
}

// A rate limiter set in the caller's configuration is not shared with the Event client.
func TestEventClientDoesNotShareALimiter(t *testing.T) {
	limiter := flowcontrol.NewTokenBucketRateLimiter(1, 1)
	workCfg, eventCfg := clientConfigs(&rest.Config{Host: "https://127.0.0.1:6443", RateLimiter: limiter}, Options{QPS: 1, Burst: 1}.withDefaults())
	assert.Same(t, limiter, workCfg.RateLimiter)
	assert.Nil(t, eventCfg.RateLimiter)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
