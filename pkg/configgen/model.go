package configgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// The typed model of config.yaml, written from the server's own schema
// (StackRunConfig/StackConfig in core/datatypes.py and the storage types in
// core/storage/datatypes.py, 0.3 to 0.7; SOURCES.md). The structs hold the
// union of the keys of those versions and are decoded strictly, so a key no
// supported version reads is refused; validate then refuses the keys the
// target version does not read, and checks what the server itself checks at
// startup. The server ignores unknown keys, which is why a wrong name must be
// caught here. Provider config maps, auth, logging, vector_stores, safety and
// the resource kinds the generator never writes stay free-form.

type stackConfig struct {
	Version              any                        `json:"version"`
	DistroName           *string                    `json:"distro_name"`
	ImageName            *string                    `json:"image_name"`
	ContainerImage       *string                    `json:"container_image"`
	APIs                 []string                   `json:"apis"`
	Providers            map[string][]providerEntry `json:"providers"`
	Storage              *storageConfig             `json:"storage"`
	RegisteredResources  *registeredResources       `json:"registered_resources"`
	Logging              any                        `json:"logging"`
	Telemetry            any                        `json:"telemetry"`
	Server               *serverConfig              `json:"server"`
	ExternalProvidersDir *string                    `json:"external_providers_dir"`
	ExternalAPIsDir      *string                    `json:"external_apis_dir"`
	VectorStores         map[string]any             `json:"vector_stores"`
	Safety               map[string]any             `json:"safety"`
	Connectors           []any                      `json:"connectors"`
}

type providerEntry struct {
	ProviderID   *string        `json:"provider_id"`
	ProviderType string         `json:"provider_type"`
	Config       map[string]any `json:"config"`
	Module       *string        `json:"module"`
}

type serverConfig struct {
	Port        any            `json:"port"`
	TLSCertfile *string        `json:"tls_certfile"`
	TLSKeyfile  *string        `json:"tls_keyfile"`
	TLSCafile   *string        `json:"tls_cafile"`
	Auth        map[string]any `json:"auth"`
	Host        *string        `json:"host"`
	Quota       map[string]any `json:"quota"`      // up to 0.8
	CORS        any            `json:"cors"`       // up to 0.8
	Workers     any            `json:"workers"`    // 0.7+
	Insecure    *bool          `json:"insecure"`   // 1.2+
	TLSConfig   map[string]any `json:"tls_config"` // 1.2+
	HSTSMaxAge  any            `json:"hsts_max_age"`
	Tenancy     map[string]any `json:"tenancy"` // 1.2+
	// 0.8+ (core/datatypes.py ServerConfig): an integer over 0, default 300.
	RegistryRefreshIntervalSeconds any `json:"registry_refresh_interval_seconds"`
}

type storageConfig struct {
	Backends map[string]json.RawMessage `json:"backends"`
	Stores   *storeRefs                 `json:"stores"`
}

type storeRefs struct {
	Metadata      *kvRef  `json:"metadata"`
	Inference     *sqlRef `json:"inference"`
	Conversations *sqlRef `json:"conversations"`
	Responses     *sqlRef `json:"responses"`
	Prompts       *mixRef `json:"prompts"`
	Connectors    *mixRef `json:"connectors"`
	// VectorStores holds the vector stores' metadata, 1.0+ (core/storage/datatypes.py
	// ServerStoresConfig); the server gives it to vector_io providers without a
	// metadata_store of their own.
	VectorStores *sqlRef `json:"vector_stores"`
}

// mixRef is the prompts or connectors store: a KVStoreReference up to 0.8,
// a SqlStoreReference from 1.0, which also migrates a kv one
// (core/storage/datatypes.py _migrate_kv_to_sql, 1.x).
type mixRef struct {
	Backend           string `json:"backend"`
	Namespace         any    `json:"namespace"`
	TableName         any    `json:"table_name"`
	MaxWriteQueueSize any    `json:"max_write_queue_size"`
	NumWriters        any    `json:"num_writers"`
}

// sqlShaped tells whether the reference is written as a SQL one.
func (r *mixRef) sqlShaped() bool { return r.TableName != nil }

type kvRef struct {
	Backend   string `json:"backend"`
	Namespace any    `json:"namespace"`
}

// sqlRef covers SqlStoreReference and its Inference/Responses subclasses.
type sqlRef struct {
	Backend           string `json:"backend"`
	TableName         any    `json:"table_name"`
	MaxWriteQueueSize any    `json:"max_write_queue_size"`
	NumWriters        any    `json:"num_writers"`
}

