package configgen

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// knownLines are the server lines the registry describes, as Versions.
func knownLines() []Version {
	var out []Version
	for m := 3; m <= 8; m++ {
		out = append(out, Version{0, m, 0})
	}
	for m := 0; m <= ogxLast-100; m++ {
		out = append(out, Version{1, m, 0})
	}
	return out
}

// Every entry of the required table is a type the registry has over the
// whole of the entry's range.
func TestRequiredFieldsFollowRegistry(t *testing.T) {
	for _, f := range requiredFields {
		for _, v := range knownLines() {
			if v.line() < f.from || v.line() > f.to {
				continue
			}
			if _, ok := lookupProvider(f.api, f.ptype, v); !ok {
				t.Errorf("requiredFields: %s %s %s at %s, which the registry does not have", f.api, f.ptype, f.field, v)
			}
		}
	}
}

// A CR provider of any type, at any known version, with nothing set either
// generates with every field its type requires, or is refused at a field
// only the user can give.
func TestEveryTypeGetsItsRequiredFields(t *testing.T) {
	for _, v := range knownLines() {
		for _, p := range providerRegistry {
			if v.line() < p.from || v.line() > p.to {
				continue
			}
			g := &gen{v: v, env: newEnvSet(), distro: "starter", cfg: map[string]any{}}
			entry, err := g.provider(p.api, "spec.providers.x[0]", "p1", v1alpha2.ProviderConfig{Provider: p.ptype}, false)
			user := map[string]bool{}
			for _, f := range requiredAt(p.api, p.ptype, v) {
				if f.kind == userField {
					user[f.field] = true
				}
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("%s %s at %s: %v", p.api, p.ptype, v, err)
				}
				field := ""
				for f := range user {
					if strings.Contains(e.Message, "requires "+f+" ") {
						field = f
					}
				}
				if field == "" {
					t.Errorf("%s %s at %s: refused, but not for a field only the user knows: %v", p.api, p.ptype, v, err)
				}
				continue
			}
			if len(user) > 0 {
				t.Errorf("%s %s at %s: generated without the user's %v", p.api, p.ptype, v, user)
			}
			cfg, _ := entry["config"].(map[string]any)
			if miss := checkRequired(p.api, p.ptype, cfg, v); len(miss) > 0 {
				t.Errorf("%s %s at %s: written without %v", p.api, p.ptype, v, miss)
			}
		}
	}
}

func TestCheckRequired(t *testing.T) {
	kv := map[string]any{"backend": "kv_default", "namespace": "n"}
	sql := map[string]any{"backend": "sql_default", "table_name": "t"}
	cases := []struct {
		name, api, ptype, version string
		cfg                       map[string]any
		want                      string // "" when nothing is missing
	}{
		{"batches kv at 0.8", "batches", "inline::reference", "0.8.0", map[string]any{"kvstore": kv}, ""},
		{"batches kv at 1.0", "batches", "inline::reference", "1.0.0", map[string]any{"kvstore": kv}, "sqlstore is missing"},
		{"batches sql at 1.0", "batches", "inline::reference", "1.0.2", map[string]any{"sqlstore": sql}, ""},
		{"messages at 1.0", "messages", "inline::builtin", "1.0.0", nil, ""},
		{"messages at 1.1", "messages", "inline::builtin", "1.1.0", nil, "kvstore is missing"},
		{"messages half a reference", "messages", "inline::builtin", "1.3.0", map[string]any{"kvstore": map[string]any{"namespace": "n"}}, "kvstore lacks backend"},
		{"skills not a mapping", "skills", "inline::builtin", "1.1.0", map[string]any{"persistence": "kv_default"}, "persistence must be a mapping"},
		{"interactions, store defaulted", "interactions", "inline::builtin", "1.3.0", nil, ""},
		{"interactions, store half written", "interactions", "inline::builtin", "1.3.0", map[string]any{"store": map[string]any{"backend": "sql_default"}}, "store lacks table_name"},
		{"responses 0.8 without agent_state", "responses", "inline::builtin", "0.8.0",
			map[string]any{"persistence": map[string]any{"responses": map[string]any{"backend": "sql_default"}}}, "persistence agent_state must be a mapping"},
		{"responses 1.0 without agent_state", "responses", "inline::builtin", "1.0.0",
			map[string]any{"persistence": map[string]any{"responses": map[string]any{"backend": "sql_default"}}}, ""},
		{"agents 0.4 responses without table", "agents", "inline::meta-reference", "0.4.2",
			map[string]any{"persistence": map[string]any{"agent_state": kv, "responses": map[string]any{"backend": "sql_default"}}}, "persistence responses lacks table_name"},
		{"agents 0.5 responses table defaulted", "agents", "inline::meta-reference", "0.5.0",
			map[string]any{"persistence": map[string]any{"agent_state": kv, "responses": map[string]any{"backend": "sql_default"}}}, ""},
		{"milvus token null", "vector_io", "remote::milvus", "1.3.0", map[string]any{"uri": "http://m:19530", "token": nil, "persistence": kv}, ""},
		{"milvus token absent", "vector_io", "remote::milvus", "1.3.0", map[string]any{"uri": "http://m:19530", "persistence": kv}, "token is missing"},
		{"chromadb url null", "vector_io", "remote::chromadb", "0.7.1", map[string]any{"url": nil, "persistence": kv}, ""},
		{"localfs path null", "files", "inline::localfs", "0.7.1", map[string]any{"storage_dir": nil, "metadata_store": sql}, "storage_dir is missing"},
		{"env references stand", "files", "remote::s3", "1.3.0", map[string]any{"bucket_name": "${env.S3_BUCKET}", "metadata_store": sql}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, m := range checkRequired(c.api, c.ptype, c.cfg, mustVersion(t, c.version)) {
				got = append(got, m.String())
			}
			s := strings.Join(got, "; ")
			switch {
			case c.want == "" && s != "":
				t.Errorf("got %q, want nothing missing", s)
			case c.want != "" && !strings.Contains(s, c.want):
				t.Errorf("got %q, want %q", s, c.want)
			}
		})
	}
}

// The names the generator gives a provider's stores: the server's sample
// names for the only provider of its list, with its id for one of several.
func TestRequiredDefaultNames(t *testing.T) {
	g := &gen{v: Version{1, 3, 0}, env: newEnvSet(), distro: "starter", cfg: map[string]any{}}
	cfg := map[string]any{}
	g.fillRequired("batches", "inline::reference", cfg, storeNames{kv: "kv", sql: "sql", id: "b.1", shared: true})
	if got := fmt.Sprint(cfg["sqlstore"]); got != "map[backend:sql table_name:batches_b_1]" {
		t.Errorf("shared batches store %s", got)
	}
	cfg = map[string]any{}
	g.fillRequired("files", "inline::localfs", cfg, storeNames{kv: "kv", sql: "sql", id: "f"})
	if got := cfg["storage_dir"]; got != "${env.FILES_STORAGE_DIR:=~/.ogx/distributions/starter/files}" {
		t.Errorf("storage_dir %v", got)
	}
	cfg = map[string]any{"persistence": "kept"}
	g.fillRequired("skills", "inline::builtin", cfg, storeNames{kv: "kv", sql: "sql", id: "s"})
	if cfg["persistence"] != "kept" {
		t.Errorf("a field the user set was replaced: %v", cfg["persistence"])
	}
}
