// Package children makes and keeps the objects a LlamaStackDistribution owns: one
// generic writer per kind (Kind: read from the cache, taken over from the upstream
// operator, applied with server-side apply only when a field the controller owns would
// change, deleted only when the CR controls it), the pure builders of the children
// made from the CR and what its pods listen on, and the Events of a sync's writes.
package children
