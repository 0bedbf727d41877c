// Package llamastack holds the API group of the LlamaStackDistribution resource.
package llamastack

// GroupName is the API group of every llamastack.io resource.
const GroupName = "llamastack.io"
