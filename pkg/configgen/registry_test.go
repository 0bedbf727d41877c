package configgen

import (
	"strings"
	"testing"
)

// Every type of the endpoint/key table is a provider type of its API at
// some supported version, and the table follows the registry's versions.
func TestProviderFieldsFollowRegistry(t *testing.T) {
	for api, types := range providerFields {
		for ptype := range types {
			found := false
			for _, p := range providerRegistry {
				found = found || (p.api == api && p.ptype == ptype)
			}
			if !found {
				t.Errorf("providerFields: %s %s is in no server version's registry", api, ptype)
			}
		}
	}
	cases := []struct {
		api, ptype, version, endpoint string
	}{
		{"inference", "remote::tgi", "0.6.0", "base_url"},
		{"inference", "remote::tgi", "0.7.1", ""},
		{"inference", "remote::llama-cpp-server", "0.5.0", ""},
		{"inference", "remote::llama-cpp-server", "0.6.0", "base_url"},
		{"safety", "remote::passthrough", "0.5.0", ""},
		{"safety", "remote::passthrough", "0.6.0", "base_url"},
		{"vector_io", "remote::elasticsearch", "0.4.2", ""},
		{"vector_io", "remote::elasticsearch", "0.5.0", "elasticsearch_url"},
		{"vector_io", "remote::infinispan", "0.6.0", ""},
		{"vector_io", "remote::infinispan", "0.7.1", "url"},
	}
	for _, c := range cases {
		if got := endpointField(c.api, c.ptype, mustVersion(t, c.version)); got != c.endpoint {
			t.Errorf("endpointField(%s, %s, %s) = %q, want %q", c.api, c.ptype, c.version, got, c.endpoint)
		}
	}
	for _, c := range []struct{ api, ptype, from, before string }{
		{"inference", "remote::meta", "1.3.0", "1.2.2"},
		{"inference", "remote::mistral", "1.3.0", "1.2.2"},
		{"inference", "remote::deepseek", "1.3.0", "1.2.2"},
		{"vector_io", "remote::neo4j", "1.3.0", "1.2.2"},
		{"file_processors", "remote::unstructured-api", "1.2.0", "1.1.3"},
	} {
		if got := endpointField(c.api, c.ptype, mustVersion(t, c.before)) + keyField(c.api, c.ptype, mustVersion(t, c.before)); got != "" {
			t.Errorf("%s %s has fields at %s, before the type came: %q", c.api, c.ptype, c.before, got)
		}
		if got := endpointField(c.api, c.ptype, mustVersion(t, c.from)) + keyField(c.api, c.ptype, mustVersion(t, c.from)); got == "" {
			t.Errorf("%s %s has no endpoint or key field at %s", c.api, c.ptype, c.from)
		}
	}
	if got := keyField("safety", "remote::passthrough", mustVersion(t, "0.5.0")); got != "" {
		t.Errorf("keyField of safety remote::passthrough at 0.5 = %q, want none", got)
	}
}

