package configgen

import (
	"fmt"
	"sort"
)

// The server's provider registry: every provider type of each API, the
// server versions that have it, and the APIs it hard-depends on
// (api_dependencies). Read from providers/registry/<api>.py at L v0.3.4,
// v0.4.2, v0.5.0, v0.6.0 and v0.7.1 (SOURCES.md; the patch releases of a
// minor have the same registry). The server refuses a provider type it does
// not list ("Provider ... is not available for API ...") and a provider
// whose dependency has no implementation ("required dependency ... is not
// available"); both stop it at start, so both are checked here.
// optional_api_dependencies are not listed: the server runs without them.

type providerSpec struct {
	api, ptype string
	// from and to are the first and last releases with this entry, as
	// Version.line numbers them (0.7 is 7, 1.3 is 103).
	from, to int
	// deps are the provider's api_dependencies as the server names them.
	deps []string
}

// ogxLast is the newest release whose registry is taken as known: entries
// that reach it have not been seen removed. Read to 1.3; 1.4 and 1.5 are
// taken to be 1.3 (inferred, see newestSupported).
const ogxLast = 105

// From 0.8 (OGX): read at L v0.8.0, L main d1b6632 (2026-05-07) and the
// upstream release tags v1.0.0 to v1.3.0 as a fork of the server carries
// them (opendatahub-io/ogx; its v0.8.0 is upstream's 1099cd4),
// registry/<api>.py as before. 0.8 removed the datasetio, eval and scoring
// providers and the vector_io inline::builtin and inline::sqlite_vec types,
// and added interactions and messages (inline::builtin, needing inference)
// and file_processors remote::docling-serve; 1.0 added file_processors
// inline::auto and inline::markitdown and removed every safety provider
// (#5291); 1.1 added skills inline::builtin (needing files) and tool_runtime
// remote::nimble-search; 1.2 added file_processors inline::unstructured and
// remote::unstructured-api (needing files) and removed inference
// inline::transformers; 1.3 added inference remote::deepseek, remote::meta
// and remote::mistral and vector_io remote::neo4j (needing inference), and
// removed inference remote::passthrough. 1.2 also has a container_runtime
// API whose registry is empty. The patch tags (v1.0.1, v1.0.2, v1.1.1 to
// v1.1.3, v1.2.1, v1.2.2) list the same types as their minor's first. 1.4
// and 1.5 are taken to be 1.3.
var providerRegistry = []providerSpec{
	{"agents", "inline::meta-reference", 3, 3, []string{"inference", "safety", "vector_io", "tool_runtime", "tool_groups", "conversations"}},
	{"agents", "inline::meta-reference", 4, 4, []string{"inference", "vector_io", "tool_runtime", "tool_groups", "conversations", "prompts", "files"}},
	{"agents", "inline::meta-reference", 5, 6, []string{"inference", "vector_io", "tool_runtime", "tool_groups", "conversations", "prompts", "files", "connectors"}},
	{"batches", "inline::reference", 3, ogxLast, []string{"inference", "files", "models"}},
	{"datasetio", "inline::localfs", 3, 7, nil},
	{"datasetio", "remote::huggingface", 3, 7, nil},
	{"datasetio", "remote::nvidia", 3, 7, nil},
	{"eval", "inline::builtin", 7, 7, []string{"datasetio", "datasets", "scoring", "inference", "responses"}},
	{"eval", "inline::meta-reference", 3, 6, []string{"datasetio", "datasets", "scoring", "inference", "agents"}},
	{"eval", "remote::nvidia", 3, 6, []string{"datasetio", "datasets", "scoring", "inference", "agents"}},
	{"eval", "remote::nvidia", 7, 7, []string{"datasetio", "datasets", "scoring", "inference", "responses"}},
	{"file_processors", "inline::auto", 100, ogxLast, []string{"files"}},
	{"file_processors", "inline::docling", 7, ogxLast, []string{"files"}},
	{"file_processors", "inline::markitdown", 100, ogxLast, []string{"files"}},
	{"file_processors", "inline::pypdf", 6, ogxLast, []string{"files"}},
	{"file_processors", "inline::unstructured", 102, ogxLast, []string{"files"}},
	{"file_processors", "remote::docling-serve", 8, ogxLast, []string{"files"}},
	{"file_processors", "remote::unstructured-api", 102, ogxLast, []string{"files"}},
	{"files", "inline::localfs", 3, ogxLast, nil},
	{"files", "remote::openai", 4, ogxLast, nil},
	{"files", "remote::s3", 3, ogxLast, nil},
	{"inference", "inline::meta-reference", 3, 4, nil},
	{"inference", "inline::sentence-transformers", 3, ogxLast, nil},
	{"inference", "inline::transformers", 7, 101, nil},
	{"inference", "remote::anthropic", 3, ogxLast, nil},
	{"inference", "remote::azure", 3, ogxLast, nil},
	{"inference", "remote::bedrock", 3, ogxLast, nil},
	{"inference", "remote::cerebras", 3, ogxLast, nil},
	{"inference", "remote::databricks", 3, ogxLast, nil},
	{"inference", "remote::deepseek", 103, ogxLast, nil},
	{"inference", "remote::fireworks", 3, ogxLast, nil},
	{"inference", "remote::gemini", 3, ogxLast, nil},
	{"inference", "remote::groq", 3, ogxLast, nil},
	{"inference", "remote::hf::endpoint", 3, 6, nil},
	{"inference", "remote::hf::serverless", 3, 6, nil},
	{"inference", "remote::llama-cpp-server", 6, ogxLast, nil},
	{"inference", "remote::llama-openai-compat", 3, ogxLast, nil},
	{"inference", "remote::meta", 103, ogxLast, nil},
	{"inference", "remote::mistral", 103, ogxLast, nil},
	{"inference", "remote::nvidia", 3, ogxLast, nil},
	{"inference", "remote::oci", 4, ogxLast, nil},
	{"inference", "remote::ollama", 3, ogxLast, nil},
	{"inference", "remote::openai", 3, ogxLast, nil},
	{"inference", "remote::passthrough", 3, 102, nil},
	{"inference", "remote::runpod", 3, ogxLast, nil},
	{"inference", "remote::sambanova", 3, ogxLast, nil},
	{"inference", "remote::tgi", 3, 6, nil},
	{"inference", "remote::together", 3, ogxLast, nil},
	{"inference", "remote::vertexai", 3, ogxLast, nil},
	{"inference", "remote::vllm", 3, ogxLast, nil},
	{"inference", "remote::watsonx", 3, ogxLast, nil},
	{"interactions", "inline::builtin", 8, ogxLast, []string{"inference"}},
	{"messages", "inline::builtin", 8, ogxLast, []string{"inference"}},
	{"post_training", "inline::huggingface-gpu", 3, 6, []string{"datasetio", "datasets"}},
	{"post_training", "inline::torchtune-cpu", 3, 6, []string{"datasetio", "datasets"}},
	{"post_training", "inline::torchtune-gpu", 3, 6, []string{"datasetio", "datasets"}},
	{"post_training", "remote::nvidia", 3, 6, nil},
	{"responses", "inline::builtin", 7, ogxLast, []string{"inference", "vector_io", "tool_runtime", "tool_groups", "conversations", "prompts", "files", "connectors"}},
	{"safety", "inline::code-scanner", 3, 8, nil},
	{"safety", "inline::llama-guard", 3, 8, []string{"inference"}},
	{"safety", "inline::prompt-guard", 3, 8, nil},
	{"safety", "remote::bedrock", 3, 8, nil},
	{"safety", "remote::nvidia", 3, 8, nil},
	{"safety", "remote::passthrough", 6, 8, nil},
	{"safety", "remote::sambanova", 3, 8, nil},
	{"scoring", "inline::basic", 3, 7, []string{"datasetio", "datasets"}},
	{"scoring", "inline::braintrust", 3, 7, []string{"datasetio", "datasets"}},
	{"scoring", "inline::llm-as-judge", 3, 7, []string{"datasetio", "datasets", "inference"}},
	{"skills", "inline::builtin", 101, ogxLast, []string{"files"}},
	{"tool_runtime", "inline::file-search", 7, ogxLast, []string{"vector_io", "inference", "files"}},
	{"tool_runtime", "inline::rag-runtime", 3, 6, []string{"vector_io", "inference", "files"}},
	{"tool_runtime", "remote::bing-search", 3, ogxLast, nil},
	{"tool_runtime", "remote::brave-search", 3, ogxLast, nil},
	{"tool_runtime", "remote::model-context-protocol", 3, ogxLast, nil},
	{"tool_runtime", "remote::nimble-search", 101, ogxLast, nil},
	{"tool_runtime", "remote::tavily-search", 3, ogxLast, nil},
	{"tool_runtime", "remote::wolfram-alpha", 3, ogxLast, nil},
	{"vector_io", "inline::builtin", 7, 7, []string{"inference"}},
	{"vector_io", "inline::chromadb", 3, ogxLast, []string{"inference"}},
	{"vector_io", "inline::faiss", 3, ogxLast, []string{"inference"}},
	{"vector_io", "inline::meta-reference", 3, 6, []string{"inference"}},
	{"vector_io", "inline::milvus", 3, ogxLast, []string{"inference"}},
	{"vector_io", "inline::qdrant", 3, ogxLast, []string{"inference"}},
	{"vector_io", "inline::sqlite-vec", 3, ogxLast, []string{"inference"}},
	{"vector_io", "inline::sqlite_vec", 3, 7, []string{"inference"}},
	{"vector_io", "remote::chromadb", 3, ogxLast, []string{"inference"}},
	{"vector_io", "remote::elasticsearch", 5, ogxLast, []string{"inference"}},
	{"vector_io", "remote::infinispan", 7, ogxLast, []string{"inference"}},
	{"vector_io", "remote::milvus", 3, ogxLast, []string{"inference"}},
	{"vector_io", "remote::neo4j", 103, ogxLast, []string{"inference"}},
	{"vector_io", "remote::oci", 5, ogxLast, []string{"inference"}},
	{"vector_io", "remote::pgvector", 3, ogxLast, []string{"inference"}},
	{"vector_io", "remote::qdrant", 3, ogxLast, []string{"inference"}},
	{"vector_io", "remote::weaviate", 3, ogxLast, []string{"inference"}},
}

