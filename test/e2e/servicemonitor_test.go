//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

const serviceMonitorCRDName = "servicemonitors.monitoring.coreos.com"

var serviceMonitors = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}

// The ServiceMonitor is an optional kind. Without its CRD a server that serves metrics
// (the pinned starter) has its metrics port on the Service and in the NetworkPolicy and
// nothing waits. Once the Prometheus Operator's CRD is installed, the controller finds it
// without a restart and makes one ServiceMonitor per such server, which the real CRD's
// schema stores as sent, and which is written once; the operator ConfigMap turns them
// off and on; it goes with its CR; and when the CRD goes, new CRs still become Ready.
func TestServiceMonitorFollowsThePrometheusOperatorAPI(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dyn, err := dynamic.NewForConfig(env.cfg)
	require.NoError(t, err)
	monitors := dyn.Resource(serviceMonitors).Namespace(ns)
	flags := func(serviceMonitors bool) map[string]string {
		return map[string]string{"featureFlags": "enableNetworkPolicy:\n  enabled: true\nenableServiceMonitor:\n  enabled: " +
			map[bool]string{true: "true", false: "false"}[serviceMonitors] + "\n"}
	}
	setOperatorConfig(t, flags(true))
	create(t, llsd(ns, "watched"))
	waitReady(t, ns, "watched")

	svc, err := env.kube.CoreV1().Services(ns).Get(ctx, "watched-service", metav1.GetOptions{})
	require.NoError(t, err)
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Name)
	}
	assert.Contains(t, ports, "metrics", "the pinned server serves metrics")
	var np *networkingv1.NetworkPolicy
	eventually(t, 30*time.Second, "the NetworkPolicy admits scrapes", func(ctx context.Context) (bool, error) {
		np, err = env.kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "watched-network-policy", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && len(np.Spec.Ingress) == 2, err
	})
	assert.Equal(t, int32(9464), np.Spec.Ingress[1].Ports[0].Port.IntVal)

	// The CRD appears.
	kubectl(t, "apply", "--server-side", "-f", prometheusOperatorCRD(t, "monitoring.coreos.com_servicemonitors.yaml"))
	deleteCRD := func() {
		kubectl(t, "delete", "crd", serviceMonitorCRDName, "--ignore-not-found", "--wait=true")
	}
	t.Cleanup(deleteCRD)
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, env.cfg, serviceMonitorCRDName, 30*time.Second))
	var sm *unstructured.Unstructured
	appears(t, "the controller makes the ServiceMonitor", func(ctx context.Context) (err error) {
		sm, err = monitors.Get(ctx, "watched-service-monitor", metav1.GetOptions{})
		return err
	})
	l := get(t, ns, "watched")
	ref := metav1.GetControllerOf(sm)
	require.NotNil(t, ref)
	assert.Equal(t, l.UID, ref.UID, "the ServiceMonitor is controlled by its CR")
	endpoints, _, err := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.NoError(t, err)
	assert.Equal(t, []any{map[string]any{"port": "metrics", "path": "/metrics", "scheme": "http"}}, endpoints,
		"stored as sent: the CRD's schema prunes nothing")
	matchLabels, _, err := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	require.NoError(t, err)
	selected, err := env.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(matchLabels).String()})
	require.NoError(t, err)
	require.Len(t, selected.Items, 1, "it selects one Service")
	assert.Equal(t, "watched-service", selected.Items[0].Name)

	// Every CR is synced again (the ConfigMap changes, and a second CR comes and is
	// Ready): the ServiceMonitor is not written again.
	written := sm.GetResourceVersion()
	setOperatorConfig(t, map[string]string{"featureFlags": "enableNetworkPolicy:\n  enabled: false\n"})
	gone(t, "the NetworkPolicy turned off", func(ctx context.Context) error {
		_, err := env.kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "watched-network-policy", metav1.GetOptions{})
		return err
	})
	create(t, llsd(ns, "second"))
	waitReady(t, ns, "second")
	sm, err = monitors.Get(ctx, "watched-service-monitor", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, written, sm.GetResourceVersion(), "a sync that changes nothing writes nothing")
	_, err = monitors.Get(ctx, "second-service-monitor", metav1.GetOptions{})
	require.NoError(t, err, "a ConfigMap that does not name the flag allows them")

	// Turned off, they go; on again, they come back.
	setOperatorConfig(t, flags(false))
	for _, name := range []string{"watched", "second"} {
		gone(t, "the ServiceMonitor turned off", func(ctx context.Context) error {
			_, err := monitors.Get(ctx, name+"-service-monitor", metav1.GetOptions{})
			return err
		})
	}
	setOperatorConfig(t, flags(true))
	appears(t, "the ServiceMonitor is made again", func(ctx context.Context) error {
		_, err := monitors.Get(ctx, "watched-service-monitor", metav1.GetOptions{})
		return err
	})

	// It goes with its CR.
	require.NoError(t, env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Delete(ctx, "watched", metav1.DeleteOptions{}))
	gone(t, "the ServiceMonitor of the deleted CR", func(ctx context.Context) error {
		_, err := monitors.Get(ctx, "watched-service-monitor", metav1.GetOptions{})
		return err
	})

	// The CRD goes: nothing waits for it.
	deleteCRD()
	create(t, llsd(ns, "after"))
	waitReady(t, ns, "after")
}

// A server of the pinned 1.3 with two workers gets no metrics endpoint: each worker
// would start its own on port 9464 and every one after the first would fail. Its
// Deployment has no metrics variables or port and its Service no metrics port; back at
// one worker, the endpoint is on again.
func TestMetricsOffWithWorkers(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	create(t, llsd(ns, "busy", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Workers = ptr.To[int32](2) }))
	waitReady(t, ns, "busy")
	metrics := func() (vars, containerPort, servicePort bool) {
		d := deployment(t, ns, "busy")
		c := d.Spec.Template.Spec.Containers[0]
		for _, e := range c.Env {
			vars = vars || e.Name == "OGX_METRICS_ENDPOINT_ENABLED"
		}
		for _, p := range c.Ports {
			containerPort = containerPort || p.Name == "metrics"
		}
		svc, err := env.kube.CoreV1().Services(ns).Get(ctx, "busy-service", metav1.GetOptions{})
		require.NoError(t, err)
		for _, p := range svc.Spec.Ports {
			servicePort = servicePort || p.Name == "metrics"
		}
		return vars, containerPort, servicePort
	}
	e, cp, sp := metrics()
	assert.False(t, e || cp || sp, "two workers: no metrics (env %v, container port %v, Service port %v)", e, cp, sp)

	edit(t, ns, "busy", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Workers = ptr.To[int32](1) })
	waitDeployment(t, ns, "busy", "one worker: the metrics endpoint on", func(d *appsv1.Deployment) bool {
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "OGX_METRICS_ENDPOINT_ENABLED" {
				return true
			}
		}
		return false
	})
	waitReady(t, ns, "busy")
	e, cp, sp = metrics()
	assert.True(t, e && cp && sp, "one worker: metrics (env %v, container port %v, Service port %v)", e, cp, sp)
}