// Backends, one struct per type; decoded by their "type".
type kvSqlite struct {
	Type      string `json:"type"`
	Namespace any    `json:"namespace"`
	DBPath    any    `json:"db_path"`
}

type kvRedis struct {
	Type      string `json:"type"`
	Namespace any    `json:"namespace"`
	Host      any    `json:"host"`
	Port      any    `json:"port"`
}

type kvPostgres struct {
	Type       string `json:"type"`
	Namespace  any    `json:"namespace"`
	Host       any    `json:"host"`
	Port       any    `json:"port"`
	DB         any    `json:"db"`
	User       any    `json:"user"`
	Password   any    `json:"password"`
	SSLMode    any    `json:"ssl_mode"`
	CACertPath any    `json:"ca_cert_path"`
	TableName  any    `json:"table_name"`
	// 1.0+ (core/storage/datatypes.py, 1.x)
	PoolSize       any `json:"pool_size"`
	MaxOverflow    any `json:"max_overflow"`
	CommandTimeout any `json:"command_timeout"`
}

type kvMongo struct {
	Type           string `json:"type"`
	Namespace      any    `json:"namespace"`
	Host           any    `json:"host"`
	Port           any    `json:"port"`
	DB             any    `json:"db"`
	User           any    `json:"user"`
	Password       any    `json:"password"`
	CollectionName any    `json:"collection_name"`
}

type sqlSqlite struct {
	Type        string `json:"type"`
	DBPath      any    `json:"db_path"`
	PoolPrePing any    `json:"pool_pre_ping"` // 0.7+
}

type sqlPostgres struct {
	Type        string `json:"type"`
	Host        any    `json:"host"`
	Port        any    `json:"port"`
	DB          any    `json:"db"`
	User        any    `json:"user"`
	Password    any    `json:"password"`
	PoolPrePing any    `json:"pool_pre_ping"` // 0.7+
	PoolSize    any    `json:"pool_size"`     // 0.7+
	MaxOverflow any    `json:"max_overflow"`  // 0.7+
	PoolRecycle any    `json:"pool_recycle"`  // 0.7+
}

type registeredResources struct {
	Models       []modelInput     `json:"models"`
	Shields      []shieldInput    `json:"shields"`
	VectorStores []map[string]any `json:"vector_stores"`
	Datasets     []map[string]any `json:"datasets"`
	ScoringFns   []map[string]any `json:"scoring_fns"`
	Benchmarks   []map[string]any `json:"benchmarks"`
	ToolGroups   []toolGroupInput `json:"tool_groups"`
	Connectors   []map[string]any `json:"connectors"` // 0.4 only
}

type modelInput struct {
	ModelID         *string        `json:"model_id"`
	ProviderID      *string        `json:"provider_id"`
	ProviderModelID *string        `json:"provider_model_id"`
	ModelType       *string        `json:"model_type"`
	Metadata        map[string]any `json:"metadata"`
}

type shieldInput struct {
	ShieldID         *string        `json:"shield_id"`
	ProviderID       *string        `json:"provider_id"`
	ProviderShieldID *string        `json:"provider_shield_id"`
	Params           map[string]any `json:"params"`
}

type toolGroupInput struct {
	ToolgroupID *string        `json:"toolgroup_id"`
	ProviderID  *string        `json:"provider_id"`
	Args        map[string]any `json:"args"`
	MCPEndpoint any            `json:"mcp_endpoint"`
}

// serverAPIs lists the APIs a server version has (its Api enum, less the
// routing-table and built-in ones no provider list configures).
func serverAPIs(v Version) []string {
	apis := []string{"batches", "files", "inference", "tool_runtime", "vector_io"}
	if !v.OGX() {
		// 0.8 removed them (#5290).
		apis = append(apis, "datasetio", "eval", "scoring")
	}
	if !v.from(1, 0) {
		// 1.0 removed safety and shields (#5291).
		apis = append(apis, "safety")
	}
	if v.atLeast(7) {
		apis = append(apis, "responses")
	} else {
		apis = append(apis, "agents", "post_training")
	}
	// telemetry is no API any supported version takes providers for: 0.3
	// builds it in (INTERNAL_APIS in core/distribution.py; the top-level
	// telemetry key switches it), 0.4 removed it.
	if v.atLeast(4) {
		apis = append(apis, "file_processors")
	}
	if v.OGX() {
		apis = append(apis, "interactions", "messages")
	}
	if v.from(1, 1) {
		apis = append(apis, "skills")
	}
	sort.Strings(apis)
	return apis
}