// lookupProvider returns the registry entry of a provider type at v.
func lookupProvider(api, ptype string, v Version) (providerSpec, bool) {
	for _, p := range providerRegistry {
		if p.api == api && p.ptype == ptype && v.line() >= p.from && v.line() <= p.to {
			return p, true
		}
	}
	return providerSpec{}, false
}

// lineName is a registry line as a version: 7 is 0.7, 103 is 1.3.
func lineName(l int) string { return fmt.Sprintf("%d.%d", l/100, l%100) }

// typeHistory says, for a provider type v does not have, when the server
// has it: ", which came in 1.3" or ", which ended with 1.1"; "" for a type no
// known version has.
func typeHistory(api, ptype string, v Version) string {
	first, last := 0, 0
	for _, p := range providerRegistry {
		if p.api != api || p.ptype != ptype {
			continue
		}
		if p.from > v.line() && (first == 0 || p.from < first) {
			first = p.from
		}
		if p.to < v.line() && p.to > last {
			last = p.to
		}
	}
	switch {
	case first > 0:
		return ", which came in " + lineName(first)
	case last > 0:
		return ", which ended with " + lineName(last)
	}
	return ""
}

// providerTypes lists the provider types of an API at v, sorted.
func providerTypes(api string, v Version) []string {
	var out []string
	for _, p := range providerRegistry {
		if p.api == api && v.line() >= p.from && v.line() <= p.to {
			out = append(out, p.ptype)
		}
	}
	sort.Strings(out)
	return out
}

