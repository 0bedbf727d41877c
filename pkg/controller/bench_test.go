package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// convergedCases are the CRs of BenchmarkSyncConverged: the lightest and the heaviest CR
// of the benchmark mix (upstream-cost.md: distribution starter and one env var; storage,
// autoscaling and a PDB on some), and CRs with every child, the optional kinds served:
// a NetworkPolicy, an HPA, a PDB and a ServiceMonitor on each, exposed through an
// Ingress, through an HTTPRoute with its BackendTLSPolicy (the server serves TLS), and
// through an OpenShift Route.
var convergedCases = []struct {
	name string
	// objs are the cluster's objects, the CR "app" among them.
	objs func(testing.TB) []runtime.Object
	// serve makes the optional kinds served.
	serve func(*fixture)
	// made are the kinds of children the CR must have (the Events of their creation
	// name them), besides the Deployment and the Service.
	made []string
}{
	{"minimal", func(testing.TB) []runtime.Object { return []runtime.Object{newLLSDv1("app", withBenchEnv)} }, nil, nil},
	{"storage-hpa-pdb", func(testing.TB) []runtime.Object {
		return []runtime.Object{newLLSDv1("app", withBenchEnv, func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
			l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 3}
			l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
		})}
	}, nil, []string{"PersistentVolumeClaim", "HorizontalPodAutoscaler", "PodDisruptionBudget"}},
	{"all-children", func(testing.TB) []runtime.Object {
		return append(allChildrenObjects(), newLLSDv1("app", withBenchEnv, allChildren))
	}, serveEveryOptionalKind, []string{"ConfigMap", "PersistentVolumeClaim", "NetworkPolicy", "HorizontalPodAutoscaler",
		"PodDisruptionBudget", "Ingress", "ServiceMonitor"}},
	{"all-children-httproute", func(t testing.TB) []runtime.Object {
		return append(allChildrenObjects(), newTestServing(t, "app-service.demo.svc").secret("serving"),
			allChildrenExposed(withServerTLS("serving"), exposedThrough("llama.example.com", "", v1alpha2.GatewayParentRef{Name: "gw"})))
	}, serveEveryOptionalKind, []string{"PersistentVolumeClaim", "NetworkPolicy", "HorizontalPodAutoscaler",
		"PodDisruptionBudget", "HTTPRoute", "BackendTLSPolicy", "ServiceMonitor"}},
	{"all-children-route", func(t testing.TB) []runtime.Object {
		return append(allChildrenObjects(), newTestServing(t, "app-service.demo.svc").secret("serving"),
			allChildrenExposed(withServerTLS("serving"), exposedAsRoute("llama.example.com", nil)))
	}, serveEveryOptionalKind, []string{"PersistentVolumeClaim", "NetworkPolicy", "HorizontalPodAutoscaler",
		"PodDisruptionBudget", "Route", "ServiceMonitor"}},
}

// allChildrenExposed is the CR of allChildren, in v1alpha2, changed by mods (exposed
// otherwise than through an Ingress, and serving TLS: without the user config, which
// would have to name the certificate).
func allChildrenExposed(mods ...func(*v1alpha2.LlamaStackDistribution)) *v1alpha2.LlamaStackDistribution {
	l := hub(newLLSDv1("app", withBenchEnv, allChildren, func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.UserConfig = nil }))
	for _, m := range mods {
		m(l)
	}
	return l
}

// serveEveryOptionalKind makes every optional kind served, with the Gateway "gw".
func serveEveryOptionalKind(f *fixture) {
	f.gateways = []*gatewayv1.Gateway{gatewayWith(testNamespace, "gw")}
	f.serveHTTPRoutes()
	f.serveBackendTLSPolicies()
	f.serveServiceMonitors()
	f.serveOpenShiftRoutes()
}

func withBenchEnv(l *v1alpha1.LlamaStackDistribution) {
	l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "INFERENCE_MODEL", Value: "llama3.2:1b"}}
}

// BenchmarkSyncConverged is the CPU cost of one sync of a CR that is Ready and whose
// children are what the controller would write: the sync that an informer event, a
// controller restart or an operator ConfigMap change causes for a CR that needs nothing.
// Such a sync must send no request: requests/op is reported and must be 0.
func BenchmarkSyncConverged(b *testing.B) {
	for _, tc := range convergedCases {
		b.Run(tc.name, func(b *testing.B) {
			f := newFixture(b, tc.objs(b)...)
			if tc.serve != nil {
				tc.serve(f)
			}
			// As in production: klog's logger at the default verbosity, not the test logger.
			f.ctx = klog.NewContext(context.Background(), klog.Background())
			f.converge("app")
			f.setDeploymentStatus("app", rolledOut)
			if f.stored(kindPVC, "app-pvc") != nil {
				f.setPVCPhase("app-pvc", corev1.ClaimBound)
			}
			f.converge("app")
			if !meta.IsStatusConditionTrue(f.llsd("app").Status.Conditions, v1alpha2.ConditionReady) {
				b.Fatalf("the CR is not Ready: %+v", f.llsd("app").Status.Conditions)
			}
			created := strings.Join(f.events(), "\n")
			for _, kind := range tc.made {
				if !strings.Contains(created, kind+" app") {
					b.Fatalf("no %s was made; Events: %s", kind, created)
				}
			}

			key := cache.ObjectName{Namespace: testNamespace, Name: "app"}
			f.client.ClearActions()
			f.kubeclient.ClearActions()
			f.gatewayclient.ClearActions()
			f.dynamicclient.ClearActions()
			b.ReportAllocs()
			for b.Loop() {
				if err := f.c.syncHandler(f.ctx, key); err != nil {
					b.Fatal(err)
				}
			}
			actions := slices.Concat(filterInformerActions(f.client.Actions()), filterInformerActions(f.kubeclient.Actions()),
				filterInformerActions(f.gatewayclient.Actions()), filterInformerActions(f.dynamicclient.Actions()))
			b.ReportMetric(float64(len(actions))/float64(b.N), "requests/op")
			if len(actions) > 0 {
				b.Fatalf("a sync of a converged CR sent %d requests: %v", len(actions), describe(actions))
			}
			if ev := f.events(); len(ev) > 0 {
				b.Fatalf("a sync of a converged CR recorded Events: %v", ev)
			}
		})
	}
}
