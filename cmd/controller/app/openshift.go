package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// openShiftSecurityGroup is the API group of OpenShift's SecurityContextConstraints,
// and openShiftRouteGroupVersion that of its Routes.
const (
	openShiftSecurityGroup     = "security.openshift.io"
	openShiftRouteGroupVersion = "route.openshift.io/v1"
)

// clusterAPIs is what discovery tells at start.
type clusterAPIs struct {
	// openShift: the cluster serves the security.openshift.io API group, that is
	// SecurityContextConstraints admit its pods.
	openShift bool
	// routes: the cluster serves route.openshift.io/v1 (on OpenShift, from its own API
	// server rather than a CRD).
	routes bool
}

// readClusterAPIs asks discovery once for the API groups.
func readClusterAPIs(d discovery.ServerGroupsInterface) (clusterAPIs, error) {
	groups, err := d.ServerGroups()
	if err != nil {
		return clusterAPIs{}, fmt.Errorf("discovering the API groups: %w", err)
	}
	var apis clusterAPIs
	for _, g := range groups.Groups {
		if g.Name == openShiftSecurityGroup {
			apis.openShift = true
		}
		for _, v := range g.Versions {
			if v.GroupVersion == openShiftRouteGroupVersion {
				apis.routes = true
			}
		}
	}
	return apis, nil
}

// discoverClusterAPIs is readClusterAPIs, asked again with a backoff (half a second
// growing to 30 s, then every 30 s) for as long as discovery fails: a failed request at
// start must not stop the controller. It returns ctx's error once ctx is cancelled.
func discoverClusterAPIs(ctx context.Context, d discovery.ServerGroupsInterface, backoff wait.Backoff) (clusterAPIs, error) {
	delay := backoff.DelayFunc()
	for {
		apis, err := readClusterAPIs(d)
		if err == nil {
			return apis, nil
		}
		klog.FromContext(ctx).Error(err, "Retrying API discovery")
		timer := time.NewTimer(delay())
		select {
		case <-ctx.Done():
			timer.Stop()
			return clusterAPIs{}, ctx.Err()
		case <-timer.C:
		}
	}
}

// discoveryBackoff spaces out the retries of discoverClusterAPIs; past the cap, every
// retry waits the cap.
var discoveryBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 30 * time.Second}