// routedBy maps each routing-table API to the API whose router serves it
// (builtin_automatically_routed_apis in core/distribution.py, 0.3 to 0.7):
// the server creates both when the router API is served.
var routedBy = map[string]string{
	"models": "inference", "shields": "safety", "datasets": "datasetio", "scoring_functions": "scoring",
	"benchmarks": "eval", "tool_groups": "tool_runtime", "vector_stores": "vector_io",
}

// internalAPI reports whether the server always implements api itself
// (INTERNAL_APIS and add_internal_implementations in core/stack.py:
// inspect, providers, prompts and conversations at every version, admin
// from 0.4, connectors from 0.5).
func internalAPI(api string, v Version) bool {
	switch api {
	case "inspect", "providers", "prompts", "conversations":
		return true
	case "admin":
		return v.atLeast(4)
	case "connectors":
		return v.atLeast(5)
	}
	return false
}

// routerAPIs are the APIs the server serves through a router: they exist
// when listed in apis, with or without providers.
var routerAPIs = map[string]bool{
	"inference": true, "safety": true, "datasetio": true, "scoring": true, "eval": true, "tool_runtime": true, "vector_io": true,
}

// dependencyProblem is a provider whose hard dependency the config lacks.
type dependencyProblem struct {
	api      string // the provider's API
	index    int    // its place in providers.<api>
	id       string // its provider_id as written
	ptype    string
	missing  string // the API it needs, as the server names it
	provides string // the API of the config that would provide it
}

