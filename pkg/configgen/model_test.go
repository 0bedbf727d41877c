package configgen

import (
	"strings"
	"testing"
)

func mustVersion(t testing.TB, s string) Version {
	t.Helper()
	v, err := ParseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The embedded bases pass the model of their own server version.
func TestBasesMatchModel(t *testing.T) {
	for _, d := range distributions {
		for _, v := range d.BaseVersions() {
			raw, ok := d.BaseFor(v)
			if !ok {
				t.Fatalf("%s: no base for %s", d.Name, v)
			}
			if err := Validate(raw, mustVersion(t, v)); err != nil {
				t.Errorf("%s %s: %v", d.Name, v, err)
			}
			// Every provider type exists at that version and has its hard
			// dependencies in the base.
			if err := registryErrors(raw, mustVersion(t, v)); err != nil {
				t.Errorf("%s %s: %v", d.Name, v, err)
			}
		}
	}
}

const minimal07 = `version: 2
distro_name: x
apis: [inference]
providers:
  inference: [{provider_id: a, provider_type: remote::vllm, config: {base_url: "http://a"}}]
storage:
  backends:
    kv_default: {type: kv_sqlite, db_path: /tmp/kv.db}
    sql_default: {type: sql_sqlite, db_path: /tmp/sql.db}
  stores:
    metadata: {backend: kv_default, namespace: registry}
    inference: {backend: sql_default, table_name: inference_store}
`

func TestValidateRefuses(t *testing.T) {
	if err := Validate([]byte(minimal07), mustVersion(t, "0.7.1")); err != nil {
		t.Fatalf("minimal 0.7 config: %v", err)
	}
	cases := []struct {
		name, version, edit, want string
	}{
		{"unknown top-level key", "0.7.1", "metadata_store: {type: sqlite}\n", `unknown field "metadata_store"`},
		{"unknown resource list", "0.7.1", "registered_resources: {vector_dbs: []}\n", `unknown field "vector_dbs"`},
		{"unknown provider key", "0.7.1", "external_apis_dir: /x\nproviders: {inference: [{provider_id: a, provider_type: remote::vllm, kvstore: {}}]}\n", `unknown field "kvstore"`},
		{"connection string", "0.7.1", "storage: {backends: {sql_default: {type: sql_postgres, user: u, connection_string: x}}}\n", `unknown field "connection_string"`},
		{"redis password", "0.7.1", "storage: {backends: {kv_default: {type: kv_redis, host: h, password: x}}}\n", `unknown field "password"`},
		{"postgres without user", "0.7.1", "storage: {backends: {kv_default: {type: kv_postgres, host: h}}}\n", `kv_default.user is required`},
		{"sql store on kv backend", "0.7.1", "storage: {backends: {kv_default: {type: kv_sqlite}}, stores: {inference: {backend: kv_default}}}\n", `needs a sql_* backend`},
		{"store on missing backend", "0.7.1", "storage: {backends: {}, stores: {metadata: {backend: nope}}}\n", `unknown backend "nope"`},
		{"agents at 0.7", "0.7.1", "apis: [agents]\n", `"agents" is not an API of server 0.7.1`},
		{"responses at 0.6", "0.6.0", "providers: {responses: [{provider_id: a, provider_type: inline::builtin}]}\n", `providers.responses: not an API`},
		{"telemetry at 0.4", "0.4.2", "image_name: x\ntelemetry: {enabled: true}\n", `telemetry was removed in 0.4`},
		{"distro_name at 0.4", "0.4.2", "image_name: x\n", `distro_name is read from 0.5`},
		{"no image_name at 0.3", "0.3.4", "distro_name: null\n", `image_name is required`},
		{"prompts store at 0.3", "0.3.4", "image_name: x\ndistro_name: null\nstorage: {backends: {kv_default: {type: kv_sqlite}}, stores: {prompts: {backend: kv_default}}}\n", `prompts is read from 0.4`},
		{"pool_size at 0.6", "0.6.0", "storage: {backends: {sql_default: {type: sql_postgres, user: u, pool_size: 3}}}\n", `pool_size is read from 0.7`},
		{"no storage at 0.3", "0.3.4", "image_name: x\ndistro_name: null\nstorage: null\n", `storage is required before 0.4`},
		{"no storage backends at 0.3", "0.3.4", "image_name: x\ndistro_name: null\nstorage: {stores: {}}\n", `storage.backends is required before 0.4`},
		{"rerank at 0.3", "0.3.4", "image_name: x\ndistro_name: null\nregistered_resources: {models: [{model_id: m, model_type: rerank}]}\n", `model_type "rerank"`},
		{"version 3", "0.7.1", "version: 3\n", `version must be 2`},
		{"kv store without namespace", "0.7.1", "storage: {backends: {kv_default: {type: kv_sqlite}}, stores: {metadata: {backend: kv_default}}}\n", `stores.metadata.namespace is required`},
		{"sql store without table_name", "0.7.1", "storage: {backends: {sql_default: {type: sql_sqlite}}, stores: {inference: {backend: sql_default}}}\n", `stores.inference.table_name is required`},
		{"older shape", "0.2.23", "", `older (0.2.x) config shape`},
		{"vector_stores store at 0.8", "0.8.0", "storage: {backends: {sql_default: {type: sql_sqlite}}, stores: {vector_stores: {backend: sql_default, table_name: v}}}\n", `vector_stores is read from 1.0`},
		{"vector_stores store on kv backend", "1.0.0", "storage: {backends: {kv_default: {type: kv_sqlite}}, stores: {vector_stores: {backend: kv_default, table_name: v}}}\n", `vector_stores references kv backend "kv_default"; it needs a sql_* backend`},
		{"vector_stores store without table_name", "1.3.0", "storage: {backends: {sql_default: {type: sql_sqlite}}, stores: {vector_stores: {backend: sql_default}}}\n", `stores.vector_stores.table_name is required`},
		{"registry refresh at 0.7", "0.7.1", "server: {registry_refresh_interval_seconds: 60}\n", `registry_refresh_interval_seconds is read from 0.8`},
		{"registry refresh of 0", "0.8.0", "server: {registry_refresh_interval_seconds: 0}\n", `must be a whole number of seconds over 0, got 0`},
		{"registry refresh of 1.5", "1.3.0", "server: {registry_refresh_interval_seconds: 1.5}\n", `must be a whole number of seconds over 0, got 1.5`},
		{"registry refresh of a word", "1.3.0", "server: {registry_refresh_interval_seconds: often}\n", `must be a whole number of seconds over 0, got often`},
		{"postgres command_timeout at 1.1", "1.1.0", "storage: {backends: {kv_default: {type: kv_postgres, user: u, command_timeout: 5}}}\n", `kv_default.command_timeout is read from 1.2`},
		{"postgres pool_size at 0.8", "0.8.0", "storage: {backends: {kv_default: {type: kv_postgres, user: u, pool_size: 5}}}\n", `kv_default.pool_size is read from 1.0`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := overlay(t, minimal07, c.edit)
			err := Validate(cfg, mustVersion(t, c.version))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// What the server reads at a version passes (the server's own checks, servercheck --forbid,
// accept each at these tags): the vector stores' metadata store from 1.0, the registry
// refresh interval from 0.8 (a number, a string of digits, or an ${env...} reference),
// postgres' command_timeout from 1.2.
func TestValidateAccepts(t *testing.T) {
	stores := "storage: {backends: {kv_default: {type: kv_sqlite}, sql_default: {type: sql_sqlite}}, stores: {metadata: {backend: kv_default, namespace: registry}, vector_stores: {backend: sql_default, table_name: vector_stores}}}\n"
	for _, c := range []struct{ name, version, edit string }{
		{"vector_stores store at 1.0", "1.0.0", stores},
		{"vector_stores store at 1.3", "1.3.0", stores},
		{"registry refresh at 0.8", "0.8.0", "server: {registry_refresh_interval_seconds: 60}\n"},
		{"registry refresh as a string", "1.3.0", "server: {registry_refresh_interval_seconds: \"60\"}\n"},
		{"registry refresh from the environment", "1.3.0", "server: {registry_refresh_interval_seconds: \"${env.REFRESH:=60}\"}\n"},
		{"postgres command_timeout at 1.2", "1.2.0", "storage: {backends: {kv_default: {type: kv_postgres, user: u, command_timeout: 5, pool_size: 3}, sql_default: {type: sql_sqlite}}, stores: {metadata: {backend: kv_default, namespace: registry}}}\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := Validate(overlay(t, minimal07, c.edit), mustVersion(t, c.version)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
