package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// openShiftSecurityGroup is the API group of OpenShift's SecurityContextConstraints.
const openShiftSecurityGroup = "security.openshift.io"

// isOpenShift reports whether the cluster serves the security.openshift.io API group,
// that is whether SecurityContextConstraints admit its pods. It is asked once per start.
func isOpenShift(d discovery.ServerGroupsInterface) (bool, error) {
	groups, err := d.ServerGroups()
	if err != nil {
		return false, fmt.Errorf("discovering the API groups: %w", err)
	}
	for _, g := range groups.Groups {
		if g.Name == openShiftSecurityGroup {
			return true, nil
		}
	}
	return false, nil
}

// discoverOpenShift is isOpenShift, asked again with a backoff (half a second growing to
// 30 s, then every 30 s) for as long as discovery fails: a failed request at start must
// not stop the controller. It returns ctx's error once ctx is cancelled.
func discoverOpenShift(ctx context.Context, d discovery.ServerGroupsInterface, backoff wait.Backoff) (bool, error) {
	delay := backoff.DelayFunc()
	for {
		openShift, err := isOpenShift(d)
		if err == nil {
			return openShift, nil
		}
		klog.FromContext(ctx).Error(err, "Retrying API discovery")
		timer := time.NewTimer(delay())
		select {
		case <-ctx.Done():
			timer.Stop()
			return false, ctx.Err()
		case <-timer.C:
		}
	}
}

// discoveryBackoff spaces out the retries of discoverOpenShift; past the cap, every
// retry waits the cap.
var discoveryBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 30 * time.Second}
