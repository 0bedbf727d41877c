package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const (
	testLeaseNamespace = "ops"
	testLeaseName      = "lease"
)

// testElection is a fast election on a fake clientset.
func testElection(kube *k8sfake.Clientset, identity string) election {
	return election{
		leases: kube.CoordinationV1(), namespace: testLeaseNamespace, name: testLeaseName, identity: identity,
		leaseDuration: 2 * time.Second, renewDeadline: time.Second, retryPeriod: 200 * time.Millisecond,
	}
}

// journal records what happened, in order, from several goroutines.
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, s)
}

func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.entries...)
}

// recordReleases adds "released" to j for every Lease update that empties the holder.
func recordReleases(kube *k8sfake.Clientset, j *journal) {
	kube.PrependReactor("update", "leases", func(a core.Action) (bool, runtime.Object, error) {
		if l := a.(core.UpdateAction).GetObject().(*coordinationv1.Lease); ptr.Deref(l.Spec.HolderIdentity, "") == "" {
			j.add("released")
		}
		return false, nil, nil
	})
}

func holder(t *testing.T, ctx context.Context, kube *k8sfake.Clientset) string {
	t.Helper()
	l, err := kube.CoordinationV1().Leases(testLeaseNamespace).Get(ctx, testLeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

func readyCode(h *health) int {
	rec := httptest.NewRecorder()
	h.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code
}

// On shutdown the controller stops first, with the Lease still held and renewed while it
// drains; the Lease is released only then, and Run returns nil.
func TestLeaderElectionReleasesAfterTheControllerStopped(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := k8sfake.NewClientset()
	var j journal
	recordReleases(kube, &j)
	h := newHealth(true)
	assert.Equal(t, http.StatusOK, readyCode(h), "standing by is ready")

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := make(chan struct{})
	run := func(ctx context.Context) error {
		close(started)
		h.setRunning(func() bool { return true })
		<-ctx.Done()
		time.Sleep(3 * 200 * time.Millisecond) // workers draining, over a few renewals
		assert.Equal(t, "me", holder(t, context.Background(), kube), "the Lease is held while the controller drains")
		j.add("stopped")
		h.setRunning(nil)
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- runLeaderElected(runCtx, testElection(kube, "me"), h, run) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("never led")
	}
	assert.Equal(t, "me", holder(t, ctx, kube))
	assert.Equal(t, http.StatusOK, readyCode(h))
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("runLeaderElected did not return")
	}
	assert.Equal(t, []string{"stopped", "released"}, j.list())
	assert.Empty(t, holder(t, ctx, kube), "released")
	assert.Equal(t, http.StatusServiceUnavailable, readyCode(h), "stopped")
}

// When renewals fail, the controller is stopped before the elector's release goes out,
// and the loss is an error (the process exits and restarts as a candidate).
func TestLeaderElectionLostStopsTheControllerFirst(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := k8sfake.NewClientset()
	var j journal
	var failing sync.Mutex
	fail := false
	kube.PrependReactor("update", "leases", func(a core.Action) (bool, runtime.Object, error) {
		failing.Lock()
		defer failing.Unlock()
		if l := a.(core.UpdateAction).GetObject().(*coordinationv1.Lease); fail && ptr.Deref(l.Spec.HolderIdentity, "") != "" {
			return true, nil, errors.New("the API server is unwell")
		}
		return false, nil, nil
	})
	recordReleases(kube, &j)

	started := make(chan struct{})
	run := func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		j.add("stopped")
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- runLeaderElected(ctx, testElection(kube, "me"), newHealth(true), run) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("never led")
	}
	failing.Lock()
	fail = true
	failing.Unlock()
	select {
	case err := <-done:
		assert.ErrorContains(t, err, "lost the leader lease ops/lease")
	case <-time.After(10 * time.Second):
		t.Fatal("runLeaderElected did not return after the renewals failed")
	}
	assert.Equal(t, []string{"stopped", "released"}, j.list())
}

// A standby never runs the controller and sends nothing but reads of the Lease; when the
// leader releases the Lease it takes over at its next retry, well before the lease
// duration.
func TestLeaderElectionStandbyThenHandover(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := k8sfake.NewClientset()
	aCtx, stopA := context.WithCancel(ctx)
	defer stopA()
	aLeads := make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		aDone <- runLeaderElected(aCtx, testElection(kube, "a"), newHealth(true), func(ctx context.Context) error {
			close(aLeads)
			<-ctx.Done()
			return nil
		})
	}()
	<-aLeads

	// B's requests are counted apart from A's.
	var bRequests journal
	bLeases := testElection(kube, "b")
	bLeases.leases = countingLeases{LeasesGetter: kube.CoordinationV1(), j: &bRequests}
	bCtx, stopB := context.WithCancel(ctx)
	defer stopB()
	bLeads := make(chan time.Time, 1)
	bDone := make(chan error, 1)
	hb := newHealth(true)
	go func() {
		bDone <- runLeaderElected(bCtx, bLeases, hb, func(ctx context.Context) error {
			bLeads <- time.Now()
			<-ctx.Done()
			return nil
		})
	}()
	time.Sleep(time.Second)
	assert.Equal(t, "a", holder(t, ctx, kube))
	assert.Equal(t, http.StatusOK, readyCode(hb), "a standby is ready")
	for _, r := range bRequests.list() {
		assert.Equal(t, "get", r, "a standby only reads the Lease")
	}
	assert.NotEmpty(t, bRequests.list())

	released := time.Now()
	stopA()
	require.NoError(t, <-aDone)
	select {
	case at := <-bLeads:
		// The lease duration is 2s; B takes over at its next retry (200ms, jittered).
		assert.Less(t, at.Sub(released), time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("B never took over")
	}
	assert.Equal(t, "b", holder(t, ctx, kube))
	stopB()
	require.NoError(t, <-bDone)
}

// countingLeases records the verb of every Lease request.
type countingLeases struct {
	coordinationv1client.LeasesGetter
	j *journal
}

func (c countingLeases) Leases(namespace string) coordinationv1client.LeaseInterface {
	return countingLease{LeaseInterface: c.LeasesGetter.Leases(namespace), j: c.j}
}

type countingLease struct {
	coordinationv1client.LeaseInterface
	j *journal
}

func (c countingLease) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	c.j.add("get")
	return c.LeaseInterface.Get(ctx, name, o)
}

func (c countingLease) Create(ctx context.Context, l *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	c.j.add("create")
	return c.LeaseInterface.Create(ctx, l, o)
}

func (c countingLease) Update(ctx context.Context, l *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	c.j.add("update")
	return c.LeaseInterface.Update(ctx, l, o)
}
