package children

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// defaultMaxUnavailable is the PDB budget when the user sets none, as upstream.
const defaultMaxUnavailable = int32(1)

// WantsPDB tells whether the server pods get a PodDisruptionBudget: when the user asks for
// one, or when there is more than one replica.
func WantsPDB(l *v1alpha2.LlamaStackDistribution) bool {
	return l.Spec.Workload.PodDisruptionBudget != nil || llsd.SpecReplicas(l) > 1
}

// NewPDB builds the PodDisruptionBudget of the server pods. The user's minAvailable and
// maxUnavailable are copied as given; with neither, at most one pod may be disrupted.
func NewPDB(l *v1alpha2.LlamaStackDistribution) *policyv1.PodDisruptionBudget {
	spec := policyv1.PodDisruptionBudgetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: llsd.SelectorLabels(l)},
	}
	if u := l.Spec.Workload.PodDisruptionBudget; u != nil {
		spec.MinAvailable = copyIntOrString(u.MinAvailable)
		spec.MaxUnavailable = copyIntOrString(u.MaxUnavailable)
	}
	if spec.MinAvailable == nil && spec.MaxUnavailable == nil {
		spec.MaxUnavailable = ptr.To(intstr.FromInt32(defaultMaxUnavailable))
	}

	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "PodDisruptionBudget"},
		ObjectMeta: llsd.ChildObjectMeta(l, llsd.PDBName(l)),
		Spec:       spec,
	}
}

// copyIntOrString returns a copy of v, or nil. IntOrString holds no pointers, so copying the
// value is a deep copy.
func copyIntOrString(v *intstr.IntOrString) *intstr.IntOrString {
	if v == nil {
		return nil
	}
	return ptr.To(*v)
}
