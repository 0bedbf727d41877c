// Package configgen writes the llama-stack server's config.yaml for a
// v1alpha2 LlamaStackDistribution. It is pure: spec and base config in,
// config, environment and hash out; no client, no Kubernetes API. The
// controller resolves the inputs (pkg/controller/revision) and writes what it
// returns (pkg/controller/generatedconfig.go).
//
// # Distributions and versions
//
// distributions.go is the one table of named distributions: a pinned image
// (never :latest), the llama-stack version in it, and a base config written
// for that version (bases/<name>-<version>.yaml), with the images earlier
// controller releases ran for the name. The controller runs that image for
// every CR naming the distribution, generating or not, and docs/api.md's table
// of named distributions is checked against it (readme_test.go). SOURCES.md
// names the upstream tag and file of every fact. A direct image needs spec.baseConfig
// and a known server version. The shapes 0.3 to 0.7 are known; 0.2.x (the
// older shape: per-provider stores, top-level resources) and anything newer
// than 0.7 are reported with the reason ServerVersionNotSupported, and an
// unknown version with BaseConfigRequired: never guessed.
//
// # The typed model
//
// model.go holds the server's own schema (StackRunConfig/StackConfig, the
// storage backends and stores, the resource inputs) as Go structs decoded
// strictly, plus the keys each version reads: distro_name from 0.5 (before,
// image_name), telemetry only in 0.3, safety from 0.4, connectors at the top
// from 0.5, stores.prompts from 0.4, storage and its backends required
// before 0.4 (no defaults there), the 0.7 pool settings, the APIs of each
// version (agents until 0.6, responses from 0.7; telemetry takes providers at
// no supported version: 0.3 builds it in, 0.4 removed it). The base is
// checked before use and the result before it is returned; the server itself
// ignores keys it does not know, so a wrong name would fail silently. Keys
// upstream's own configs write that no server reads
// (registered_resources.vector_dbs) are dropped from a base, not refused, and
// so are the keys the version ignores (Ignored: safety on 1.x), told in
// Output.Ignored;
// version '2' (a string, which the server coerces) is written as 2. Store
// references need their namespace or table_name, as in the server.
//
// registry.go is the server's provider registry by version: the provider
// types of each API and their hard dependencies (api_dependencies). The
// server refuses to start on an unknown type or on a provider whose
// dependency it does not serve, so the result is checked against it: a CR
// provider of an unknown type is refused at spec.providers.<api>[i].provider
// (unless the base sets external_providers_dir); a dependency removed by
// spec.disabled is refused at that spec.disabled entry, naming the providers
// that need it (disable them too, or replace their providers); one a CR
// provider lacks is refused at that provider; the base's own at the base.
//
// # The rules (the v1alpha2 contract)
//
//   - Providers: a CR list replaces the base's providers of that API, in
//     the CR's order. provider is a provider type: a bare name is
//     remote::<name>; inline::<name> is written out. provider_id is id, else
//     the name without its prefix. endpoint and apiKey go to the field the
//     type has at that version (providers.go: vLLM url before 0.4 and
//     base_url from 0.4, its key api_token; most others api_key); a type
//     without a known field is an error that points to settings or
//     secretRefs. settings are merged into the config as given; setting a
//     field twice is an error. A vector_io provider without persistence gets
//     the kv backend's. A field the type's config class requires at that
//     version without a default (required.go) is written when it is a store
//     reference or a data path (batches kvstore to 0.8 and sqlstore from
//     1.0, messages kvstore from 1.1, skills persistence, localfs
//     storage_dir and metadata_store, ...), on the registry's kv and the
//     inference store's sql backend, and refused when only the user knows
//     it; a base provider missing one is refused too. Ids are unique across
//     APIs.
//   - Secrets: apiKey and each secretRefs entry become an environment
//     variable from the Secret key, LLSD_<ID>_<FIELD> (EnvName), written in
//     the config as ${env.NAME}; two entries with one name are an error.
//     The package never sees a Secret value.
//   - Storage: spec.storage.kv replaces the backend of the registry store
//     (stores.metadata), spec.storage.sql that of the inference store, under
//     the same name, so providers pointing at it follow. sqlite (default),
//     redis (host, port; the server's Redis takes no password) or postgres
//     (host, port, db, user, and a password from a Secret through
//     LLSD_STORAGE_KV_PASSWORD or LLSD_STORAGE_SQL_PASSWORD; no connection
//     string exists). What the CR leaves out keeps the base's.
//   - Disabled APIs leave both apis and providers (the server starts every
//     listed provider), with the resources and defaults that need them.
//     Disabling an API the CR configures, one its resources need, or one a
//     remaining provider hard-depends on is an error. An API the server
//     version does not have is absent, as asked: Output.Ignored says so
//     (an error only when the version has it under another name).
//   - Resources are added to the base's (an entry with the same id is
//     replaced). A model without provider goes to the CR's first inference
//     provider, else the base's first whose id is not an ${env...}
//     expression, else an error naming the choices; shields and tools alike
//     with safety and tool_runtime. A provider named by the id of a base
//     provider switched on by a variable (${env.X:+id}) is written as that
//     expression, so the server skips the resource when X is unset rather
//     than refusing to start. An embedding model needs embeddingDimension
//     (the server refuses one without). rerank models need 0.4; tools are refused
//     from 0.7, where the server registers tool groups itself and clears
//     tool_groups (the base's are dropped there).
//   - The base's resources, vector_stores defaults and
//     safety.default_shield_id that point at a provider no longer in the
//     config (replaced or disabled) are dropped: the server would refuse
//     them. A reference to ${env.X:+id} is judged by id; other ${env...}
//     references are kept. safety.default_shield_id also goes when the
//     server, with the container's variables, registers other shields but
//     not it (a base shield switched on by ${env.X:+id} with X unset): its
//     start-up check refuses that.
//   - A ${env.X} without a default (envrefs.go) that the server would
//     expand with X unset stops it at start: the config is refused at
//     spec.workload.overrides.env, naming X and where the config uses it.
//     The container's variables are the config's LLSD_* and that list (it
//     has no envFrom); what the server skips (a provider whose id resolves
//     to __disabled__, a resource whose id resolves empty, auth switched
//     off by its type) is not looked at.
//   - The distribution name is the base's (the registry is keyed by it),
//     written as distro_name from 0.5. networking is not written: the
//     Deployment passes port, TLS and workers to uvicorn, which ignores the
//     config's.
//
// The output has sorted keys, so identical input gives identical bytes and
// Hash. Errors are *Error, with the CR field (spec.providers.inference[1].endpoint),
// a v1alpha2 condition reason and a message.
//
// # Tests
//
// testdata/<case>/ holds cr.yaml, an optional base.yaml and want-config.yaml
// (with want-env.yaml) or want-error.txt (field, reason, message), compared
// as parsed YAML; go test ./pkg/configgen -run TestGolden -update rewrites
// them. FuzzGenerate drives Generate with specs the CRD admits.
package configgen
