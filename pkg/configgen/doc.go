// Package configgen writes the llama-stack server's config.yaml for a
// v1alpha2 LlamaStackDistribution. It is pure: no client, no Kubernetes API.
//
// distributions.go is the one table of named distributions (pinned image,
// server version, base config under bases/); SOURCES.md says where each
// fact comes from.
package configgen
