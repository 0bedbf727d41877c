package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	core "k8s.io/client-go/testing"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

func TestCreateThenNoOp(t *testing.T) {
	f := newFixture(t, newLLSD("demo"))
	actions := f.sync("demo")
	t.Logf("%v", describe(actions))
	assert.Equal(t, []string{
		"get deployments demo",
		"get services demo-service",
		"patch deployments demo",
		"patch services demo-service",
		"update llamastackdistributions/status demo",
	}, describe(actions))
	second := f.sync("demo")
	require.Empty(t, describe(second))
}

// A child the API server rejects as invalid (here a podOverrides volume named like the
// controller's own) is a user error: a condition and an Event, not a retry loop.
func TestInvalidChildIsAUserError(t *testing.T) {
	f := newFixture(t, newLLSD("demo", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{Volumes: []corev1.Volume{{Name: "lls-storage"}}}
	}))
	f.kubeclient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "demo",
			field.ErrorList{field.Duplicate(field.NewPath("spec", "template", "spec", "volumes").Index(1).Child("name"), "lls-storage")})
	})
	f.sync("demo") // no error returned: nothing to retry until the spec changes

	l := f.llsd("demo")
	assert.Equal(t, v1alpha1.PhaseFailed, l.Status.Phase)
	cond := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionDeploymentReady)
	require.NotNil(t, cond)
	assert.Equal(t, v1alpha1.ReasonResourceInvalid, cond.Reason)
	assert.Contains(t, cond.Message, `Duplicate value: "lls-storage"`)
	assert.True(t, hasEvent(f.events(), "Warning ResourceInvalid"))
}
