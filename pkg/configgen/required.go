package configgen

import (
	"fmt"
	"regexp"
	"strings"
)

// The config fields a provider type's config class declares without a
// default, per server version: pydantic refuses a provider config missing
// one ("Field required") when the server instantiates it, and the server
// stops. Read from each registry entry's config_class and the classes it
// inherits (SOURCES.md: L v0.3.4, v0.4.2, v0.5.0, v0.6.0, v0.7.1; the
// server's tags v0.8.0, v1.0.0, v1.1.0, v1.2.0 and v1.3.0 as
// opendatahub-io/ogx carries them; the other patch releases read the same).
// A type not listed has no such field at any version. None of these classes
// fills a missing one in a validator before the check.
//
// The generator writes the storage ones itself for the CR's providers
// (on the backends the config's registry and inference stores use, named
// as the server's own sample configs name them) and refuses a provider
// that lacks one it cannot choose; a base provider lacking one is refused.

type fieldKind int

const (
	// kvStoreField is a KVStoreReference: backend and namespace, neither
	// with a default.
	kvStoreField fieldKind = iota
	// sqlStoreField is a SqlStoreReference: backend and table_name.
	sqlStoreField
	// dataPathField is a path the provider keeps its data at.
	dataPathField
	// nullField may be null, but must be written (str | None without default).
	nullField
	// statePersistenceField is agents' (to 0.6) and responses' (0.7, 0.8)
	// persistence: agent_state, a KVStoreReference, and responses, a
	// ResponsesStoreReference (table_name required to 0.4, defaulted from 0.5).
	statePersistenceField
	// responsesPersistenceField is responses' persistence from 1.0:
	// responses only.
	responsesPersistenceField
	// userField is a value only the user knows (a bucket, a project, a URL).
	userField
)

type requiredField struct {
	api, ptype string
	from, to   int // Version.line numbers, as in providerRegistry
	field      string
	kind       fieldKind
	// name is the default namespace, table or file name; an empty kv name
	// is <api>::<id>, a data path of a vector_io provider is named after its id.
	name string
	// nullable: the field's type admits null, so a null the user writes stands.
	nullable bool
	// optional: the server has a default, but one that names a backend
	// (sql_default) the config may not have: written, never required.
	optional bool
}

