package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

func TestCreateThenNoOp(t *testing.T) {
	f := newFixture(t, []runtime.Object{newLLSD("demo")}...)
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

// Adding storage switches the Deployment to Recreate and, in the same apply, removes the
// rollingUpdate parameters, which Recreate forbids.
func TestRecreateClearsDefaultedRollingUpdate(t *testing.T) {
	f := newFixture(t, newLLSD("demo"))
	f.converge("demo")

	deployments := f.kubeclient.AppsV1().Deployments(testNamespace)
	d, err := deployments.Get(f.ctx, "demo", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type)
	require.NotNil(t, d.Spec.Strategy.RollingUpdate, "the controller sets (and so owns) the rolling-update defaults")

	f.updateLLSD("demo", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = &v1alpha1.StorageSpec{} })
	f.sync("demo")
	d, err = deployments.Get(f.ctx, "demo", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, appsv1.RecreateDeploymentStrategyType, d.Spec.Strategy.Type)
	assert.Nil(t, d.Spec.Strategy.RollingUpdate)
	f.converge("demo")
}
