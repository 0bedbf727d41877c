package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
)

// What the pods listen on is read back from the templates the controller makes.
func TestListeningOf(t *testing.T) {
	for name, tc := range map[string]struct {
		mods    []func(*v1alpha2.LlamaStackDistribution)
		version string
		want    children.Listening
	}{
		"plain":   {want: children.Listening{Port: 8321}},
		"metrics": {version: "1.3.0", want: children.Listening{Port: 8321, Metrics: true}},
		"tls":     {mods: hubMods(withServerTLS("serving")), version: "1.3.0", want: children.Listening{Port: 8321, HTTPS: true, Metrics: true}},
		"port": {mods: hubMods(func(l *v1alpha2.LlamaStackDistribution) {
			l.Spec.Networking = &v1alpha2.NetworkingSpec{Port: 9000}
		}), version: "1.2.1", want: children.Listening{Port: 9000, Metrics: true}},
	} {
		t.Run(name, func(t *testing.T) {
			l := newLLSD("app", tc.mods...)
			in := revision.Inputs{Image: testImage, ServerVersion: tc.version}
			if llsd.TLSEnabled(l) {
				in.TLS = &revision.TLS{Hash: "h"}
			}
			d := children.NewDeployment(l, in)
			got, ok := children.ListeningOf(&d.Spec.Template, llsd.ContainerName(l))
			require.True(t, ok)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, children.AskedListening(l, tc.version), got, "what the CR asks for")
		})
	}
	_, ok := children.ListeningOf(&corev1.PodTemplateSpec{}, "llama-stack")
	assert.False(t, ok, "no server container")
	l := newLLSD("app")
	assert.Equal(t, children.AskedListening(l, "1.3.0"), children.ListeningFrom(l, nil, "1.3.0"), "without a Deployment, what the CR asks for")
}

// After a TLS change is rolled back, the pods serve plain HTTP again: the Service's
// port, the Route's termination and target, and status.serviceURL say so.
func TestChildrenFollowARolledBackTLSChange(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	f := newRollbackFixture(t, newLLSD("app", exposedAsRoute("", nil)), serving.secret("serving"),
		operatorConfigMap(map[string]string{revision.KeyFeatureFlags: featureFlagsOn}))
	f.serveOpenShiftRoutes()
	f.converge("app")
	plain := f.service("app-service").Spec.Ports

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking.TLS = &v1alpha2.TLSSpec{Enabled: true, SecretName: "serving"}
	})
	f.converge("app")
	require.Equal(t, "https", f.service("app-service").Spec.Ports[0].Name, "the change rolls out")
	require.Equal(t, "reencrypt", routeTLS(t, f, "termination"))
	failed := f.rollOut()
	f.setDeploymentStatus("app", newPodFailing(true))
	f.crashLooping(failed+"-x1", failed, rollout.RollbackAfterRestarts)
	f.converge("app")
	require.Equal(t, v1alpha2.ReasonRolledBack, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)
	require.False(t, children.ServesTLS(f.deployment("app")), "the pods serve HTTP")

	assert.Equal(t, plain, f.service("app-service").Spec.Ports, "the Service's port is HTTP again")
	assert.Equal(t, "edge", routeTLS(t, f, "termination"), "the Route does not reencrypt to an HTTP server")
	target, _, _ := unstructured.NestedString(f.storedRoute("app-route").Object, "spec", "port", "targetPort")
	assert.Equal(t, children.ServicePortName, target)
	assert.Equal(t, "http://app-service.demo.svc.cluster.local:8321", f.llsd("app").Status.ServiceURL)

	// Held across syncs: nothing flips back.
	assert.Empty(t, mutating(f.sync("app")))
}

// After a move to a server version that serves metrics is rolled back, the metrics
// port, the NetworkPolicy's metrics rule and the ServiceMonitor go with it; the
// NetworkPolicy admits the port the served pods listen on.
func TestChildrenFollowARolledBackMetricsAndPortChange(t *testing.T) {
	old := "docker.io/ogxai/distribution-starter:1.1.0"
	f := newRollbackFixture(t, newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Distribution = v1alpha2.DistributionSpec{Image: old}
	}), operatorConfigMap(map[string]string{revision.KeyFeatureFlags: featureFlagsOn}))
	f.serveServiceMonitors()
	f.converge("app")
	require.Nil(t, f.storedMonitor("app-service-monitor"), "1.1 serves no metrics")
	svc := f.service("app-service").Spec.Ports
	np := f.networkPolicy("app-network-policy").Spec

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Distribution.Image = testImage
		l.Spec.Networking = &v1alpha2.NetworkingSpec{Port: 9000}
	})
	f.converge("app")
	require.NotNil(t, f.storedMonitor("app-service-monitor"), "the change rolls out")
	require.Len(t, f.networkPolicy("app-network-policy").Spec.Ingress, 2)
	failed := f.rollOut()
	f.setDeploymentStatus("app", newPodFailing(true))
	f.crashLooping(failed+"-x1", failed, rollout.RollbackAfterRestarts)
	f.converge("app")
	require.Equal(t, v1alpha2.ReasonRolledBack, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)

	assert.Nil(t, f.storedMonitor("app-service-monitor"), "no ServiceMonitor for pods without metrics")
	assert.Equal(t, np, f.networkPolicy("app-network-policy").Spec, "the NetworkPolicy of the served pods")
	ports := f.service("app-service").Spec.Ports
	require.Len(t, ports, 1, "no metrics port")
	assert.Equal(t, int32(9000), ports[0].Port, "the Service keeps the port the CR asks for")
	assert.Equal(t, svc[0].TargetPort, ports[0].TargetPort, "to the port the served pods listen on")
	assert.Empty(t, mutating(f.sync("app")))
}

func (f *fixture) service(name string) *corev1.Service {
	f.t.Helper()
	svc, err := f.kubeclient.CoreV1().Services(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return svc
}

func (f *fixture) networkPolicy(name string) *networkingv1.NetworkPolicy {
	f.t.Helper()
	np, err := f.kubeclient.NetworkingV1().NetworkPolicies(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return np
}

// routeTLS is a field of the stored Route's spec.tls.
func routeTLS(t *testing.T, f *rollbackFixture, field string) string {
	t.Helper()
	route := f.storedRoute("app-route")
	require.NotNil(t, route)
	v, _, err := unstructured.NestedString(route.Object, "spec", "tls", field)
	require.NoError(t, err)
	return v
}
