package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// convergedCases are the CRs of BenchmarkSyncConverged: the lightest and the heaviest CR
// of the benchmark mix (upstream-cost.md: distribution starter and one env var; storage,
// autoscaling and a PDB on some), and one with every optional child.
var convergedCases = []struct {
	name string
	mods []func(*v1alpha1.LlamaStackDistribution)
	objs func() []runtime.Object
}{
	{"minimal", []func(*v1alpha1.LlamaStackDistribution){withBenchEnv}, nil},
	{"storage-hpa-pdb", []func(*v1alpha1.LlamaStackDistribution){withBenchEnv, func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 3}
		l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	}}, nil},
	{"all-children", []func(*v1alpha1.LlamaStackDistribution){withBenchEnv, allChildren}, allChildrenObjects},
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
			var objs []runtime.Object
			if tc.objs != nil {
				objs = tc.objs()
			}
			f := newFixture(b, append(objs, newLLSDv1("app", tc.mods...))...)
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
			f.events()

			key := cache.ObjectName{Namespace: testNamespace, Name: "app"}
			f.client.ClearActions()
			f.kubeclient.ClearActions()
			b.ReportAllocs()
			for b.Loop() {
				if err := f.c.syncHandler(f.ctx, key); err != nil {
					b.Fatal(err)
				}
			}
			actions := append(filterInformerActions(f.client.Actions()), filterInformerActions(f.kubeclient.Actions())...)
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
