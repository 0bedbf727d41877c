package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// The controller reads v1alpha2. A CR written in v1alpha1 (newLLSDv1) reaches it
// converted; these compare the two forms of one CR, and the v1alpha2-only fields.

func TestV1alpha2UnsetFieldsActAsTheirDefaults(t *testing.T) {
	// workload.replicas unset is one replica, as v1alpha1's default replicas: 1.
	want := convergedChildren(t, newLLSDv1("app"))
	got := convergedChildren(t, newLLSD("app"))
	assert.Equal(t, want, got)
	assert.Contains(t, got, "Deployment")
	assert.NotContains(t, got, "PodDisruptionBudget", "one replica: no PDB")
}

func TestV1alpha2ExposeIsEnabledOnceWritten(t *testing.T) {
	got := convergedChildren(t, newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking = &v1alpha2.NetworkingSpec{Expose: &v1alpha2.ExposeSpec{}}
	}))
	want := convergedChildren(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true}
	}))
	assert.Contains(t, got, "Ingress", "expose: {} exposes")
	assert.Equal(t, want, got)

	got = convergedChildren(t, newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking = &v1alpha2.NetworkingSpec{Expose: &v1alpha2.ExposeSpec{Enabled: ptr.To(false)}}
	}))
	assert.NotContains(t, got, "Ingress", "expose.enabled: false")
}

func TestV1alpha2ExposeAndIngressOptions(t *testing.T) {
	got := convergedChildren(t, newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking = &v1alpha2.NetworkingSpec{Port: 9000, Expose: &v1alpha2.ExposeSpec{
			Hostname: "llama.example.com", ClassName: ptr.To("nginx"), TLSSecretName: "tls",
			Annotations: map[string]string{"a.example.com/b": "c"},
		}}
	}))
	want := convergedChildren(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Port = 9000
		l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true, Ingress: &v1alpha1.IngressSpec{
			Host: "llama.example.com", ClassName: ptr.To("nginx"), TLSSecretName: "tls",
			Annotations: map[string]string{"a.example.com/b": "c"},
		}}
	}))
	assert.Equal(t, want, got)
}

func TestV1alpha2OverrideConfigIsTheUserConfig(t *testing.T) {
	cfg := configMap(testNamespace, "run", map[string]string{"config.yaml": startingUserConfig}, nil)
	got := convergedChildren(t, cfg, newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.OverrideConfig = &v1alpha2.OverrideConfigSpec{ConfigMapName: "run"}
	}))
	want := convergedChildren(t, cfg.DeepCopy(), newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "run"}
	}))
	assert.Equal(t, want, got)
	assert.Contains(t, got["Deployment"], llsd.AnnotationUserConfigHash, "the ConfigMap is mounted")
}

func TestV1alpha2StatusIsWrittenInV1alpha2(t *testing.T) {
	f := newFixture(t, newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Status.ResolvedDistribution = &v1alpha2.ResolvedDistributionStatus{ConfigHash: "kept"}
	}))
	f.converge("app")
	got := f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseInitializing, got.Status.Phase)
	assert.Equal(t, int64(1), got.Status.ObservedGeneration)
	assert.Equal(t, "starter", got.Status.DistributionConfig.ActiveDistribution)
	require.NotNil(t, got.Status.ResolvedDistribution, "a status field the controller does not write yet is kept")
	assert.Equal(t, "kept", got.Status.ResolvedDistribution.ConfigHash)
}
