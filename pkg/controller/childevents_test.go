package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// normalEvents keeps the Normal Events of events whose reason is one of reasons.
func normalEvents(events []string, reasons ...string) []string {
	var out []string
	for _, e := range events {
		for _, r := range reasons {
			if strings.HasPrefix(e, "Normal "+r+" ") {
				out = append(out, e)
			}
		}
	}
	return out
}

// A sync records one Event for the children it created and one for those it updated,
// in the order it wrote them.
func TestOneEventPerSyncForTheChildrenWritten(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
	}))
	f.sync("app")
	assert.Equal(t, []string{"Normal Created Created PersistentVolumeClaim app-pvc, Service app-service, Deployment app"},
		normalEvents(f.events(), "Created", "Updated"))
	f.converge("app")
	assert.Empty(t, normalEvents(f.events(), "Created", "Updated"), "nothing written, nothing recorded")

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Port = 8080
		l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	})
	f.sync("app")
	assert.Equal(t, []string{
		"Normal Created Created PodDisruptionBudget app-pdb",
		"Normal Updated Updated Service app-service, Deployment app",
	}, normalEvents(f.events(), "Created", "Updated"))
}

// The children a failed sync created before the failure are recorded all the same.
func TestChildEventsOfAFailedSync(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
	}))
	f.kubeclient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("admission webhook denied the request")
	})
	err := f.c.syncHandler(f.ctx, key("app"))
	require.ErrorContains(t, err, "admission webhook denied the request")
	assert.Equal(t, []string{"Normal Created Created PersistentVolumeClaim app-pvc, Service app-service"},
		normalEvents(f.events(), "Created", "Updated"))
}

// The children's Event comes before the Events of the status write that follows.
func TestChildEventsBeforeTheStatusEvents(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 3}
	}))
	f.sync("app")
	events := f.events()
	require.Len(t, events, 2, "%v", events)
	assert.True(t, strings.HasPrefix(events[0], "Normal Created Created PersistentVolumeClaim app-pvc, Service app-service, Deployment app, "), events[0])
	assert.True(t, strings.HasPrefix(events[1], "Warning ReadWriteOnceShared "), events[1])
}
