package controller

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// readinessConditions are the conditions a Deployment becoming available changes, and
// StorageReady: a pod with a claim is scheduled only once the claim is bound, so the
// claim's binding and the Deployment's availability often reach one sync together.
var readinessConditions = []string{v1alpha2.ConditionReady, v1alpha2.ConditionDeploymentReady,
	v1alpha2.ConditionProgressing, v1alpha2.ConditionHealthCheck, v1alpha2.ConditionStorageReady}

// onlyTurnsReady tells whether going from status old to st makes the CR Ready and
// changes nothing else but what follows from its Deployment becoming available: the
// phase, the replica counts, readinessConditions and the ReplicaSet that served
// (status.rollback.servedReplicaSet, recorded once the rollout is complete, which is
// when a new CR's Deployment turns available). Such a write can wait for the
// server's first answer; anything else (a problem, a warning, a new generation, a
// Service URL) is written at once. A problem the CR reported already may move from
// DeploymentReady to Progressing, as the Deployment serving makes it a change refused.
func onlyTurnsReady(old, st v1alpha2.LlamaStackDistributionStatus) bool {
	if st.Phase != v1alpha2.PhaseReady || old.Phase == v1alpha2.PhaseReady {
		return false
	}
	if p := status.ReportedProblem(st.Conditions); p != nil {
		if was := status.ReportedProblem(old.Conditions); was == nil || was.Message != p.Message {
			return false
		}
	}
	masked := *st.DeepCopy()
	masked.Phase, masked.Replicas, masked.AvailableReplicas = old.Phase, old.Replicas, old.AvailableReplicas
	if masked.Rollback != nil {
		masked.Rollback.ServedReplicaSet = ""
		if old.Rollback != nil {
			masked.Rollback.ServedReplicaSet = old.Rollback.ServedReplicaSet
		} else if *masked.Rollback == (v1alpha2.RollbackStatus{}) {
			masked.Rollback = nil
		}
	}
	for _, t := range readinessConditions {
		if was := meta.FindStatusCondition(old.Conditions, t); was != nil {
			meta.SetStatusCondition(&masked.Conditions, *was)
			// SetStatusCondition keeps the transition time of an unchanged status.
			meta.FindStatusCondition(masked.Conditions, t).LastTransitionTime = was.LastTransitionTime
		} else {
			meta.RemoveStatusCondition(&masked.Conditions, t)
		}
	}
	return equality.Semantic.DeepEqual(old, masked)
}
