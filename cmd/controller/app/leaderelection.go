package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Leader election defaults, those of Kubernetes' own controllers.
const (
	DefaultLeaseDuration     = 15 * time.Second
	DefaultRenewDeadline     = 10 * time.Second
	DefaultRetryPeriod       = 2 * time.Second
	DefaultLeaseName         = "llama-stack-controller"
	leaderHealthzGracePeriod = 20 * time.Second
)

// election is one candidate's view of the Lease.
type election struct {
	leases    coordinationv1client.LeasesGetter
	namespace string
	name      string
	identity  string

	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
}

// newIdentity names this candidate in the Lease: the host name (the pod's name in a
// cluster) and a random suffix, so two processes on one host never share it.
func newIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("reading the host name for the leader election identity: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// runLeaderElected waits until it holds the Lease, then runs run (the controller with its
// informers) until ctx is cancelled or the Lease is lost, and gives the Lease up only
// after run has returned, so that two controllers never write at once.
//
// Cancelling ctx stops run; the Lease is renewed meanwhile (the elector has its own
// context) and released once run has returned: a standby takes over at its next retry,
// without waiting for the lease to expire. When the Lease cannot be renewed, run is
// stopped at once and an error is returned, so that the process exits and restarts as
// a candidate.
func runLeaderElected(ctx context.Context, e election, h *health, run func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	lease := klog.KRef(e.namespace, e.name)

	// runCtx is the controller's: cancelled by ctx, or when the Lease is lost.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	// stopped is closed once no controller runs and none will start.
	stopped := make(chan struct{})
	lock := &releaseAfterStop{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.namespace, Name: e.name},
			Client:     e.leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: e.identity},
		},
		stop:    stopRun,
		stopped: stopped,
	}
	leading := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            e.name,
		LeaseDuration:   e.leaseDuration,
		RenewDeadline:   e.renewDeadline,
		RetryPeriod:     e.retryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        h.watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) { leading <- leadCtx },
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				logger.Info("Leader observed", "lease", lease, "leader", identity, "self", identity == e.identity)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("setting up leader election: %w", err)
	}
	if h.watchdog != nil {
		h.watchdog.SetLeaderElection(elector)
	}

	// The elector's context outlives ctx: the Lease is renewed while the controller
	// drains, and released only when this function cancels it.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	electorDone := make(chan struct{})
	logger.Info("Waiting for the leader lease", "lease", lease, "identity", e.identity)
	go func() {
		defer close(electorDone)
		elector.Run(electorCtx)
	}()

	var runErr error
	lost := false
	select {
	case <-ctx.Done():
		// Never led, or the Lease was won just as the process was told to stop.
	case <-electorDone:
		// The elector gave up before the controller started (a lost first renewal).
		lost = true
	case leadCtx := <-leading:
		logger.Info("Leading: starting the controller", "lease", lease)
		h.setStandby(false)
		stopOnLoss := context.AfterFunc(leadCtx, stopRun)
		runErr = run(runCtx)
		stopOnLoss()
		lost = ctx.Err() == nil
	}
	close(stopped)
	stopRun()
	stopElector()
	<-electorDone
	switch {
	case runErr != nil:
		return runErr
	case lost:
		return fmt.Errorf("lost the leader lease %s", lease)
	}
	logger.Info("Leader election stopped", "lease", lease)
	return nil
}

// releaseAfterStop is the Lease lock, except that giving the Lease up first stops the
// controller and waits until it has stopped. The elector releases the Lease when its
// context is cancelled, which happens here only after the controller stopped, but also
// right after a failed renewal, before it tells the controller to stop; this keeps the
// order in both cases. If the controller does not stop in time, the Lease is left to
// expire instead.
type releaseAfterStop struct {
	resourcelock.Interface
	stop    func()
	stopped <-chan struct{}
}

func (l *releaseAfterStop) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if record.HolderIdentity == "" { // only a release empties the holder
		l.stop()
		select {
		case <-l.stopped:
		case <-ctx.Done():
			return errors.New("the controller has not stopped: the lease is left to expire")
		}
		klog.FromContext(ctx).Info("Releasing the leader lease", "lease", l.Describe())
	}
	return l.Interface.Update(ctx, record)
}
