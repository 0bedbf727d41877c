//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/cmd/controller/app"
)

// leaseHolder returns the holder of a Lease in the operator namespace, "" if it has none
// or does not exist.
func leaseHolder(ctx context.Context, name string) (string, error) {
	l, err := env.kube.CoordinationV1().Leases(operatorNamespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return ptr.Deref(l.Spec.HolderIdentity, ""), nil
}

// httpGet returns the status code and body of a GET, or 0 if nothing answers.
func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// candidate is a controller run by a test next to the suite's, with leader election on
// its own Lease, its own request counter and health port.
type candidate struct {
	name       string
	requests   *requestCounter
	healthAddr string
	cancel     context.CancelFunc
	done       chan error
}

func startCandidate(t *testing.T, name, lease, watchNamespace string) *candidate {
	t.Helper()
	addr, err := freeAddress()
	require.NoError(t, err)
	c := &candidate{name: name, requests: &requestCounter{}, healthAddr: addr, done: make(chan error, 1)}
	logger := klog.LoggerWithName(klog.NewKlogr(), "candidate-"+name)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	c.cancel = cancel
	go func() {
		c.done <- app.Run(ctx, controllerConfig(c.requests), app.Options{
			Workers: 1, QPS: 50, Burst: 100, ResyncPeriod: resyncPeriod,
			Namespace: watchNamespace, OperatorNamespace: operatorNamespace, Version: "e2e",
			ServerProbe: "off", MetricsBindAddress: "", HealthProbeBindAddress: addr,
			LeaderElect: true, LeaseName: lease,
		})
	}()
	t.Cleanup(func() { c.stop(t) })
	return c
}

// stop cancels the candidate and returns what its Run returned (nil once stopped).
func (c *candidate) stop(t *testing.T) error {
	t.Helper()
	if c.cancel == nil {
		return nil
	}
	c.cancel()
	c.cancel = nil
	select {
	case err := <-c.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("candidate %s did not stop within 30s", c.name)
		return nil
	}
}

// The suite's controller leads its Lease and answers its probes. Two more candidates on
// a Lease of their own (and an empty namespace, so they touch nothing): the first leads,
// the second stands by, ready, reading the Lease and sending nothing else; when the
// leader is stopped it releases the Lease after its controller has stopped, its Run
// returns nil, and the standby leads within a retry period or two, not after the 15s
// lease duration.
func TestLeaderElectionStandbyAndHandover(t *testing.T) {
	ctx := context.Background()
	holder, err := leaseHolder(ctx, app.DefaultLeaseName)
	require.NoError(t, err)
	assert.NotEmpty(t, holder, "the suite's controller holds %s", app.DefaultLeaseName)
	code, body := httpGet("http://" + env.healthAddr + "/readyz")
	assert.Equal(t, http.StatusOK, code, body)
	code, body = httpGet("http://" + env.healthAddr + "/healthz")
	assert.Equal(t, http.StatusOK, code, body)

	ns := newNamespace(t)
	lease := fmt.Sprintf("e2e-handover-%04x", rand.IntN(1<<16))
	t.Cleanup(func() {
		_ = env.kube.CoordinationV1().Leases(operatorNamespace).Delete(context.Background(), lease, metav1.DeleteOptions{})
	})

	a := startCandidate(t, "a", lease, ns)
	var idA string
	eventually(t, 10*time.Second, "a leads", func(ctx context.Context) (bool, error) {
		idA, err = leaseHolder(ctx, lease)
		return idA != "", err
	})
	eventually(t, 20*time.Second, "a is ready (caches synced)", func(context.Context) (bool, error) {
		code, _ := httpGet("http://" + a.healthAddr + "/readyz")
		return code == http.StatusOK, nil
	})

	b := startCandidate(t, "b", lease, ns)
	eventually(t, 10*time.Second, "b answers its readiness probe", func(context.Context) (bool, error) {
		code, _ := httpGet("http://" + b.healthAddr + "/readyz")
		return code != 0, nil
	})
	// Standing by over a few retry periods (2s, jittered up to 2.4s).
	time.Sleep(6 * time.Second)
	code, body = httpGet("http://" + b.healthAddr + "/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "standing by")
	holder, err = leaseHolder(ctx, lease)
	require.NoError(t, err)
	assert.Equal(t, idA, holder, "a still leads")
	sent := b.requests.snapshot()
	assert.NotEmpty(t, sent)
	for k := range sent {
		assert.True(t, strings.HasPrefix(k, "LEASE GET "), "a standby sends only reads of the Lease, not %s", k)
	}

	// a stops: its controller first, then the Lease is released; b takes over.
	stopped := time.Now()
	require.NoError(t, a.stop(t), "a stopped gracefully")
	holder, err = leaseHolder(ctx, lease)
	require.NoError(t, err)
	assert.NotEqual(t, idA, holder, "a released the Lease when it stopped")
	var idB string
	eventually(t, 10*time.Second, "b leads", func(ctx context.Context) (bool, error) {
		idB, err = leaseHolder(ctx, lease)
		return idB != "" && idB != idA, err
	})
	took := time.Since(stopped)
	t.Logf("handover took %v", took)
	assert.Less(t, took, 10*time.Second, "the handover does not wait for the 15s lease duration")
	eventually(t, 20*time.Second, "b is ready (caches synced)", func(context.Context) (bool, error) {
		code, body := httpGet("http://" + b.healthAddr + "/readyz")
		return code == http.StatusOK && !strings.Contains(body, "standing by"), nil
	})
	require.NoError(t, b.stop(t))
	holder, err = leaseHolder(ctx, lease)
	require.NoError(t, err)
	assert.Empty(t, holder, "b released the Lease when it stopped")
}
