//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// Every optional kind installed from its real CRD (the Prometheus Operator's
// ServiceMonitor, OpenShift's Route, Gateway API's Gateway, HTTPRoute and
// BackendTLSPolicy) and CRs with every optional child on: a NetworkPolicy, an HPA and a
// PDB on each; an HTTPRoute and its BackendTLSPolicy on one, a Route on another, an
// Ingress on a third; a ServiceMonitor on all. Once they converged, the controller syncs
// every CR again several times (the operator ConfigMap changes, and nothing any CR
// depends on does): it sends no mutating request about them, counted at its client's
// transport, and records no Event. The API server stores what it defaults (a backend's
// kind and weight, a port's protocol, an owner reference keyed by uid), and none of it
// is a reason to write.
func TestUnchangedSyncsWriteNothing(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gw, err := gatewayclient.NewForConfig(env.cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(env.cfg)
	require.NoError(t, err)

	crds := []struct{ name, file string }{
		{serviceMonitorCRDName, prometheusOperatorCRD(t, "monitoring.coreos.com_servicemonitors.yaml")},
		{routeCRDName, openShiftRouteCRD(t)},
		{gatewayCRDName, gatewayAPIFile(t, "gateway.networking.k8s.io_gateways.yaml")},
		{httpRouteCRDName, gatewayAPIFile(t, "gateway.networking.k8s.io_httproutes.yaml")},
		{backendTLSPolicyCRDName, gatewayAPIFile(t, "gateway.networking.k8s.io_backendtlspolicies.yaml")},
	}
	for _, crd := range crds {
		kubectl(t, "apply", "--server-side", "-f", crd.file)
		t.Cleanup(func() { kubectl(t, "delete", "crd", crd.name, "--ignore-not-found", "--wait=true") })
	}
	for _, crd := range crds {
		require.NoError(t, localcluster.WaitCRDEstablished(ctx, env.cfg, crd.name, 30*time.Second))
	}
	setOperatorConfig(t, map[string]string{"featureFlags": "enableNetworkPolicy:\n  enabled: true\nenableServiceMonitor:\n  enabled: true\n"})
	createHTTPSGateway(t, gw, ns)

	// Each CR serves TLS (so that the HTTPRoute has its BackendTLSPolicy, the Route
	// reencrypts to the server's CA) and has every other option a child follows.
	full := func(name string, expose v1alpha2.ExposeSpec) *v1alpha2.LlamaStackDistribution {
		secret := servingSecret(t, name+"-cert", name+"-service."+ns+".svc")
		_, err := env.kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
		require.NoError(t, err)
		expose.Hostname = name + ".example.com"
		expose.Annotations = map[string]string{"example.com/expose": name}
		return &v1alpha2.LlamaStackDistribution{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha2.LlamaStackDistributionSpec{
				Distribution: v1alpha2.DistributionSpec{Name: "starter"},
				Networking: &v1alpha2.NetworkingSpec{
					TLS:    &v1alpha2.TLSSpec{Enabled: true, SecretName: name + "-cert"},
					Expose: &expose,
					AllowedFrom: &v1alpha2.AllowedFromSpec{
						Namespaces: []string{"monitoring"}, Labels: []v1alpha2.LabelKey{"team/allowed"},
					},
				},
				Workload: v1alpha2.WorkloadSpec{
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}},
					Autoscaling: &v1alpha2.AutoscalingSpec{
						MinReplicas: ptr.To[int32](1), MaxReplicas: 3,
						TargetCPUUtilizationPercentage: ptr.To[int32](80), TargetMemoryUtilizationPercentage: ptr.To[int32](70),
					},
					PodDisruptionBudget: &v1alpha2.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
				},
			},
		}
	}
	crs := []*v1alpha2.LlamaStackDistribution{
		full("routed", v1alpha2.ExposeSpec{Type: v1alpha2.ExposeHTTPRoute,
			HTTPRoute: &v1alpha2.HTTPRouteSpec{ParentRefs: []v1alpha2.GatewayParentRef{{Name: "gw", SectionName: "web"}}, Path: "/v1"}}),
		full("openshift", v1alpha2.ExposeSpec{Type: v1alpha2.ExposeRoute}),
		full("ingressed", v1alpha2.ExposeSpec{Type: v1alpha2.ExposeIngress, ClassName: ptr.To("nginx"), TLSSecretName: "ingressed-tls"}),
	}
	for _, l := range crs {
		_, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, l, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, l := range crs {
		waitReady(t, ns, l.Name)
	}
	monitors := dyn.Resource(serviceMonitors).Namespace(ns)
	routes := dyn.Resource(openShiftRoutes).Namespace(ns)
	for _, l := range crs {
		name := l.Name
		for what, get := range map[string]func(ctx context.Context) error{
			"NetworkPolicy": func(ctx context.Context) error {
				_, err := env.kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, name+"-network-policy", metav1.GetOptions{})
				return err
			},
			"HorizontalPodAutoscaler": func(ctx context.Context) error {
				_, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name+"-hpa", metav1.GetOptions{})
				return err
			},
			"PodDisruptionBudget": func(ctx context.Context) error {
				_, err := env.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name+"-pdb", metav1.GetOptions{})
				return err
			},
			"ServiceMonitor": func(ctx context.Context) error {
				_, err := monitors.Get(ctx, name+"-service-monitor", metav1.GetOptions{})
				return err
			},
		} {
			appears(t, "the "+what+" of "+name, get)
		}
	}
	appears(t, "the HTTPRoute", func(ctx context.Context) error {
		_, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "routed-route", metav1.GetOptions{})
		return err
	})
	appears(t, "the BackendTLSPolicy", func(ctx context.Context) error {
		_, err := gw.GatewayV1().BackendTLSPolicies(ns).Get(ctx, "routed-backend-tls", metav1.GetOptions{})
		return err
	})
	appears(t, "the Route", func(ctx context.Context) error {
		_, err := routes.Get(ctx, "openshift-route", metav1.GetOptions{})
		return err
	})
	appears(t, "the Ingress", func(ctx context.Context) error {
		_, err := env.kube.NetworkingV1().Ingresses(ns).Get(ctx, "ingressed-ingress", metav1.GetOptions{})
		return err
	})
	quiet(t, ns)

	// Several rounds of one sync of every CR, none of which changed.
	before := env.requests.snapshot()
	events, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	const rounds = 3
	syncsBefore := sample(scrape(t), `llama_stack_controller_syncs_total\{result="success"\}`)
	for round := range rounds {
		syncs := sample(scrape(t), `llama_stack_controller_syncs_total\{result="success"\}`)
		touchOperatorConfig(t, fmt.Sprintf("%d-%d", time.Now().UnixNano(), round))
		eventually(t, 30*time.Second, "every CR is synced again", func(context.Context) (bool, error) {
			page := scrape(t)
			return sample(page, `llama_stack_controller_syncs_total\{result="success"\}`) >= syncs+float64(len(crs)) &&
				sample(page, `workqueue_depth\{name="llama-stack-controller"\}`) == 0, nil
		})
	}
	time.Sleep(2 * time.Second)
	t.Logf("%.0f syncs of %d unchanged CRs; requests other than watches, probes and Lease renewals: %v",
		sample(scrape(t), `llama_stack_controller_syncs_total\{result="success"\}`)-syncsBefore, len(crs), env.requests.since(before))
	assert.Empty(t, mutatingIn(env.requests.since(before), ns), "mutating requests of %d unchanged syncs of each CR", rounds)
	after, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var recorded []string
	for _, e := range after.Items {
		if !slices.ContainsFunc(events.Items, func(b corev1.Event) bool { return b.UID == e.UID && b.Count == e.Count }) {
			recorded = append(recorded, fmt.Sprintf("%s %s: %s (x%d)", e.InvolvedObject.Name, e.Reason, e.Message, e.Count))
		}
	}
	assert.Empty(t, recorded, "Events of unchanged syncs")
}

// touchOperatorConfig sets an annotation on the operator ConfigMap: every CR is synced
// again, and nothing a CR depends on changes.
func touchOperatorConfig(t *testing.T, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.llamastack.io/touched":%q}}}`, value)
	_, err := env.kube.CoreV1().ConfigMaps(operatorNamespace).Patch(context.Background(), "llama-stack-operator-config",
		types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// mutatingIn keeps, of the requests requestCounter.since lists, the mutating ones about
// objects in namespace ns.
func mutatingIn(requests []string, ns string) []string {
	var out []string
	for _, r := range requests {
		_, key, _ := strings.Cut(r, " ")
		method, path, _ := strings.Cut(key, " ")
		if method == http.MethodGet || !strings.Contains(path, "/namespaces/"+ns+"/") {
			continue
		}
		out = append(out, r)
	}
	return out
}

// quiet waits until the controller has sent no mutating request about namespace ns for
// five seconds: the CRs converged.
func quiet(t *testing.T, ns string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		before := env.requests.snapshot()
		time.Sleep(5 * time.Second)
		last := mutatingIn(env.requests.since(before), ns)
		if len(last) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller never went quiet in %s; last requests: %s", ns, strings.Join(last, ", "))
		}
	}
}
