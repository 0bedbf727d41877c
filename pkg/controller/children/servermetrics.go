package children

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// The server's own Prometheus metrics. OGX servers serve them on a port of their own
// when OGX_METRICS_ENDPOINT_ENABLED is set (OGX_METRICS_HOST, default 127.0.0.1, and
// OGX_METRICS_PORT, default 9464, say where). The controller turns them on, on all
// interfaces of the pod, for the versions where that is evidenced: OGX 1.2 and later
// (the successor operator sets these variables from its v0.12.0, which pinned 1.2.1,
// and its release tests ran 1.2.1 and 1.3.0 with them). Older servers are left as they
// are: a llama-stack (up to 0.7) or OGX 0.8 server has no such endpoint.
const (
	EnvOGXMetricsEnabled = "OGX_METRICS_ENDPOINT_ENABLED"
	EnvOGXMetricsHost    = "OGX_METRICS_HOST"
	EnvOGXMetricsPort    = "OGX_METRICS_PORT"

	// ServerMetricsPort is where the server serves /metrics, the container port and the
	// Service port named MetricsPortName.
	ServerMetricsPort int32 = 9464
	MetricsPortName         = "metrics"
)

// ServerServesMetrics reports whether the server version ("" when not known) has the
// metrics endpoint the controller turns on.
func ServerServesMetrics(version string) bool {
	v, err := configgen.ParseVersion(version)
	return err == nil && v.AtLeast(1, 2)
}

// MetricsOn reports whether the controller turns the metrics endpoint of l's server
// on: the version has it, the API does not already listen on its port (a server asked
// to serve both on one port would fail to bind the second), and the server runs one
// worker. Each worker process starts the endpoint in its own start-up
// (initialize_telemetry from Stack.initialize, guarded per process only, at 1.2 and
// 1.3), so with two or more every worker after the first would fail to bind the port
// and not start.
func MetricsOn(l *v1alpha2.LlamaStackDistribution, version string) bool {
	return ServerServesMetrics(version) && llsd.Port(l) != ServerMetricsPort && serverWorkers(l) == 1
}

// MetricsEnv turns the server's metrics endpoint on.
func MetricsEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: EnvOGXMetricsEnabled, Value: "1"},
		{Name: EnvOGXMetricsHost, Value: "0.0.0.0"},
		{Name: EnvOGXMetricsPort, Value: strconv.Itoa(int(ServerMetricsPort))},
	}
}

// MetricsContainerPort names the metrics port on the server container.
func MetricsContainerPort() corev1.ContainerPort {
	return corev1.ContainerPort{Name: MetricsPortName, ContainerPort: ServerMetricsPort, Protocol: corev1.ProtocolTCP}
}

// MetricsServicePort is the Service's port in front of it, for ServiceMonitors.
func MetricsServicePort() corev1.ServicePort {
	return corev1.ServicePort{Name: MetricsPortName, Port: ServerMetricsPort,
		TargetPort: intstr.FromString(MetricsPortName), Protocol: corev1.ProtocolTCP}
}