var requiredFields = []requiredField{
	{api: "agents", ptype: "inline::meta-reference", from: 3, to: 6, field: "persistence", kind: statePersistenceField},
	{api: "batches", ptype: "inline::reference", from: 3, to: 8, field: "kvstore", kind: kvStoreField, name: "batches"},
	// #5757 (1.0) moved batches to a SQL store; the config class has no
	// migration from kvstore.
	{api: "batches", ptype: "inline::reference", from: 100, to: ogxLast, field: "sqlstore", kind: sqlStoreField, name: "batches"},
	{api: "datasetio", ptype: "inline::localfs", from: 3, to: 7, field: "kvstore", kind: kvStoreField, name: "datasetio::localfs"},
	{api: "datasetio", ptype: "remote::huggingface", from: 3, to: 7, field: "kvstore", kind: kvStoreField, name: "datasetio::huggingface"},
	{api: "eval", ptype: "inline::builtin", from: 7, to: 7, field: "kvstore", kind: kvStoreField, name: "eval"},
	{api: "eval", ptype: "inline::meta-reference", from: 3, to: 6, field: "kvstore", kind: kvStoreField, name: "eval"},
	{api: "file_processors", ptype: "remote::unstructured-api", from: 102, to: ogxLast, field: "api_key", kind: userField},
	{api: "files", ptype: "inline::localfs", from: 3, to: ogxLast, field: "storage_dir", kind: dataPathField, name: "files"},
	{api: "files", ptype: "inline::localfs", from: 3, to: ogxLast, field: "metadata_store", kind: sqlStoreField, name: "files_metadata"},
	{api: "files", ptype: "remote::openai", from: 4, to: ogxLast, field: "api_key", kind: userField},
	{api: "files", ptype: "remote::openai", from: 4, to: ogxLast, field: "metadata_store", kind: sqlStoreField, name: "openai_files_metadata"},
	{api: "files", ptype: "remote::s3", from: 3, to: ogxLast, field: "bucket_name", kind: userField},
	{api: "files", ptype: "remote::s3", from: 3, to: ogxLast, field: "metadata_store", kind: sqlStoreField, name: "s3_files_metadata"},
	{api: "inference", ptype: "remote::azure", from: 3, to: 3, field: "api_base", kind: userField},
	{api: "inference", ptype: "remote::hf::endpoint", from: 3, to: 6, field: "endpoint_name", kind: userField},
	{api: "inference", ptype: "remote::hf::serverless", from: 3, to: 6, field: "huggingface_repo", kind: userField},
	{api: "inference", ptype: "remote::tgi", from: 3, to: 3, field: "url", kind: userField},
	{api: "inference", ptype: "remote::vertexai", from: 3, to: ogxLast, field: "project", kind: userField},
	// interactions' store defaults to sql_default from 1.0 (0.8 has no field).
	{api: "interactions", ptype: "inline::builtin", from: 100, to: ogxLast, field: "store", kind: sqlStoreField, name: "interactions", optional: true},
	// messages has no fields at 0.8 and 1.0; 1.1 added message batches.
	{api: "messages", ptype: "inline::builtin", from: 101, to: ogxLast, field: "kvstore", kind: kvStoreField, name: "message_batches"},
	{api: "post_training", ptype: "inline::huggingface-gpu", from: 3, to: 6, field: "dpo_output_dir", kind: dataPathField, name: "dpo_output"},
	{api: "responses", ptype: "inline::builtin", from: 7, to: 8, field: "persistence", kind: statePersistenceField},
	{api: "responses", ptype: "inline::builtin", from: 100, to: ogxLast, field: "persistence", kind: responsesPersistenceField},
	{api: "safety", ptype: "remote::passthrough", from: 6, to: 8, field: "base_url", kind: userField},
	{api: "skills", ptype: "inline::builtin", from: 101, to: ogxLast, field: "persistence", kind: kvStoreField, name: "skills"},
	{api: "vector_io", ptype: "inline::builtin", from: 7, to: 7, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "inline::chromadb", from: 3, to: ogxLast, field: "db_path", kind: dataPathField},
	{api: "vector_io", ptype: "inline::chromadb", from: 3, to: ogxLast, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "inline::faiss", from: 3, to: ogxLast, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "inline::meta-reference", from: 3, to: 6, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "inline::milvus", from: 3, to: ogxLast, field: "db_path", kind: dataPathField},
	{api: "vector_io", ptype: "inline::milvus", from: 3, to: ogxLast, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "inline::qdrant", from: 3, to: ogxLast, field: "path", kind: dataPathField},
	{api: "vector_io", ptype: "inline::qdrant", from: 3, to: ogxLast, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "inline::sqlite-vec", from: 3, to: ogxLast, field: "db_path", kind: dataPathField},
	{api: "vector_io", ptype: "inline::sqlite-vec", from: 3, to: ogxLast, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "inline::sqlite_vec", from: 3, to: 7, field: "db_path", kind: dataPathField},
	{api: "vector_io", ptype: "inline::sqlite_vec", from: 3, to: 7, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "remote::chromadb", from: 3, to: ogxLast, field: "url", kind: userField, nullable: true},
	{api: "vector_io", ptype: "remote::chromadb", from: 3, to: ogxLast, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "remote::infinispan", from: 7, to: ogxLast, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "remote::milvus", from: 3, to: ogxLast, field: "uri", kind: userField},
	{api: "vector_io", ptype: "remote::milvus", from: 3, to: ogxLast, field: "token", kind: nullField},
	{api: "vector_io", ptype: "remote::milvus", from: 3, to: ogxLast, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "remote::neo4j", from: 103, to: ogxLast, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "remote::oci", from: 5, to: ogxLast, field: "conn_str", kind: userField},
	{api: "vector_io", ptype: "remote::oci", from: 5, to: ogxLast, field: "user", kind: userField},
	{api: "vector_io", ptype: "remote::oci", from: 5, to: ogxLast, field: "password", kind: userField},
	{api: "vector_io", ptype: "remote::oci", from: 5, to: ogxLast, field: "tnsnames_loc", kind: userField},
	{api: "vector_io", ptype: "remote::oci", from: 5, to: ogxLast, field: "ewallet_pem_loc", kind: userField},
	{api: "vector_io", ptype: "remote::oci", from: 5, to: ogxLast, field: "ewallet_password", kind: userField},
	{api: "vector_io", ptype: "remote::oci", from: 5, to: ogxLast, field: "persistence", kind: kvStoreField},
	{api: "vector_io", ptype: "remote::qdrant", from: 3, to: ogxLast, field: "persistence", kind: kvStoreField},
}

