package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// groupsFailing is a discovery client whose ServerGroups fails.
type groupsFailing struct{}

func (groupsFailing) ServerGroups() (*metav1.APIGroupList, error) {
	return nil, errors.New("the server is unavailable")
}

func TestReadClusterAPIs(t *testing.T) {
	tests := map[string]struct {
		groupVersions []string
		want          clusterAPIs
	}{
		"plain Kubernetes": {[]string{"v1", "apps/v1", "llamastack.io/v1alpha1"}, clusterAPIs{}},
		"OpenShift":        {[]string{"v1", "apps/v1", "security.openshift.io/v1", "route.openshift.io/v1"}, clusterAPIs{openShift: true, routes: true}},
		// Routes alone (MicroShift without SCCs, or a CRD of that group) are not OpenShift's SCCs.
		"another OpenShift group only": {[]string{"v1", "route.openshift.io/v1"}, clusterAPIs{routes: true}},
		"a look-alike group":           {[]string{"v1", "security.openshift.io.example.com/v1", "route.openshift.io/v2"}, clusterAPIs{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
			for _, gv := range tc.groupVersions {
				d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: gv})
			}
			got, err := readClusterAPIs(d)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := readClusterAPIs(groupsFailing{})
	assert.ErrorContains(t, err, "discovering the API groups: the server is unavailable")
}

// groupsFlaky fails its first calls, then answers.
type groupsFlaky struct {
	failures int
	calls    int
	groups   *metav1.APIGroupList
}

func (g *groupsFlaky) ServerGroups() (*metav1.APIGroupList, error) {
	g.calls++
	if g.calls <= g.failures {
		return nil, errors.New("injected 500")
	}
	return g.groups, nil
}

// A failed discovery at start is retried, not fatal; a cancelled start is not waited out.
func TestDiscoverClusterAPIsRetries(t *testing.T) {
	// Past its cap the backoff keeps retrying (wait's own loops stop there).
	fast := wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 4 * time.Millisecond}
	g := &groupsFlaky{failures: 12, groups: &metav1.APIGroupList{Groups: []metav1.APIGroup{{Name: "security.openshift.io"}}}}
	got, err := discoverClusterAPIs(context.Background(), g, fast)
	require.NoError(t, err)
	assert.True(t, got.openShift)
	assert.Equal(t, 13, g.calls)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = discoverClusterAPIs(ctx, groupsFailing{}, fast)
	assert.ErrorIs(t, err, context.Canceled)
}
