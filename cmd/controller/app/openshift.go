package app

import (
	"fmt"

	"k8s.io/client-go/discovery"
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