func hasAPI(v Version, api string) bool {
	for _, a := range serverAPIs(v) {
		if a == api {
			return true
		}
	}
	return false
}

// strictDecode decodes JSON into out, refusing unknown keys.
func strictDecode(raw []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return err
	}
	return nil
}

// Validate checks config.yaml against the model of server version v: every
// key known at that version, and what the server checks when it loads it.
func Validate(configYAML []byte, v Version) error {
	if ok, why := v.supported(); !ok {
		return fmt.Errorf("%s", why)
	}
	raw, err := yaml.YAMLToJSON(configYAML)
	if err != nil {
		return fmt.Errorf("config does not parse: %w", err)
	}
	var cfg stackConfig
	if err := strictDecode(raw, &cfg); err != nil {
		return fmt.Errorf("config does not match the server's schema: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return fmt.Errorf("config is not a mapping: %w", err)
	}
	return cfg.validate(top, v)
}

func (c *stackConfig) validate(top map[string]json.RawMessage, v Version) error {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	present := func(k string) bool { _, ok := top[k]; return ok }

	c.validateTop(v, present, bad)
	c.validateProviders(v, bad)
	if r := c.RegisteredResources; r != nil {
		r.validate(v, bad)
	}
	if c.Storage != nil {
		errs = append(errs, c.Storage.validate(v)...)
	}
	// Before 0.4 StackRunConfig.storage and StorageConfig.backends have no
	// default (core/datatypes.py, core/storage/datatypes.py at 0.3.x).
	if !v.atLeast(4) {
		if c.Storage == nil {
			bad("storage is required before 0.4")
		} else if c.Storage.Backends == nil {
			bad("storage.backends is required before 0.4")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("config does not match the server %s schema: %s", v, strings.Join(errs, "; "))
	}
	return nil
}

// validateTop checks the top-level keys and the server section against server v;
// present tells whether the file has a top-level key, bad records a problem.
func (c *stackConfig) validateTop(v Version, present func(string) bool, bad func(string, ...any)) {
	if n, ok := c.Version.(float64); !ok || n != 2 {
		bad("version must be 2")
	}
	if v.atLeast(5) {
		if c.DistroName == nil && c.ImageName == nil {
			bad("distro_name is required")
		}
	} else {
		if c.ImageName == nil || *c.ImageName == "" {
			bad("image_name is required before 0.5")
		}
		if present("distro_name") {
			bad("distro_name is read from 0.5 (this server reads image_name)")
		}
	}
	if present("telemetry") && v.atLeast(4) {
		bad("telemetry was removed in 0.4")
	}
	if present("safety") && !v.atLeast(4) {
		bad("safety (default_shield_id) is read from 0.4")
	}
	if present("safety") && v.from(1, 0) {
		bad("safety (default_shield_id) was removed in 1.0 with the safety API")
	}
	if srv := c.Server; srv != nil {
		if v.from(1, 0) && (srv.CORS != nil || srv.Quota != nil) {
			bad("server.cors and server.quota were removed in 1.0")
		}
		if !v.from(1, 2) && (srv.Insecure != nil || srv.TLSConfig != nil || srv.HSTSMaxAge != nil || srv.Tenancy != nil) {
			bad("server.insecure, tls_config, hsts_max_age and tenancy are read from 1.2")
		}
		if r := srv.RegistryRefreshIntervalSeconds; r != nil {
			if !v.atLeast(8) {
				bad("server.registry_refresh_interval_seconds is read from 0.8")
			} else if !positiveWhole(r) {
				bad("server.registry_refresh_interval_seconds must be a whole number of seconds over 0, got %v", r)
			}
		}
	}
	if present("connectors") && !v.atLeast(5) {
		bad("connectors is read at the top level from 0.5")
	}
}

// validateProviders checks apis and providers against the APIs of server v.
func (c *stackConfig) validateProviders(v Version, bad func(string, ...any)) {
	if c.Providers == nil {
		bad("providers is required")
	}
	for _, a := range c.APIs {
		if !hasAPI(v, a) {
			bad("apis: %q is not an API of server %s", a, v)
		}
	}
	for _, api := range sortedKeys(c.Providers) {
		if !hasAPI(v, api) {
			bad("providers.%s: not an API of server %s", api, v)
		}
		for i, p := range c.Providers[api] {
			if p.ProviderType == "" {
				bad("providers.%s[%d].provider_type is required", api, i)
			}
		}
	}
}

// validate checks registered_resources against server v.
func (r *registeredResources) validate(v Version, bad func(string, ...any)) {
	for i, m := range r.Models {
		if m.ModelID == nil || *m.ModelID == "" {
			bad("registered_resources.models[%d].model_id is required", i)
		}
		if m.ModelType != nil {
			switch t := *m.ModelType; {
			case t == "llm" || t == "embedding":
			case t == "rerank" && v.atLeast(4):
			default:
				bad("registered_resources.models[%d].model_type %q is not a model type of server %s", i, t, v)
			}
		}
	}
	if r.Shields != nil && v.from(1, 0) {
		bad("registered_resources.shields was removed in 1.0 with the safety API")
	}
	if v.OGX() && (r.Datasets != nil || r.ScoringFns != nil || r.Benchmarks != nil) {
		bad("registered_resources.datasets, scoring_fns and benchmarks were removed in 0.8 with the datasetio, scoring and eval APIs")
	}
	for i, s := range r.Shields {
		if s.ShieldID == nil || *s.ShieldID == "" {
			bad("registered_resources.shields[%d].shield_id is required", i)
		}
	}
	for i, g := range r.ToolGroups {
		if g.ToolgroupID == nil || g.ProviderID == nil {
			bad("registered_resources.tool_groups[%d]: toolgroup_id and provider_id are required", i)
		}
	}
	if r.Connectors != nil && v.line() != 4 {
		bad("registered_resources.connectors is read only by 0.4")
	}
}

func (s *storageConfig) validate(v Version) []string {
	errs, kinds := s.validateBackends(v)
	if s.Stores == nil {
		return errs
	}
	errs = append(errs, s.Stores.validateShapes(v)...)
	sort.Strings(errs)
	return append(errs, s.validateRefs(v, kinds)...)
}

// validateBackends checks each backend against its type's schema at server v, and
// returns the kind (kv or sql) of each that is valid.
func (s *storageConfig) validateBackends(v Version) ([]string, map[string]string) {
	var errs []string
	kinds := map[string]string{} // backend name -> kv or sql
	for _, name := range sortedKeys(s.Backends) {
		raw := s.Backends[name]
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			errs = append(errs, fmt.Sprintf("storage.backends.%s: %v", name, err))
			continue
		}
		var target any
		switch head.Type {
		case "kv_sqlite":
			target = &kvSqlite{}
		case "kv_redis":
			target = &kvRedis{}
		case "kv_postgres":
			target = &kvPostgres{}
		case "kv_mongodb":
			target = &kvMongo{}
		case "sql_sqlite":
			target = &sqlSqlite{}
		case "sql_postgres":
			target = &sqlPostgres{}
		default:
			errs = append(errs, fmt.Sprintf("storage.backends.%s.type %q is not a backend type", name, head.Type))
			continue
		}
		if err := strictDecode(raw, target); err != nil {
			errs = append(errs, fmt.Sprintf("storage.backends.%s (%s): %v", name, head.Type, err))
			continue
		}
		kinds[name] = head.Type[:strings.Index(head.Type, "_")]
		if !v.atLeast(7) {
			var keys map[string]any
			_ = json.Unmarshal(raw, &keys)
			for _, k := range []string{"pool_pre_ping", "pool_size", "max_overflow", "pool_recycle"} {
				if _, ok := keys[k]; ok {
					errs = append(errs, fmt.Sprintf("storage.backends.%s.%s is read from 0.7", name, k))
				}
			}
		}
		if head.Type == "kv_postgres" && !v.from(1, 2) {
			var keys map[string]any
			_ = json.Unmarshal(raw, &keys)
			for _, k := range [][2]string{{"pool_size", "1.0"}, {"max_overflow", "1.0"}, {"command_timeout", "1.2"}} {
				if _, ok := keys[k[0]]; ok && (k[1] == "1.2" || !v.from(1, 0)) {
					errs = append(errs, fmt.Sprintf("storage.backends.%s.%s is read from %s", name, k[0], k[1]))
				}
			}
		}
		switch b := target.(type) {
		case *kvPostgres:
			if b.User == nil {
				errs = append(errs, fmt.Sprintf("storage.backends.%s.user is required", name))
			}
		case *sqlPostgres:
			if b.User == nil {
				errs = append(errs, fmt.Sprintf("storage.backends.%s.user is required", name))
			}
		}
	}
	return errs, kinds
}

// validateShapes checks each store reference has the fields its kind requires at
// server v.
func (st *storeRefs) validateShapes(v Version) []string {
	var errs []string
	// KVStoreReference.namespace and SqlStoreReference.table_name have no
	// default (core/storage/datatypes.py, 0.3 to 0.7).
	if r := st.Metadata; r != nil && (r.Namespace == nil || r.Namespace == "") {
		errs = append(errs, "storage.stores.metadata.namespace is required")
	}
	for name, r := range map[string]*mixRef{"prompts": st.Prompts, "connectors": st.Connectors} {
		switch {
		case r == nil:
		case r.sqlShaped() && !v.from(1, 0):
			errs = append(errs, fmt.Sprintf("storage.stores.%s is a kv store (namespace) before 1.0", name))
		case r.sqlShaped() && r.TableName == "":
			errs = append(errs, fmt.Sprintf("storage.stores.%s.table_name is required", name))
		case !r.sqlShaped() && (r.MaxWriteQueueSize != nil || r.NumWriters != nil):
			errs = append(errs, fmt.Sprintf("storage.stores.%s: max_write_queue_size and num_writers need a SQL store (table_name)", name))
		case !r.sqlShaped() && (r.Namespace == nil || r.Namespace == ""):
			errs = append(errs, fmt.Sprintf("storage.stores.%s.namespace is required", name))
		}
	}
	for name, r := range map[string]*sqlRef{"inference": st.Inference, "conversations": st.Conversations, "responses": st.Responses, "vector_stores": st.VectorStores} {
		if r != nil && (r.TableName == nil || r.TableName == "") {
			errs = append(errs, fmt.Sprintf("storage.stores.%s.table_name is required", name))
		}
	}
	return errs
}

// validateRefs checks each store references a backend there is, of the kind it needs
// (kinds: the valid backends'), and the stores server v reads.
func (s *storageConfig) validateRefs(v Version, kinds map[string]string) []string {
	var errs []string
	ref := func(store, backend, want string) {
		k, ok := kinds[backend]
		switch {
		case backend == "":
			errs = append(errs, fmt.Sprintf("storage.stores.%s.backend is required", store))
		case !ok && s.Backends[backend] == nil:
			errs = append(errs, fmt.Sprintf("storage.stores.%s references unknown backend %q", store, backend))
		case ok && k != want:
			errs = append(errs, fmt.Sprintf("storage.stores.%s references %s backend %q; it needs a %s_* backend", store, k, backend, want))
		}
	}
	st := s.Stores
	if st.Metadata != nil {
		ref("metadata", st.Metadata.Backend, "kv")
	}
	if st.Inference != nil {
		ref("inference", st.Inference.Backend, "sql")
	}
	if st.Conversations != nil {
		ref("conversations", st.Conversations.Backend, "sql")
	}
	if st.Responses != nil {
		ref("responses", st.Responses.Backend, "sql")
	}
	if st.Prompts != nil {
		if !v.atLeast(4) {
			errs = append(errs, "storage.stores.prompts is read from 0.4")
		}
		ref("prompts", st.Prompts.Backend, mixKind(st.Prompts))
	}
	if st.Connectors != nil {
		if !v.atLeast(5) {
			errs = append(errs, "storage.stores.connectors is read from 0.5")
		}
		ref("connectors", st.Connectors.Backend, mixKind(st.Connectors))
	}
	if st.VectorStores != nil {
		if !v.from(1, 0) {
			errs = append(errs, "storage.stores.vector_stores is read from 1.0")
		}
		ref("vector_stores", st.VectorStores.Backend, "sql")
	}
	return errs
}

// positiveWhole tells whether the server reads x as an integer over 0, as pydantic's lax
// mode does: a number without a fraction, or a string of digits; a string with an
// ${env...} reference is judged when the server expands it, not here.
func positiveWhole(x any) bool {
	switch n := x.(type) {
	case float64:
		return n == float64(int64(n)) && n > 0
	case string:
		if hasEnvRef(n) {
			return true
		}
		i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		return err == nil && i > 0
	}
	return false
}

// mixKind is the backend kind a prompts or connectors reference needs.
func mixKind(r *mixRef) string {
	if r.sqlShaped() {
		return "sql"
	}
	return "kv"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
