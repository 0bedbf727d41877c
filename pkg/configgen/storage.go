package configgen

import (
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// The storage rules. spec.storage.kv is the backend the registry
// (storage.stores.metadata) uses, spec.storage.sql the one the inference
// store uses; each replaces that backend under its name, so every provider
// pointing at it follows. A side the CR leaves out keeps the base's. Within
// a side, a field the CR does not set keeps the base's value when the base
// backend has the same type. The server has no connection strings and its
// Redis backend no password: postgres gets host, port, db, user, and a
// password from a Secret through LLSD_STORAGE_KV_PASSWORD or
// LLSD_STORAGE_SQL_PASSWORD.

func (g *gen) storageMaps() (backends, stores map[string]any) {
	st, ok := g.cfg["storage"].(map[string]any)
	if !ok {
		st = map[string]any{}
		g.cfg["storage"] = st
	}
	backends, ok = st["backends"].(map[string]any)
	if !ok {
		backends = map[string]any{}
		st["backends"] = backends
	}
	stores, ok = st["stores"].(map[string]any)
	if !ok {
		stores = map[string]any{}
		st["stores"] = stores
	}
	return backends, stores
}

// backendName is the backend a store points at, else the default name.
func (g *gen) backendName(store, def string) string {
	st, _ := g.cfg["storage"].(map[string]any)
	stores, _ := st["stores"].(map[string]any)
	if ref, ok := stores[store].(map[string]any); ok {
		if b, ok := ref["backend"].(string); ok && b != "" {
			return b
		}
	}
	return def
}

func (g *gen) kvBackendName() string { return g.backendName("metadata", "kv_default") }

func (g *gen) sqlBackendName() string { return g.backendName("inference", "sql_default") }

// distroDir is the distribution's data directory as its configs write it,
// ~/.llama/distributions/<name> before 0.8 and ~/.ogx/... from it (the
// controller sets SQLITE_STORE_DIR on the storage volume for OGX servers).
func (g *gen) distroDir() string {
	home := "~/.llama"
	if g.v.OGX() {
		home = "~/.ogx"
	}
	return home + "/distributions/" + g.distro
}

// sqlitePath is where a sqlite backend, or a provider, keeps file: under
// SQLITE_STORE_DIR, by default the distribution's data directory.
func (g *gen) sqlitePath(file string) string {
	return "${env.SQLITE_STORE_DIR:=" + g.distroDir() + "}/" + file
}

func (g *gen) storage() error {
	s := g.spec.Storage
	if s == nil {
		return nil
	}
	if s.KV != nil {
		name := g.kvBackendName()
		typ := map[string]string{"": "kv_sqlite", "sqlite": "kv_sqlite", "redis": "kv_redis", "postgres": "kv_postgres"}[s.KV.Type]
		b := g.startBackend(name, typ)
		switch typ {
		case "kv_sqlite":
			setDefault(b, "db_path", g.sqlitePath("kvstore.db"))
		case "kv_redis":
			if s.KV.Redis == nil {
				return invalid("spec.storage.kv.redis", "redis storage needs host")
			}
			b["host"] = s.KV.Redis.Host
			b["port"] = portOr(s.KV.Redis.Port, 6379)
		case "kv_postgres":
			if err := g.postgres(b, s.KV.Postgres, "spec.storage.kv.postgres", "storage-kv"); err != nil {
				return err
			}
		}
		g.point("metadata", name, "namespace", "registry")
	}
	if s.SQL != nil {
		name := g.sqlBackendName()
		typ := map[string]string{"": "sql_sqlite", "sqlite": "sql_sqlite", "postgres": "sql_postgres"}[s.SQL.Type]
		b := g.startBackend(name, typ)
		switch typ {
		case "sql_sqlite":
			setDefault(b, "db_path", g.sqlitePath("sql_store.db"))
		case "sql_postgres":
			if err := g.postgres(b, s.SQL.Postgres, "spec.storage.sql.postgres", "storage-sql"); err != nil {
				return err
			}
		}
		g.point("inference", name, "table_name", "inference_store")
	}
	return nil
}

// startBackend returns the backend to fill: the base's when it has the same
// type (so what the CR leaves out keeps the base's), else a new one.
func (g *gen) startBackend(name, typ string) map[string]any {
	backends, _ := g.storageMaps()
	if b, ok := backends[name].(map[string]any); ok && b["type"] == typ {
		return b
	}
	b := map[string]any{"type": typ}
	backends[name] = b
	return b
}

// point makes a store use the backend, adding the store when the base has none.
func (g *gen) point(store, backend, key, value string) {
	_, stores := g.storageMaps()
	ref, ok := stores[store].(map[string]any)
	if !ok {
		ref = map[string]any{key: value}
		stores[store] = ref
	}
	ref["backend"] = backend
}

func (g *gen) postgres(b map[string]any, p *v1alpha2.PostgresSpec, field, envID string) error {
	if p == nil {
		return invalid(field, "postgres storage needs host and user")
	}
	b["host"] = p.Host
	b["port"] = portOr(p.Port, 5432)
	b["user"] = p.User
	if p.DB != "" {
		b["db"] = p.DB
	}
	if p.PasswordSecretRef != nil {
		ref, err := g.env.add(EnvName(envID, "password"), field+".passwordSecretRef", p.PasswordSecretRef.Name, p.PasswordSecretRef.Key)
		if err != nil {
			return err
		}
		b["password"] = ref
	}
	return nil
}

func setDefault(m map[string]any, k string, v any) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

func portOr(p, def int32) int32 {
	if p == 0 {
		return def
	}
	return p
}