func (p dependencyProblem) String() string {
	return fmt.Sprintf("providers.%s[%d] (%s, %s) needs the %s API, which the config does not serve", p.api, p.index, p.id, p.ptype, p.provides)
}

// unknownProvider is a provider type the server version does not have.
type unknownProvider struct {
	api   string
	index int
	ptype string
}

// checkRegistry reports, for a config in the shape of v, the providers whose
// type the server does not have and those whose hard dependencies it does
// not serve. A provider with a module (an external provider) is not judged,
// nor is any type when external_providers_dir is set; a provider whose id
// is "__disabled__" or empty is skipped by the server, and so here. A
// dependency met only by a provider switched on by a variable
// (${env.X:+id}) is taken as met: it cannot be judged before the server
// starts.
func checkRegistry(cfg map[string]any, v Version) ([]unknownProvider, []dependencyProblem) {
	prov, _ := cfg["providers"].(map[string]any)
	external := false
	if d, ok := cfg["external_providers_dir"].(string); ok && d != "" {
		external = true
	}
	served := map[string]bool{}
	apis, _ := cfg["apis"].([]any)
	for _, a := range apis {
		if s, ok := a.(string); ok {
			served[s] = true
		}
	}
	// An empty apis list serves every router API (resolve_impls).
	allRouters := len(apis) == 0
	enabled := func(m map[string]any) bool {
		id, _ := m["provider_id"].(string)
		return id != "" && id != "__disabled__"
	}
	has := func(api string) bool {
		if internalAPI(api, v) {
			return true
		}
		if r, ok := routedBy[api]; ok {
			api = r
		}
		if routerAPIs[api] {
			return allRouters || served[api]
		}
		l, _ := prov[api].([]any)
		for _, e := range l {
			if m, ok := e.(map[string]any); ok && enabled(m) {
				return true
			}
		}
		return false
	}
	var unknown []unknownProvider
	var deps []dependencyProblem
	for _, api := range sortedKeys(prov) {
		l, _ := prov[api].([]any)
		for i, e := range l {
			m, _ := e.(map[string]any)
			if m == nil || !enabled(m) {
				continue
			}
			if mod, ok := m["module"].(string); ok && mod != "" {
				continue
			}
			ptype, _ := m["provider_type"].(string)
			spec, ok := lookupProvider(api, ptype, v)
			if !ok {
				if !external {
					unknown = append(unknown, unknownProvider{api, i, ptype})
				}
				continue
			}
			id, _ := m["provider_id"].(string)
			for _, d := range spec.deps {
				if !has(d) {
					p := d
					if r, ok := routedBy[d]; ok {
						p = r
					}
					deps = append(deps, dependencyProblem{api: api, index: i, id: id, ptype: ptype, missing: d, provides: p})
				}
			}
		}
	}
	return unknown, deps
}
