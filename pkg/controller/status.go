package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// calculateStatus computes the CR's status from what was observed (status.Calculate),
// with what the controller knows besides (statusFacts).
func (c *Controller) calculateStatus(l *v1alpha2.LlamaStackDistribution, obs status.Observed, now metav1.Time) v1alpha2.LlamaStackDistributionStatus {
	return status.Calculate(l, obs, c.statusFacts(), now)
}

// statusFacts is what the status reads of the controller: its version, the
// distributions it offers, and whether it asks the servers for their health.
func (c *Controller) statusFacts() status.Facts {
	return status.Facts{OperatorVersion: c.operatorVersion, Distributions: c.distributions, Probing: c.prober != nil}
}
