package children

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// Listening is what the server pods answer on: the children in front of them (the
// Service's ports, the Route's termination and target, the NetworkPolicy's ports, the
// ServiceMonitor) follow it, so that they agree with the pods that serve, also while a
// rollback holds a template other than the one the CR asks for.
type Listening struct {
	// Port is the container port of the API.
	Port int32
	// HTTPS: the API is served over TLS.
	HTTPS bool
	// Metrics: the server serves its metrics on ServerMetricsPort.
	Metrics bool
}

// AskedListening is what the pods the CR asks for answer on, at the server version
// ("" when not known).
func AskedListening(l *v1alpha2.LlamaStackDistribution, serverVersion string) Listening {
	return Listening{Port: llsd.Port(l), HTTPS: llsd.TLSEnabled(l), Metrics: MetricsOn(l, serverVersion)}
}

// servingOf reads what the pods of t answer on from its server container (named
// container): the first port not named for metrics, HTTPS when the readiness probe
// asks over it, metrics when a port is named for them. ok is false when t has no such
// container or port.
func ListeningOf(t *corev1.PodTemplateSpec, container string) (s Listening, ok bool) {
	for _, c := range t.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, p := range c.Ports {
			switch {
			case p.Name == MetricsPortName:
				s.Metrics = true
			case !ok:
				s.Port, ok = p.ContainerPort, true
			}
		}
		if ProbedOverHTTPS(c) {
			s.HTTPS = true
		}
		return s, ok
	}
	return Listening{}, false
}

// servingFrom is what the pods of d, the CR's Deployment as it is or is about to be
// applied, answer on; what the CR asks for when d is nil or not read.
func ListeningFrom(l *v1alpha2.LlamaStackDistribution, d *appsv1.Deployment, serverVersion string) Listening {
	if d != nil {
		if s, ok := ListeningOf(&d.Spec.Template, llsd.ContainerName(l)); ok {
			return s
		}
	}
	return AskedListening(l, serverVersion)
}

// ProbedOverHTTPS tells whether c's readiness probe asks over HTTPS: the server in it
// serves TLS.
func ProbedOverHTTPS(c corev1.Container) bool {
	p := c.ReadinessProbe
	return p != nil && p.HTTPGet != nil && p.HTTPGet.Scheme == corev1.URISchemeHTTPS
}

// ServesTLS tells whether the server Deployment's pods serve HTTPS (their probes do):
// the probe and status.serviceURL follow what runs, not what the CR asks for.
func ServesTLS(d *appsv1.Deployment) bool {
	if d == nil {
		return false
	}
	return slices.ContainsFunc(d.Spec.Template.Spec.Containers, ProbedOverHTTPS)
}
