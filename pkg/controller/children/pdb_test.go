package children

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

func TestNewPDB(t *testing.T) {
	tests := map[string]struct {
		replicas           int32
		pdb                *v1alpha1.PodDisruptionBudgetSpec
		wantMinAvailable   *intstr.IntOrString
		wantMaxUnavailable *intstr.IntOrString
	}{
		"no budget, several replicas: maxUnavailable 1": {
			replicas:           3,
			pdb:                nil,
			wantMaxUnavailable: ptr.To(intstr.FromInt32(1)),
		},
		"empty budget: maxUnavailable 1": {
			replicas:           1,
			pdb:                &v1alpha1.PodDisruptionBudgetSpec{},
			wantMaxUnavailable: ptr.To(intstr.FromInt32(1)),
		},
		"minAvailable only, no default maxUnavailable": {
			replicas:         3,
			pdb:              &v1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))},
			wantMinAvailable: ptr.To(intstr.FromInt32(2)),
		},
		"minAvailable percentage": {
			replicas:         1,
			pdb:              &v1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))},
			wantMinAvailable: ptr.To(intstr.FromString("50%")),
		},
		"maxUnavailable only": {
			replicas:           4,
			pdb:                &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("25%"))},
			wantMaxUnavailable: ptr.To(intstr.FromString("25%")),
		},
		"maxUnavailable 0 kept as given": {
			replicas:           2,
			pdb:                &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0))},
			wantMaxUnavailable: ptr.To(intstr.FromInt32(0)),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := childTestCR(func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Replicas = tc.replicas
				l.Spec.Server.PodDisruptionBudget = tc.pdb
			})
			before := l.DeepCopy()

			got := NewPDB(hub(l))

			// The instance label is set (upstream left it empty).
			want := &policyv1.PodDisruptionBudget{
				TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
				ObjectMeta: wantChildMeta("demo-pdb"),
				Spec: policyv1.PodDisruptionBudgetSpec{
					Selector:       &metav1.LabelSelector{MatchLabels: childTestSelector()},
					MinAvailable:   tc.wantMinAvailable,
					MaxUnavailable: tc.wantMaxUnavailable,
				},
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("newPDB() mismatch (-want +got):\n%s", d)
			}

			// The budgets are copies: changing the child's leaves the CR's as it was.
			if u := l.Spec.Server.PodDisruptionBudget; u != nil {
				if u.MinAvailable != nil {
					assert.NotSame(t, u.MinAvailable, got.Spec.MinAvailable)
				}
				if u.MaxUnavailable != nil {
					assert.NotSame(t, u.MaxUnavailable, got.Spec.MaxUnavailable)
				}
			}
			if got.Spec.MinAvailable != nil {
				*got.Spec.MinAvailable = intstr.FromInt32(42)
			}
			if got.Spec.MaxUnavailable != nil {
				*got.Spec.MaxUnavailable = intstr.FromInt32(42)
			}
			assert.Equal(t, before, l, "the CR must not be mutated")
		})
	}
}

func TestWantsPDB(t *testing.T) {
	tests := map[string]struct {
		replicas int32
		pdb      *v1alpha1.PodDisruptionBudgetSpec
		want     bool
	}{
		"one replica, no budget":   {replicas: 1, want: false},
		"no replicas, no budget":   {replicas: 0, want: false},
		"two replicas, no budget":  {replicas: 2, want: true},
		"one replica, empty":       {replicas: 1, pdb: &v1alpha1.PodDisruptionBudgetSpec{}, want: true},
		"no replicas, with budget": {replicas: 0, pdb: &v1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := childTestCR(func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Replicas = tc.replicas
				l.Spec.Server.PodDisruptionBudget = tc.pdb
			})
			assert.Equal(t, tc.want, WantsPDB(hub(l)))
		})
	}
}
