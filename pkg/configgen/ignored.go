package configgen

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// Keys a server version ignores. The server's config models (StackRunConfig, then
// StackConfig, RegisteredResources, ServerConfig) have no extra="forbid" at any tag
// from 0.3.0 to 1.3.0, so a key a version no longer has is dropped when the file is
// parsed: the server starts, and does not do what the key said. Such a key is rolled
// out, with a warning, never refused. Read at the server's tags (field lists of those
// models):
//   - telemetry (top level): read by 0.3; gone in 0.4 (#4127), which traces with
//     OpenTelemetry, set through the OTEL_* environment variables.
//   - registered_resources.connectors: 0.4 only; 0.5 reads the top-level connectors.
//   - registered_resources.datasets, scoring_fns and benchmarks: gone in 0.8 with the
//     datasetio, scoring and eval APIs (#5290).
//   - registered_resources.shields and the top-level safety (default_shield_id): gone
//     in 1.0 with the safety API (#5291); guardrails are the responses provider's
//     moderation_endpoint.
//   - server.cors and server.quota: gone in 1.0 (#5750), left to the gateway in front
//     of the server.
//
// What stops the server stays refused (Fits): a provider under an API the version
// lacks ("API 'safety' does not exist", validate_and_prepare_providers), and an apis
// entry the version lacks (server.py turns each into Api(name) when it builds its
// routes, with the same error).

// ignoredKey is a config key that server versions from since on ignore.
type ignoredKey struct {
	path  []string
	since Version
	// instead says what replaced the key, or that nothing did.
	instead string
}

var ignoredKeys = []ignoredKey{
	{[]string{"telemetry"}, Version{0, 4, 0}, "removed in 0.4: the server traces with OpenTelemetry, set through the OTEL_* environment variables"},
	{[]string{"registered_resources", "connectors"}, Version{0, 5, 0}, "moved in 0.5 to the top-level connectors"},
	{[]string{"registered_resources", "datasets"}, Version{0, 8, 0}, evalGone},
	{[]string{"registered_resources", "scoring_fns"}, Version{0, 8, 0}, evalGone},
	{[]string{"registered_resources", "benchmarks"}, Version{0, 8, 0}, evalGone},
	{[]string{"registered_resources", "shields"}, Version{1, 0, 0}, safetyGone},
	{[]string{"safety"}, Version{1, 0, 0}, safetyGone},
	{[]string{"server", "cors"}, Version{1, 0, 0}, edgeGone},
	{[]string{"server", "quota"}, Version{1, 0, 0}, edgeGone},
}

const (
	evalGone   = "removed in 0.8 with the datasetio, scoring and eval APIs, which OGX does not have"
	safetyGone = "removed in 1.0 with the safety API and shields, replaced by nothing in the config: guardrails are set on the responses provider, its moderation_endpoint"
	edgeGone   = "removed in 1.0: CORS and rate limits are left to the gateway or proxy in front of the server"
)

// Ignored lists the keys of a config the user wrote that server version v reads no
// more (it starts, and drops them), one message each, naming the key, the version and
// what replaced it. An empty value (null, [] or {}) is not listed: it says nothing the
// server would have done. Nil when the config does not parse: Preflight reports that.
func Ignored(configYAML []byte, v Version) []string {
	var cfg map[string]any
	if err := yaml.Unmarshal(configYAML, &cfg); err != nil {
		return nil
	}
	var out []string
	for _, k := range ignoredKeys {
		if v.less(k.since) || isEmpty(lookup(cfg, k.path)) {
			continue
		}
		out = append(out, k.message(v))
	}
	return out
}

// message says that server v ignores the key, and what replaced it.
func (k ignoredKey) message(v Version) string {
	return fmt.Sprintf("%s: server %s ignores it (%s)", joinPath(k.path), v, k.instead)
}

// dropIgnored deletes from a base config (decoded YAML) the keys server version v
// ignores, so that the strict decode that follows refuses only what no version reads:
// the server would start with them, and they are not written to the generated file,
// which it would ignore anyway. It returns one message each, as Ignored does; an empty
// value is dropped without one.
func dropIgnored(cfg map[string]any, v Version) []string {
	var out []string
	for _, k := range ignoredKeys {
		if v.less(k.since) {
			continue
		}
		parent, ok := lookup(cfg, k.path[:len(k.path)-1]).(map[string]any)
		if !ok {
			continue
		}
		last := k.path[len(k.path)-1]
		x, ok := parent[last]
		if !ok {
			continue
		}
		delete(parent, last)
		if !isEmpty(x) {
			out = append(out, k.message(v))
		}
	}
	return out
}

// lookup is the value at path in cfg; nil when a step is missing.
func lookup(cfg map[string]any, path []string) any {
	var cur any = cfg
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// isEmpty tells whether a YAML value says nothing: null, an empty list or map, false
// or an empty string.
func isEmpty(x any) bool {
	switch t := x.(type) {
	case nil:
		return true
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	case string:
		return t == ""
	case bool:
		return !t
	}
	return false
}

func joinPath(path []string) string {
	s := path[0]
	for _, p := range path[1:] {
		s += "." + p
	}
	return s
}
