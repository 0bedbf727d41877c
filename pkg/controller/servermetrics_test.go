package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// starterVersion is the server version of the pinned starter image.
func starterVersion() string {
	return revision.ImageServerVersion(revision.BuiltinDistributions()["starter"])
}

func TestServerServesMetrics(t *testing.T) {
	for version, want := range map[string]bool{
		"":        false,
		"latest":  false,
		"0.7.1":   false, // llama-stack
		"0.8.0":   false, // OGX before the endpoint is evidenced
		"1.1.2":   false,
		"1.2.1":   true,
		"1.3.0":   true,
		"2.0.0":   true,
		"1.2.0rc": false,
	} {
		assert.Equal(t, want, children.ServerServesMetrics(version), version)
	}
	assert.True(t, children.ServerServesMetrics(starterVersion()), "the pinned starter serves metrics")
}

// A server that serves metrics is told to, on all of the pod's interfaces at 9464,
// and the port is named on the container and the Service; any other is left alone.
func TestMetricsPortOnTheContainerAndTheService(t *testing.T) {
	l := newLLSD("app")
	image := revision.BuiltinDistributions()["starter"]
	in := revision.Inputs{Image: image, Replicas: ptr.To(int32(1)), ServerVersion: starterVersion(), Distro: "starter"}
	c := serverContainerOf(t, children.NewDeployment(l, in))
	assert.Equal(t, "1", envValue(t, c.Env, "OGX_METRICS_ENDPOINT_ENABLED"))
	assert.Equal(t, "0.0.0.0", envValue(t, c.Env, "OGX_METRICS_HOST"))
	assert.Equal(t, "9464", envValue(t, c.Env, "OGX_METRICS_PORT"))
	assert.Contains(t, c.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 9464, Protocol: corev1.ProtocolTCP})
	svc := children.NewService(l, children.AskedListening(l, starterVersion()))
	require.Len(t, svc.Spec.Ports, 2)
	assert.Equal(t, corev1.ServicePort{Name: "metrics", Port: 9464, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP}, svc.Spec.Ports[1])
	assert.Equal(t, "http", svc.Spec.Ports[0].Name, "the API port stays first")

	for _, version := range []string{"0.7.1", "0.8.0", ""} {
		in.ServerVersion = version
		c := serverContainerOf(t, children.NewDeployment(l, in))
		assert.Len(t, c.Ports, 1, version)
		for _, e := range c.Env {
			assert.NotContains(t, e.Name, "OGX_METRICS", version)
		}
		assert.Len(t, children.NewService(l, children.AskedListening(l, version)).Spec.Ports, 1, version)
	}
}

// A server whose API listens on the metrics port is not also told to serve metrics
// there: it would fail to bind.
func TestMetricsStayOffWhenTheAPIHasTheirPort(t *testing.T) {
	l := newLLSD("app")
	l.Spec.Networking = &v1alpha2.NetworkingSpec{Port: 9464}
	in := revision.Inputs{Image: revision.BuiltinDistributions()["starter"], Replicas: ptr.To(int32(1)), ServerVersion: starterVersion(), Distro: "starter"}
	c := serverContainerOf(t, children.NewDeployment(l, in))
	assert.Equal(t, []corev1.ContainerPort{{ContainerPort: 9464, Protocol: corev1.ProtocolTCP}}, c.Ports)
	for _, e := range c.Env {
		assert.NotContains(t, e.Name, "OGX_METRICS")
	}
	assert.Len(t, children.NewService(l, children.AskedListening(l, starterVersion())).Spec.Ports, 1)
}