// requiredAt lists the required (and written-optional) fields of a provider
// type at v, in the table's order.
func requiredAt(api, ptype string, v Version) []requiredField {
	var out []requiredField
	for _, f := range requiredFields {
		if f.api == api && f.ptype == ptype && v.line() >= f.from && v.line() <= f.to {
			out = append(out, f)
		}
	}
	return out
}

// storeNames is what the generator names a provider's stores after.
type storeNames struct {
	kv, sql string // the backends
	id      string // the provider's id
	// shared: the provider is one of several of its API, so its namespace,
	// table and path carry its id.
	shared bool
}

var unsafeTableChars = regexp.MustCompile(`[^A-Za-z0-9_]`)

// defaultValue is what the generator writes for a missing field, or false
// when only the user can give it.
func (g *gen) defaultValue(f requiredField, n storeNames) (any, bool) {
	kvNamespace := func(name string) string {
		if name == "" {
			return f.api + "::" + n.id
		}
		if n.shared {
			return name + "::" + n.id
		}
		return name
	}
	table := func(name string) string {
		if n.shared {
			return name + "_" + unsafeTableChars.ReplaceAllString(n.id, "_")
		}
		return name
	}
	switch f.kind {
	case kvStoreField:
		return map[string]any{"backend": n.kv, "namespace": kvNamespace(f.name)}, true
	case sqlStoreField:
		return map[string]any{"backend": n.sql, "table_name": table(f.name)}, true
	case statePersistenceField:
		return map[string]any{
			"agent_state": map[string]any{"backend": n.kv, "namespace": kvNamespace("agents")},
			"responses":   map[string]any{"backend": n.sql, "table_name": table("responses")},
		}, true
	case responsesPersistenceField:
		return map[string]any{"responses": map[string]any{"backend": n.sql, "table_name": table("responses")}}, true
	case nullField:
		return nil, true
	case dataPathField:
		switch {
		case f.api == "vector_io":
			return g.sqlitePath(f.api + "_" + n.id + ".db"), true
		case f.api == "files":
			// The variable the server's own sample uses, which the
			// controller sets on the storage volume for an OGX server.
			dir := "${env.FILES_STORAGE_DIR:=" + g.distroDir() + "/files}"
			if n.shared {
				dir += "/" + n.id
			}
			return dir, true
		case n.shared:
			return g.sqlitePath(f.name + "_" + n.id), true
		}
		return g.sqlitePath(f.name), true
	}
	return nil, false
}

// fillRequired writes into cfg the fields of the provider's type that it
// lacks and the generator can choose.
func (g *gen) fillRequired(api, ptype string, cfg map[string]any, n storeNames) {
	for _, f := range requiredAt(api, ptype, g.v) {
		if _, set := cfg[f.field]; set {
			continue
		}
		if val, ok := g.defaultValue(f, n); ok {
			cfg[f.field] = val
		}
	}
}

// missingField is a required field a provider config lacks or writes in a
// shape the server refuses.
type missingField struct {
	field string
	// why is empty when the field is absent, else what is wrong with it.
	why  string
	kind fieldKind
}