// The hard dependencies of the registry, version by version.
func TestRegistryDependencies(t *testing.T) {
	cfg := func(apis string, providers map[string]string) map[string]any {
		p := map[string]any{}
		for api, ptype := range providers {
			p[api] = []any{map[string]any{"provider_id": "p-" + api, "provider_type": ptype}}
		}
		var l []any
		for _, a := range strings.Fields(apis) {
			l = append(l, a)
		}
		return map[string]any{"apis": l, "providers": p}
	}
	cases := []struct {
		name, version, apis string
		providers           map[string]string
		want                string // the missing APIs, sorted by provider; "" for none
	}{
		{"agents 0.3 needs safety", "0.3.4", "agents inference vector_io tool_runtime",
			map[string]string{"agents": "inline::meta-reference"}, "safety"},
		{"agents 0.4 needs files, not safety", "0.4.2", "agents inference vector_io tool_runtime",
			map[string]string{"agents": "inline::meta-reference"}, "files"},
		{"agents 0.4 with files", "0.4.2", "agents files inference vector_io tool_runtime",
			map[string]string{"agents": "inline::meta-reference", "files": "inline::localfs"}, ""},
		{"responses 0.7", "0.7.1", "responses inference",
			map[string]string{"responses": "inline::builtin"}, "vector_io tool_runtime tool_runtime files"},
		{"file-search 0.7", "0.7.1", "tool_runtime inference files",
			map[string]string{"tool_runtime": "inline::file-search", "files": "inline::localfs"}, "vector_io"},
		{"vector_io needs inference", "0.6.0", "vector_io",
			map[string]string{"vector_io": "inline::faiss"}, "inference"},
		{"eval 0.7 needs responses", "0.7.1", "eval datasetio scoring inference",
			map[string]string{"eval": "inline::builtin"}, "responses"},
		{"skills 1.1 needs files", "1.1.2", "skills",
			map[string]string{"skills": "inline::builtin"}, "files"},
		{"unstructured 1.2 needs files", "1.2.1", "file_processors",
			map[string]string{"file_processors": "inline::unstructured"}, "files"},
		{"neo4j 1.3 needs inference", "1.3.0", "vector_io",
			map[string]string{"vector_io": "remote::neo4j"}, "inference"},
		{"messages 1.3 needs inference", "1.3.0", "messages inference",
			map[string]string{"messages": "inline::builtin"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			unknown, deps := checkRegistry(cfg(c.apis, c.providers), mustVersion(t, c.version))
			if len(unknown) > 0 {
				t.Fatalf("unknown types: %v", unknown)
			}
			var got []string
			for _, d := range deps {
				got = append(got, d.provides)
			}
			if strings.Join(got, " ") != c.want {
				t.Fatalf("missing %q, want %q", strings.Join(got, " "), c.want)
			}
		})
	}
	// The server skips a provider whose id is __disabled__ or empty.
	c := cfg("", nil)
	c["apis"] = []any{"vector_io"}
	c["providers"] = map[string]any{"vector_io": []any{map[string]any{"provider_id": "__disabled__", "provider_type": "inline::faiss"}}}
	if _, deps := checkRegistry(c, mustVersion(t, "0.7.1")); len(deps) > 0 {
		t.Fatalf("a __disabled__ provider was judged: %v", deps)
	}
	// Telemetry takes no providers at 0.3 (it is built in).
	c["providers"] = map[string]any{"telemetry": []any{map[string]any{"provider_id": "t", "provider_type": "inline::meta-reference"}}}
	if unknown, _ := checkRegistry(c, mustVersion(t, "0.3.4")); len(unknown) != 1 {
		t.Fatalf("a telemetry provider at 0.3 was accepted")
	}
}

// A base whose version is the string '2' is read as version 2.
func TestBaseVersionString(t *testing.T) {
	base := strings.Replace(minimal07, "version: 2", "version: '2'", 1)
	out, err := Generate(Input{Name: "x", ServerVersion: "0.7.1", Base: []byte(base)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.Config), "\nversion: 2\n") {
		t.Fatalf("version not written as 2:\n%s", out.Config)
	}
}

// A type a version lacks is described by when the server has it.
func TestTypeHistory(t *testing.T) {
	cases := []struct{ api, ptype, version, want string }{
		{"inference", "remote::meta", "1.2.1", ", which came in 1.3"},
		{"file_processors", "inline::unstructured", "1.1.0", ", which came in 1.2"},
		{"inference", "inline::transformers", "1.3.0", ", which ended with 1.1"},
		{"inference", "remote::passthrough", "1.3.0", ", which ended with 1.2"},
		{"vector_io", "inline::builtin", "0.6.0", ", which came in 0.7"},
		{"inference", "remote::my-gateway", "1.3.0", ""},
	}
	for _, c := range cases {
		if got := typeHistory(c.api, c.ptype, mustVersion(t, c.version)); got != c.want {
			t.Errorf("typeHistory(%s, %s, %s) = %q, want %q", c.api, c.ptype, c.version, got, c.want)
		}
	}
}
