package children

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// The metrics endpoint is on where every worker of the server can start: a version that
// has it, an API on another port, and one worker (each worker would bind the port).
func TestMetricsOn(t *testing.T) {
	workers := func(n int32) func(*v1alpha2.LlamaStackDistribution) {
		return func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Workers = ptr.To(n) }
	}
	port := func(p int32) func(*v1alpha2.LlamaStackDistribution) {
		return func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Networking = &v1alpha2.NetworkingSpec{Port: p} }
	}
	for _, tc := range []struct {
		name    string
		version string
		mods    []func(*v1alpha2.LlamaStackDistribution)
		want    bool
	}{
		{name: "1.3, one worker", version: "1.3.0", want: true},
		{name: "1.2, workers: 1", version: "1.2.1", mods: hubMods(workers(1)), want: true},
		{name: "1.3, two workers", version: "1.3.0", mods: hubMods(workers(2))},
		{name: "1.3, eight workers", version: "1.3.0", mods: hubMods(workers(8))},
		{name: "1.1 has no endpoint", version: "1.1.4"},
		{name: "0.7 has no endpoint", version: "0.7.1"},
		{name: "unknown version", version: ""},
		{name: "the API on 9464", version: "1.3.0", mods: hubMods(port(ServerMetricsPort))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLLSD("app", tc.mods...)
			assert.Equal(t, tc.want, MetricsOn(l, tc.version))
			assert.Equal(t, tc.want, AskedListening(l, tc.version).Metrics, "what the pods are asked to listen on")
			in := defaultInputs()
			in.ServerVersion = tc.version
			server := serverOf(t, NewDeployment(l, in))
			var named bool
			for _, p := range server.Ports {
				named = named || p.Name == MetricsPortName
			}
			assert.Equal(t, tc.want, named, "the container's metrics port")
			assert.Equal(t, tc.want, slices.Contains(envNames(server.Env), EnvOGXMetricsEnabled), "%s", EnvOGXMetricsEnabled)
		})
	}
}
