// +k8s:deepcopy-gen=package
// +groupName=llamastack.io

// Package v1alpha1 is the v1alpha1 version of the llamastack.io API: the
// LlamaStackDistribution resource, wire-compatible with the upstream
// llama-stack-k8s-operator.
package v1alpha1
