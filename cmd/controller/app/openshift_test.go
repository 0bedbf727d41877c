package app

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// groupsFailing is a discovery client whose ServerGroups fails.
type groupsFailing struct{}

func (groupsFailing) ServerGroups() (*metav1.APIGroupList, error) {
	return nil, errors.New("the server is unavailable")
}

func TestIsOpenShift(t *testing.T) {
	tests := map[string]struct {
		groupVersions []string
		want          bool
	}{
		"plain Kubernetes": {[]string{"v1", "apps/v1", "llamastack.io/v1alpha1"}, false},
		"OpenShift":        {[]string{"v1", "apps/v1", "security.openshift.io/v1", "route.openshift.io/v1"}, true},
		// Routes alone (MicroShift without SCCs, or a CRD of that group) are not enough.
		"another OpenShift group only": {[]string{"v1", "route.openshift.io/v1"}, false},
		"a look-alike group":           {[]string{"v1", "security.openshift.io.example.com/v1"}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
			for _, gv := range tc.groupVersions {
				d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: gv})
			}
			got, err := isOpenShift(d)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := isOpenShift(groupsFailing{})
	assert.ErrorContains(t, err, "discovering the API groups: the server is unavailable")
}