func (m missingField) String() string {
	if m.why == "" {
		return m.field + " is missing (it has no default)"
	}
	return m.field + " " + m.why
}

// checkRequired reports the required fields of a provider config that are
// missing or malformed at v. Values are judged by shape only: a ${env...}
// string stands for whatever the variable holds.
func checkRequired(api, ptype string, cfg map[string]any, v Version) []missingField {
	var out []missingField
	for _, f := range requiredAt(api, ptype, v) {
		val, set := cfg[f.field]
		if f.optional && !set {
			continue
		}
		if !set || (val == nil && f.kind != nullField && !f.nullable) {
			out = append(out, missingField{field: f.field, kind: f.kind})
			continue
		}
		var why string
		switch f.kind {
		case kvStoreField:
			why = refProblem(val, "backend", "namespace")
		case sqlStoreField:
			why = refProblem(val, "backend", "table_name")
		case statePersistenceField:
			m, ok := val.(map[string]any)
			switch {
			case !ok:
				why = "must be a mapping with agent_state and responses"
			default:
				keys := []string{"backend"}
				if !v.atLeast(5) {
					keys = append(keys, "table_name")
				}
				if w := refProblem(m["agent_state"], "backend", "namespace"); w != "" {
					why = "agent_state " + w
				} else if w := refProblem(m["responses"], keys...); w != "" {
					why = "responses " + w
				}
			}
		case responsesPersistenceField:
			m, ok := val.(map[string]any)
			if !ok {
				why = "must be a mapping with responses"
			} else if w := refProblem(m["responses"], "backend"); w != "" {
				why = "responses " + w
			}
		}
		if why != "" {
			out = append(out, missingField{field: f.field, why: why, kind: f.kind})
		}
	}
	return out
}

// refProblem tells what a store reference lacks of keys, or "".
func refProblem(val any, keys ...string) string {
	m, ok := val.(map[string]any)
	if !ok {
		return "must be a mapping with " + strings.Join(keys, " and ")
	}
	var lack []string
	for _, k := range keys {
		if s, ok := m[k].(string); !ok || s == "" {
			lack = append(lack, k)
		}
	}
	if len(lack) == 0 {
		return ""
	}
	return "lacks " + strings.Join(lack, " and ")
}

// requiredProblem is a provider of a config missing a required field.
type requiredProblem struct {
	api   string
	index int
	id    string
	ptype string
	miss  []missingField
}

func (p requiredProblem) String() string {
	var l []string
	for _, m := range p.miss {
		l = append(l, m.String())
	}
	return fmt.Sprintf("providers.%s[%d] (%s, %s): %s", p.api, p.index, p.id, p.ptype, strings.Join(l, ", "))
}

// checkRequiredAll runs checkRequired on every provider of cfg the server
// would instantiate: skipped ("__disabled__", empty id) and external ones
// (module, or external_providers_dir) are not judged, nor types the server
// version lacks (checkRegistry reports those).
func checkRequiredAll(cfg map[string]any, v Version) []requiredProblem {
	prov, _ := cfg["providers"].(map[string]any)
	if d, ok := cfg["external_providers_dir"].(string); ok && d != "" {
		return nil
	}
	var out []requiredProblem
	for _, api := range sortedKeys(prov) {
		l, _ := prov[api].([]any)
		for i, e := range l {
			m, _ := e.(map[string]any)
			id, _ := m["provider_id"].(string)
			if m == nil || id == "" || id == "__disabled__" {
				continue
			}
			if mod, ok := m["module"].(string); ok && mod != "" {
				continue
			}
			ptype, _ := m["provider_type"].(string)
			if _, ok := lookupProvider(api, ptype, v); !ok {
				continue
			}
			c, _ := m["config"].(map[string]any)
			if miss := checkRequired(api, ptype, c, v); len(miss) > 0 {
				out = append(out, requiredProblem{api: api, index: i, id: id, ptype: ptype, miss: miss})
			}
		}
	}
	return out
}
