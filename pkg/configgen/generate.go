package configgen

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// Input is what a config is generated from.
type Input struct {
	// Name is the CR's name: the distribution name of a base that has none.
	Name string
	// Spec is the CR's spec; providers, resources, storage and disabled are
	// read, and for an OGX server (0.8 and later), which its own CLI starts,
	// workload.workers (networking is not: the Deployment passes the port).
	Spec v1alpha2.LlamaStackDistributionSpec
	// ServerVersion is the llama-stack version of the image, which decides
	// the shape of the file ("0.7.1").
	ServerVersion string
	// Base is the base config.yaml: the named distribution's (Distribution.Base)
	// or the content of spec.baseConfig's ConfigMap key.
	Base []byte
	// BaseField names where Base came from, for errors about it
	// (spec.baseConfig, or spec.distribution.name for a built-in base).
	BaseField string
	// TLS, when set, is where the server container finds its certificate and
	// key: the server is told to serve HTTPS with them (server.tls_certfile and
	// tls_keyfile, which every version reads when its own CLI starts it).
	TLS *TLSFiles
}

// TLSFiles are the paths of the server's certificate and key in its container.
type TLSFiles struct {
	CertFile, KeyFile string
}

// Output is a generated config.
type Output struct {
	// Config is config.yaml: keys sorted, so the same input gives the same bytes.
	Config []byte
	// Env are the variables the server container needs, each from a Secret
	// key (never a value), sorted by name.
	Env []corev1.EnvVar
	// Hash is the SHA-256 of Config, in hex.
	Hash string
	// Providers are the providers of the config, by API (sorted) in the
	// config's order.
	Providers []ResolvedProvider
	// Distro is the config's distribution name (distro_name, or image_name
	// before 0.5), which the default sqlite paths are named after.
	Distro string
	// Warnings are what the CR says that works but should not be said so: a
	// settings key that looks like a secret, written into the ConfigMap as a
	// literal value.
	Warnings []string
	// Ignored are what the CR says that server version does not have, so it has
	// no effect there: a spec.disabled entry naming an API the version lacks.
	Ignored []string
}

// ResolvedProvider is one provider of the generated config. ID is as
// written, so it may be a ${env.X:+id} expression from the base.
type ResolvedProvider struct {
	API  string
	ID   string
	Type string
}

// api pairs a v1alpha2 API name with the server's name of it.
type api struct {
	crd    v1alpha2.APIName
	server string
}

var apiNames = []api{
	{v1alpha2.APIInference, "inference"},
	{v1alpha2.APISafety, "safety"},
	{v1alpha2.APIVectorIO, "vector_io"},
	{v1alpha2.APIToolRuntime, "tool_runtime"},
	{v1alpha2.APIFiles, "files"},
	{v1alpha2.APIAgents, "agents"},
	{v1alpha2.APIResponses, "responses"},
	{v1alpha2.APIBatches, "batches"},
	{v1alpha2.APIDatasetIO, "datasetio"},
	{v1alpha2.APIEval, "eval"},
	{v1alpha2.APIScoring, "scoring"},
	{v1alpha2.APIPostTraining, "post_training"},
	{v1alpha2.APIFileProcessors, "file_processors"},
	{v1alpha2.APITelemetry, "telemetry"},
	{v1alpha2.APIInteractions, "interactions"},
	{v1alpha2.APIMessages, "messages"},
	{v1alpha2.APISkills, "skills"},
}

func serverAPIName(n v1alpha2.APIName) string {
	for _, a := range apiNames {
		if a.crd == n {
			return a.server
		}
	}
	return ""
}

// specProviders lists the CR's provider lists in a fixed order.
// providerLists are the CR's provider lists by API (nil for one not set).
func providerLists(p *v1alpha2.ProvidersSpec) map[v1alpha2.APIName][]v1alpha2.ProviderConfig {
	return map[v1alpha2.APIName][]v1alpha2.ProviderConfig{
		v1alpha2.APIInference: p.Inference, v1alpha2.APISafety: p.Safety, v1alpha2.APIVectorIO: p.VectorIO,
		v1alpha2.APIToolRuntime: p.ToolRuntime, v1alpha2.APIFiles: p.Files, v1alpha2.APIAgents: p.Agents,
		v1alpha2.APIResponses: p.Responses, v1alpha2.APIBatches: p.Batches, v1alpha2.APIDatasetIO: p.DatasetIO,
		v1alpha2.APIEval: p.Eval, v1alpha2.APIScoring: p.Scoring, v1alpha2.APIPostTraining: p.PostTraining,
		v1alpha2.APIFileProcessors: p.FileProcessors, v1alpha2.APITelemetry: p.Telemetry,
		v1alpha2.APIInteractions: p.Interactions, v1alpha2.APIMessages: p.Messages, v1alpha2.APISkills: p.Skills,
	}
}

func specProviders(p *v1alpha2.ProvidersSpec) []struct {
	api  api
	list []v1alpha2.ProviderConfig
} {
	if p == nil {
		return nil
	}
	lists := providerLists(p)
	var out []struct {
		api  api
		list []v1alpha2.ProviderConfig
	}
	for _, a := range apiNames {
		if l := lists[a.crd]; len(l) > 0 {
			out = append(out, struct {
				api  api
				list []v1alpha2.ProviderConfig
			}{a, l})
		}
	}
	return out
}

// ProviderType is the provider_type of a CR provider: a bare name means remote::<name>.
func ProviderType(p string) string {
	if strings.Contains(p, "::") {
		return p
	}
	return "remote::" + p
}

// ProviderID is the provider_id of a CR provider: its id, else the
// provider's name without remote:: or inline::.
func ProviderID(p v1alpha2.ProviderConfig) string {
	if p.ID != "" {
		return p.ID
	}
	if _, name, ok := strings.Cut(p.Provider, "::"); ok {
		return name
	}
	return p.Provider
}

// Generate writes config.yaml for in.Spec applied to in.Base, in the shape
// of in.ServerVersion. An error is an *Error naming the CR field at fault.
func Generate(in Input) (*Output, error) {
	if in.Spec.OverrideConfig != nil {
		return nil, invalid("spec.overrideConfig", "overrideConfig is used as given: nothing is generated")
	}
	if in.ServerVersion == "" {
		return nil, &Error{Field: "spec.distribution", Reason: v1alpha2.ReasonBaseConfigRequired,
			Message: "the server version of the image is not known, so neither is the shape of its config; name a distribution (" + DistributionNames() + ") or use overrideConfig"}
	}
	v, err := ParseVersion(in.ServerVersion)
	if err != nil {
		return nil, &Error{Field: "spec.distribution", Reason: v1alpha2.ReasonServerVersionNotSupported, Message: err.Error()}
	}
	if ok, why := v.supported(); !ok {
		return nil, &Error{Field: "spec.distribution", Reason: v1alpha2.ReasonServerVersionNotSupported, Message: why}
	}
	baseField := in.BaseField
	if baseField == "" {
		baseField = "spec.baseConfig"
	}
	if len(bytes.TrimSpace(in.Base)) == 0 {
		return nil, &Error{Field: baseField, Reason: v1alpha2.ReasonBaseConfigRequired,
			Message: "no base config: set spec.baseConfig to a ConfigMap key holding a config.yaml for server " + v.String()}
	}
	g := &gen{v: v, env: newEnvSet(), spec: &in.Spec, baseField: baseField, tls: in.TLS}
	if err := g.loadBase(in.Base, in.Name, baseField); err != nil {
		return nil, err
	}
	steps := []func() error{g.checkAPIs, g.providers, g.disable, g.storage, g.pruneResources, g.resources, g.pruneReferences, g.syncAPIs, g.server, g.checkProviders, g.checkEnv}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	out, err := marshal(g.cfg)
	if err != nil {
		return nil, invalid("spec", "the generated config does not serialise: %v", err)
	}
	if err := Validate(out, v); err != nil {
		return nil, invalid("spec", "the generated config is not one server %s reads: %v", v, err)
	}
	sum := sha256.Sum256(out)
	return &Output{Config: out, Env: g.env.vars(), Hash: hex.EncodeToString(sum[:]), Providers: g.resolved(), Distro: g.distro, Warnings: g.warnings, Ignored: g.ignored}, nil
}

// gen holds one generation: the config as a generic tree (so the parts the
// model leaves free-form pass through untouched), the version and the env.
type gen struct {
	v    Version
	cfg  map[string]any
	env  *envSet
	spec *v1alpha2.LlamaStackDistributionSpec
	// distro is the config's distribution name, for default sqlite paths.
	distro string
	// disabled holds the server names of spec.disabled.
	disabled map[string]bool
	// baseField names where the base came from, for errors about it.
	baseField string
	// tls is where the server finds its certificate and key; nil without TLS.
	tls *TLSFiles
	// warnings are Output.Warnings.
	warnings []string
	// ignored are Output.Ignored.
	ignored []string
}

func decodeJSON(raw []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(out)
}

func (g *gen) loadBase(base []byte, name, field string) error {
	raw, err := yaml.YAMLToJSON(base)
	if err != nil {
		return invalid(field, "the base config does not parse: %v", err)
	}
	var cfg map[string]any
	if err := decodeJSON(raw, &cfg); err != nil || cfg == nil {
		return invalid(field, "the base config is not a YAML mapping")
	}
	// version: '2' as a string is read as 2 by the server (pydantic
	// coerces it); write the number.
	if s, ok := cfg["version"].(string); ok && s == "2" {
		cfg["version"] = json.Number("2")
	}
	// The distribution name: image_name up to 0.4, distro_name from 0.5 (the
	// server migrates image_name itself; writing distro_name is the same).
	dn, _ := cfg["distro_name"].(string)
	in, _ := cfg["image_name"].(string)
	if g.v.atLeast(5) {
		if dn == "" {
			dn = in
		}
		if dn == "" {
			dn = name
		}
		delete(cfg, "image_name")
		cfg["distro_name"] = dn
		g.distro = dn
	} else {
		if in == "" && cfg["distro_name"] == nil {
			in = name
		}
		if in != "" {
			cfg["image_name"] = in
		}
		g.distro = in
	}
	// Keys upstream's own templates write that the server does not read:
	// registered_resources.vector_dbs (an empty list in every starter config
	// from 0.3 to 0.7; RegisteredResources has no such field, and the
	// server ignores it). Dropped, so that upstream's configs serve as bases.
	if rr, ok := cfg["registered_resources"].(map[string]any); ok {
		delete(rr, "vector_dbs")
	}
	// Keys this version ignores (Ignored): the server starts with them, so they
	// are dropped, and told, rather than refused.
	for _, m := range dropIgnored(cfg, g.v) {
		g.ignored = append(g.ignored, field+": "+m)
	}
	if g.v.atLeast(7) {
		// The server clears registered_resources.tool_groups from 0.7
		// (tool groups register themselves): drop them rather than write
		// what it discards.
		if rr, ok := cfg["registered_resources"].(map[string]any); ok {
			delete(rr, "tool_groups")
		}
	}
	normal, err := marshal(cfg)
	if err != nil {
		return invalid(field, "the base config does not serialise: %v", err)
	}
	if err := Validate(normal, g.v); err != nil {
		return invalid(field, "the base config is not one server %s reads: %v", g.v, err)
	}
	g.cfg = cfg
	return nil
}

// checkAPIs refuses APIs the server version does not have, and disabling an
// API the CR configures or needs.
func (g *gen) checkAPIs() error {
	for _, p := range specProviders(g.spec.Providers) {
		if !hasAPI(g.v, p.api.server) {
			return invalid("spec.providers."+string(p.api.crd), "server %s has no %s API%s", g.v, p.api.server, renameHint(p.api.server, g.v))
		}
	}
	g.disabled = map[string]bool{}
	configured := map[string]bool{}
	for _, p := range specProviders(g.spec.Providers) {
		configured[p.api.server] = true
	}
	for i, d := range g.spec.Disabled {
		field := fmt.Sprintf("spec.disabled[%d]", i)
		s := serverAPIName(d)
		if s == "" || !hasAPI(g.v, s) {
			if err := g.disabledAbsent(field, d, s); err != nil {
				return err
			}
			continue
		}
		if configured[s] {
			return invalid(field, "%s is disabled and also has providers in spec.providers.%s", d, d)
		}
		g.disabled[s] = true
	}
	if r := g.spec.Resources; r != nil {
		needs := []struct {
			field, api string
			n          int
		}{{"spec.resources.models", "inference", len(r.Models)}, {"spec.resources.shields", "safety", len(r.Shields)}, {"spec.resources.tools", "tool_runtime", len(r.Tools)}}
		for _, n := range needs {
			if n.n > 0 && g.disabled[n.api] {
				return invalid(n.field, "these resources need the %s API, which spec.disabled removes", n.api)
			}
		}
	}
	return nil
}

// disabledAbsent judges a spec.disabled entry naming an API server version g.v does
// not have. The API is absent, which is what the entry asks: a warning says so, so that
// a CR written for another version keeps working (disabled: [eval] from 0.7 on 1.x). An
// API the version has under another name (agents and responses around 0.7) or built in
// (telemetry at 0.3) is refused: the entry would not turn it off.
func (g *gen) disabledAbsent(field string, d v1alpha2.APIName, server string) error {
	renamed := (server == "agents" && g.v.atLeast(7)) || (server == "responses" && !g.v.atLeast(7)) ||
		(server == "telemetry" && !g.v.atLeast(4))
	if server == "" || renamed {
		return invalid(field, "server %s has no %s API%s", g.v, d, renameHint(server, g.v))
	}
	g.ignored = append(g.ignored, fmt.Sprintf("%s: server %s has no %s API%s, so there is nothing to disable; the entry is ignored on this version",
		field, g.v, d, renameHint(server, g.v)))
	return nil
}

func renameHint(server string, v Version) string {
	switch {
	case (server == "eval" || server == "datasetio" || server == "scoring") && v.OGX():
		return " (removed in 0.8; OGX has no evaluation APIs)"
	case server == "safety" && v.from(1, 0):
		return " (removed in 1.0 with shields: guardrails are set on the responses provider, its moderation_endpoint)"
	case server == "agents" && v.atLeast(7):
		return " (renamed responses in 0.7)"
	case server == "responses" && !v.atLeast(7):
		return " (before 0.7 it is agents)"
	case server == "telemetry" && v.atLeast(4):
		return " (removed in 0.4)"
	case server == "telemetry":
		return " that takes providers (0.3 builds telemetry in: set telemetry.enabled in the base config)"
	case server == "post_training" && v.atLeast(7):
		return " (removed in 0.7)"
	case server == "file_processors" && !v.atLeast(4):
		return " (added in 0.4)"
	case (server == "interactions" || server == "messages") && !v.OGX():
		return " (added in 0.8, the first OGX release)"
	case server == "skills" && !v.from(1, 1):
		return " (added in 1.1)"
	}
	return ""
}

func (g *gen) providersMap() map[string]any {
	p, ok := g.cfg["providers"].(map[string]any)
	if !ok {
		p = map[string]any{}
		g.cfg["providers"] = p
	}
	return p
}

// providers replaces, per API, the base's providers with the CR's.
func (g *gen) providers() error {
	// An empty list is no way to say anything: it would keep the base's providers
	// (a list replaces them, and none is no replacement). The CRD refuses one; an
	// object stored before that rule is refused here.
	if p := g.spec.Providers; p != nil {
		lists := providerLists(p)
		for _, a := range apiNames {
			if l := lists[a.crd]; l != nil && len(l) == 0 {
				return invalid("spec.providers."+string(a.crd), "an empty list would keep the base config's %s providers: leave the field out to keep them, or list %s in spec.disabled to turn the API off", a.server, a.crd)
			}
		}
	}
	seen := map[string]string{}
	for _, p := range specProviders(g.spec.Providers) {
		var list []any
		for i, pc := range p.list {
			field := fmt.Sprintf("spec.providers.%s[%d]", p.api.crd, i)
			id := ProviderID(pc)
			if prev, dup := seen[id]; dup {
				return invalid(field+".id", "provider id %q is also the id of %s: ids are unique across APIs", id, prev)
			}
			seen[id] = field
			entry, err := g.provider(p.api.server, field, id, pc, len(p.list) > 1)
			if err != nil {
				return err
			}
			list = append(list, entry)
		}
		g.providersMap()[p.api.server] = list
	}
	return nil
}

// provider writes one provider of the CR; shared tells that its list has
// others, whose stores it must not share.
func (g *gen) provider(apiName, field, id string, pc v1alpha2.ProviderConfig, shared bool) (map[string]any, error) {
	ptype := ProviderType(pc.Provider)
	if _, ok := lookupProvider(apiName, ptype, g.v); !ok && !g.externalProviders() {
		return nil, invalid(field+".provider", "server %s has no %s provider of type %s%s (it would refuse to start); its types are: %s",
			g.v, apiName, ptype, typeHistory(apiName, ptype, g.v), strings.Join(providerTypes(apiName, g.v), ", "))
	}
	cfg := map[string]any{}
	if pc.Settings != nil && len(pc.Settings.Raw) > 0 {
		if err := decodeJSON(pc.Settings.Raw, &cfg); err != nil || cfg == nil {
			return nil, invalid(field+".settings", "settings must be a mapping of config fields")
		}
		g.warnSecretSettings(field+".settings", cfg)
	}
	set := func(f, key, value string) error {
		if _, taken := cfg[key]; taken {
			return invalid(f, "writes the config field %s, which settings.%s (or another field of this provider) sets too: set it once", key, key)
		}
		cfg[key] = value
		return nil
	}
	if pc.Endpoint != "" {
		key := endpointField(apiName, ptype, g.v)
		if key == "" {
			return nil, invalid(field+".endpoint", "the controller knows no endpoint field of %s at server %s: set the field by its name in settings", ptype, g.v)
		}
		if err := set(field+".endpoint", key, pc.Endpoint); err != nil {
			return nil, err
		}
	}
	if pc.APIKey != nil {
		key := keyField(apiName, ptype, g.v)
		if key == "" {
			return nil, invalid(field+".apiKey", "the controller knows no API key field of %s at server %s: name the field in secretRefs instead", ptype, g.v)
		}
		ref, err := g.env.add(EnvName(id, "api_key"), field+".apiKey", pc.APIKey.SecretKeyRef.Name, pc.APIKey.SecretKeyRef.Key)
		if err != nil {
			return nil, err
		}
		if err := set(field+".apiKey", key, ref); err != nil {
			return nil, err
		}
	}
	for _, k := range sortedKeys(pc.SecretRefs) {
		f := field + ".secretRefs." + k
		s := pc.SecretRefs[k]
		ref, err := g.env.add(EnvName(id, k), f, s.SecretKeyRef.Name, s.SecretKeyRef.Key)
		if err != nil {
			return nil, err
		}
		if err := set(f, k, ref); err != nil {
			return nil, err
		}
	}
	// Every vector_io provider keeps its state in a kv backend; the remote
	// milvus and qdrant ones refuse to start without it.
	if apiName == "vector_io" {
		if _, ok := cfg["persistence"]; !ok {
			cfg["persistence"] = map[string]any{"backend": g.kvBackendName(), "namespace": "vector_io::" + id}
		}
	}
	// The rest of what the type's config class requires at this version
	// (required.go): the stores and paths are written, the rest is the user's.
	g.fillRequired(apiName, ptype, cfg, storeNames{kv: g.kvBackendName(), sql: g.sqlBackendName(), id: id, shared: shared})
	if miss := checkRequired(apiName, ptype, cfg, g.v); len(miss) > 0 {
		return nil, g.missingError(apiName, ptype, field, miss[0])
	}
	entry := map[string]any{"provider_id": id, "provider_type": ptype}
	if len(cfg) > 0 {
		entry["config"] = cfg
	}
	return entry, nil
}

// missingError is the error for a CR provider whose config lacks a field
// its type requires at this version, or writes it in the wrong shape. It
// names the CR field that sets it: endpoint or apiKey when those go to it,
// else settings.
func (g *gen) missingError(apiName, ptype, field string, m missingField) *Error {
	if m.why != "" {
		return invalid(field+".settings", "the %s provider %s at server %s: %s %s (the server refuses to start on it)", apiName, ptype, g.v, m.field, m.why)
	}
	switch m.field {
	case endpointField(apiName, ptype, g.v):
		return invalid(field+".endpoint", "the %s provider %s requires %s at server %s, with no default: set endpoint", apiName, ptype, m.field, g.v)
	case keyField(apiName, ptype, g.v):
		return invalid(field+".apiKey", "the %s provider %s requires %s at server %s, with no default: set apiKey", apiName, ptype, m.field, g.v)
	}
	return invalid(field+".settings", "the %s provider %s requires %s at server %s, with no default: set it in settings, or in secretRefs when it is a secret", apiName, ptype, m.field, g.v)
}

// externalProviders reports whether the base loads provider types from
// external_providers_dir, which the controller cannot see.
func (g *gen) externalProviders() bool {
	d, ok := g.cfg["external_providers_dir"].(string)
	return ok && d != ""
}

// crdAPIName is the v1alpha2 name of a server API.
func crdAPIName(server string) v1alpha2.APIName {
	for _, a := range apiNames {
		if a.server == server {
			return a.crd
		}
	}
	return v1alpha2.APIName(server)
}

// checkProviders refuses a config the server would refuse at start: a
// provider type it does not have (the CR's are refused where they are
// written, so this is the base's) or a provider whose hard dependency the
// config does not serve. The error names what the user can change: the
// spec.disabled entry that removed the dependency, else the CR's provider
// that needs it, else the base.
func (g *gen) checkProviders() error {
	unknown, deps := checkRegistry(g.cfg, g.v)
	if len(unknown) > 0 {
		u := unknown[0]
		return invalid(g.baseField, "the base's %s provider type %s%s is not one server %s has, so it would refuse to start: replace the %s providers in spec.providers.%s",
			u.api, u.ptype, typeHistory(u.api, u.ptype, g.v), g.v, u.api, crdAPIName(u.api))
	}
	if req := checkRequiredAll(g.cfg, g.v); len(req) > 0 {
		// The CR's providers are checked where they are written: this is the base's.
		r := req[0]
		return invalid(g.baseField, "the base's %s provider %s (%s) is not one server %s accepts: %s, so it would refuse to start: fix the base, or replace the %s providers in spec.providers.%s",
			r.api, r.id, r.ptype, g.v, r.miss[0], r.api, crdAPIName(r.api))
	}
	for _, p := range checkToolGroups(g.cfg, g.v) {
		field := g.baseField
		if g.spec.Resources != nil {
			for i, t := range g.spec.Resources.Tools {
				if t.Name == p.toolgroup {
					field = fmt.Sprintf("spec.resources.tools[%d]", i)
				}
			}
		}
		return invalid(field, "%s: server %s would stop at start-up; the CR has no field for an MCP endpoint: use overrideConfig with mcp_endpoint set, or a server from 0.7, which registers no tool groups at start-up", p, g.v)
	}
	if len(deps) == 0 {
		return nil
	}
	for i, d := range g.spec.Disabled {
		s := serverAPIName(d)
		var needers []string
		for _, p := range deps {
			if n := fmt.Sprintf("providers.%s %s (%s)", p.api, p.id, p.ptype); p.provides == s && !slices.Contains(needers, n) {
				needers = append(needers, n)
			}
		}
		if len(needers) > 0 {
			return invalid(fmt.Sprintf("spec.disabled[%d]", i), "%s is needed by %s, which the config keeps: the server does not start without it; disable those APIs too, or replace their providers in spec.providers",
				d, strings.Join(needers, ", "))
		}
	}
	p := deps[0]
	crd := crdAPIName(p.api)
	if g.spec.Providers != nil {
		for _, sp := range specProviders(g.spec.Providers) {
			if sp.api.server == p.api && p.index < len(sp.list) {
				return invalid(fmt.Sprintf("spec.providers.%s[%d].provider", crd, p.index), "%s needs the %s API, which the config does not serve: add a provider to spec.providers.%s",
					p.ptype, p.provides, crdAPIName(p.provides))
			}
		}
	}
	return invalid(g.baseField, "the base's %s provider %s (%s) needs the %s API, which the config does not serve: add a provider to spec.providers.%s, or disable %s",
		p.api, p.id, p.ptype, p.provides, crdAPIName(p.provides), crd)
}

// disable removes the disabled APIs' providers.
func (g *gen) disable() error {
	prov := g.providersMap()
	for a := range g.disabled {
		delete(prov, a)
	}
	return nil
}

// syncAPIs lists in apis every API that has providers and none disabled:
// the base's order, then the APIs the CR adds, sorted.
func (g *gen) syncAPIs() error {
	prov := g.providersMap()
	var apis []any
	listed := map[string]bool{}
	if l, ok := g.cfg["apis"].([]any); ok {
		for _, a := range l {
			s, _ := a.(string)
			if g.disabled[s] || listed[s] {
				continue
			}
			listed[s] = true
			apis = append(apis, s)
		}
	}
	for _, a := range sortedKeys(prov) {
		if !listed[a] {
			apis = append(apis, a)
		}
	}
	if len(apis) == 0 && len(g.disabled) > 0 {
		// The server refuses apis: null, and with an empty list would serve nothing.
		return invalid("spec.disabled", "disables every API the config has providers for: server %s would serve nothing; keep one enabled (to run no server, set spec.workload.replicas to 0)", g.v)
	}
	if apis == nil {
		apis = []any{}
	}
	g.cfg["apis"] = apis
	return nil
}

// server writes what the server section needs at this version.
//
// With TLS the server is told where its certificate and key are
// (tls_certfile, tls_keyfile: read by every version's CLI, which is how an
// OGX server and a llama-stack image's own entrypoint start; the controller's
// script for llama-stack 0.3 to 0.7 passes them to uvicorn itself). A
// tls_cafile of the base, which would make the server ask every client for a
// certificate, is dropped with them: the probes present none.
//
// Without TLS, from 1.2 an OGX server's CLI refuses to start unless told it
// runs without (strict TLS, #5603; the images from 1.2.1 pass --insecure
// themselves, 1.2.0 does not), so the config says insecure explicitly. A base
// that sets insecure keeps its value.
//
// An OGX server starts through its own CLI (ogx stack run), which takes the
// number of workers from server.workers (OGX_WORKERS only in later
// releases): spec.workload.workers is written there. A llama-stack server is
// started by the controller's script, which passes them itself.
func (g *gen) server() error {
	srv, ok := g.cfg["server"].(map[string]any)
	if !ok {
		srv = map[string]any{}
	}
	if t := g.tls; t != nil {
		srv["tls_certfile"], srv["tls_keyfile"] = t.CertFile, t.KeyFile
		delete(srv, "tls_cafile")
	}
	if g.v.OGX() {
		if w := g.spec.Workload.Workers; w != nil && *w > 0 {
			srv["workers"] = *w
		}
		if g.v.from(1, 2) {
			if _, set := srv["insecure"]; !set && srv["tls_certfile"] == nil {
				srv["insecure"] = true
			}
		}
	}
	if len(srv) > 0 {
		g.cfg["server"] = srv
	}
	return nil
}

func (g *gen) resolved() []ResolvedProvider {
	var out []ResolvedProvider
	prov := g.providersMap()
	for _, a := range sortedKeys(prov) {
		l, _ := prov[a].([]any)
		for _, e := range l {
			m, _ := e.(map[string]any)
			id, _ := m["provider_id"].(string)
			t, _ := m["provider_type"].(string)
			out = append(out, ResolvedProvider{API: a, ID: id, Type: t})
		}
	}
	return out
}

// providerIDs lists the provider_ids of one API, as written.
func (g *gen) providerIDs(apiName string) []string {
	l, _ := g.providersMap()[apiName].([]any)
	var ids []string
	for _, e := range l {
		m, _ := e.(map[string]any)
		if id, ok := m["provider_id"].(string); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

var conditionalID = regexp.MustCompile(`^\$\{env\.[A-Z0-9_]+:\+([^}]*)\}$`)

// hasProvider reports whether a reference to a provider id can resolve: a
// literal must be some provider's id, or the id a ${env.X:+id} provider
// takes when X is set; a reference that is itself ${env.X:+id} is judged by
// its id; any other ${env...} reference cannot be judged and is kept.
func (g *gen) hasProvider(apiName, ref string) bool {
	if ref == "all" && g.v.OGX() {
		// provider_id: all registers the model with every inference
		// provider that has it (0.8, #5471).
		return len(g.providerIDs(apiName)) > 0
	}
	if m := conditionalID.FindStringSubmatch(ref); m != nil {
		ref = m[1]
	} else if strings.Contains(ref, "${") {
		return true
	}
	for _, id := range g.providerIDs(apiName) {
		if id == ref {
			return true
		}
		if m := conditionalID.FindStringSubmatch(id); m != nil && m[1] == ref {
			return true
		}
	}
	return false
}

// resourceAPIs maps each registered_resources list to the API serving it.
var resourceAPIs = []struct{ list, api string }{
	{"models", "inference"}, {"shields", "safety"}, {"tool_groups", "tool_runtime"},
	{"vector_stores", "vector_io"}, {"datasets", "datasetio"}, {"scoring_fns", "scoring"},
	{"benchmarks", "eval"},
}

// pruneResources drops the base's resources whose API is gone or whose
// provider is no longer in the config (replaced by the CR's, or disabled).
func (g *gen) pruneResources() error {
	rr, ok := g.cfg["registered_resources"].(map[string]any)
	if !ok {
		return nil
	}
	prov := g.providersMap()
	for _, r := range resourceAPIs {
		l, ok := rr[r.list].([]any)
		if !ok {
			continue
		}
		if _, live := prov[r.api]; !live {
			delete(rr, r.list)
			continue
		}
		replaced := false
		for _, p := range specProviders(g.spec.Providers) {
			replaced = replaced || p.api.server == r.api
		}
		var kept []any
		for _, e := range l {
			m, _ := e.(map[string]any)
			if pid, ok := m["provider_id"].(string); ok && !g.hasProvider(r.api, pid) {
				continue
			}
			if m["provider_id"] == "all" && replaced {
				// An alias (provider_id: all, 0.8+) of the base names a model
				// of the base's providers; the CR's providers replaced them.
				continue
			}
			kept = append(kept, e)
		}
		if len(kept) == 0 {
			delete(rr, r.list)
		} else {
			rr[r.list] = kept
		}
	}
	return nil
}

// defaultProvider picks the provider of a resource that names none: the
// CR's first provider of the API, else the base's first whose id is not an
// ${env...} expression.
func (g *gen) defaultProvider(field, apiName string, crd []v1alpha2.ProviderConfig) (string, error) {
	if len(crd) > 0 {
		return ProviderID(crd[0]), nil
	}
	ids := g.providerIDs(apiName)
	for _, id := range ids {
		if !strings.Contains(id, "${") {
			return id, nil
		}
	}
	if len(ids) == 0 {
		return "", invalid(field, "names no provider and the config has no %s provider: add one to spec.providers", apiName)
	}
	return "", invalid(field, "names no provider, and every %s provider of the base is switched on by a variable (%s): name one in provider, or add one to spec.providers", apiName, strings.Join(ids, ", "))
}

func (g *gen) explicitProvider(field, apiName, id string) error {
	if g.hasProvider(apiName, id) && !strings.Contains(id, "${") {
		return nil
	}
	return invalid(field, "no %s provider has the id %q; the config's are: %s", apiName, id, strings.Join(g.providerIDs(apiName), ", "))
}

// providerRef is what a resource naming provider id is written with: the
// id itself when a provider has it, else the ${env.X:+id} expression of the
// provider switched on by X. The server skips a resource whose provider_id
// resolves empty (register_resources in core/stack.py), so the resource
// follows its provider instead of stopping the server when X is unset.
func (g *gen) providerRef(apiName, id string) string {
	ids := g.providerIDs(apiName)
	for _, p := range ids {
		if p == id {
			return id
		}
	}
	for _, p := range ids {
		if m := conditionalID.FindStringSubmatch(p); m != nil && m[1] == id {
			return p
		}
	}
	return id
}

// resources registers the CR's models, shields and tools, replacing a base
// entry with the same id.
func (g *gen) resources() error {
	r := g.spec.Resources
	if r == nil {
		return nil
	}
	var p v1alpha2.ProvidersSpec
	if g.spec.Providers != nil {
		p = *g.spec.Providers
	}
	rr, ok := g.cfg["registered_resources"].(map[string]any)
	if !ok {
		rr = map[string]any{}
	}
	pick := func(field, apiName, named string, crd []v1alpha2.ProviderConfig) (string, error) {
		if named == "" {
			return g.defaultProvider(field, apiName, crd)
		}
		if err := g.explicitProvider(field+".provider", apiName, named); err != nil {
			return "", err
		}
		return g.providerRef(apiName, named), nil
	}
	for i, m := range r.Models {
		field := fmt.Sprintf("spec.resources.models[%d]", i)
		pid, err := pick(field, "inference", m.Provider, p.Inference)
		if err != nil {
			return err
		}
		e, err := g.modelEntry(field, m, pid)
		if err != nil {
			return err
		}
		upsert(rr, "models", "model_id", m.Name, e)
	}
	if len(r.Shields) > 0 && g.v.from(1, 0) {
		return invalid("spec.resources.shields", "server %s has no shields (removed in 1.0 with the safety API; guardrails are set on the responses provider, its moderation_endpoint): remove shields", g.v)
	}
	for i, s := range r.Shields {
		field := fmt.Sprintf("spec.resources.shields[%d]", i)
		pid, err := pick(field, "safety", s.Provider, p.Safety)
		if err != nil {
			return err
		}
		e := map[string]any{"shield_id": s.Name, "provider_id": pid}
		if s.ProviderShieldID != "" {
			e["provider_shield_id"] = s.ProviderShieldID
		}
		upsert(rr, "shields", "shield_id", s.Name, e)
	}
	if len(r.Tools) > 0 && g.v.atLeast(7) {
		return invalid("spec.resources.tools", "server %s registers tool groups itself from its tool_runtime providers (tool_groups is cleared from 0.7): remove tools", g.v)
	}
	for i, t := range r.Tools {
		field := fmt.Sprintf("spec.resources.tools[%d]", i)
		pid, err := pick(field, "tool_runtime", t.Provider, p.ToolRuntime)
		if err != nil {
			return err
		}
		upsert(rr, "tool_groups", "toolgroup_id", t.Name, map[string]any{"toolgroup_id": t.Name, "provider_id": pid})
	}
	if len(rr) > 0 {
		g.cfg["registered_resources"] = rr
	}
	return nil
}

// modelEntry is the registered_resources.models entry of m, served by provider pid;
// field names m in the spec.
func (g *gen) modelEntry(field string, m v1alpha2.ModelConfig, pid string) (map[string]any, error) {
	if m.ModelType == "embedding" && m.EmbeddingDimension == nil {
		// routing_tables/models.py refuses it, and the server stops.
		return nil, invalid(field+".embeddingDimension", "an embedding model needs its embedding dimension: the server refuses to start without it")
	}
	e := map[string]any{"model_id": m.Name, "provider_id": pid, "model_type": "llm"}
	if m.ModelType != "" {
		if m.ModelType == "rerank" && !g.v.atLeast(4) {
			return nil, invalid(field+".modelType", "server %s has no rerank models (added in 0.4)", g.v)
		}
		e["model_type"] = m.ModelType
	}
	if m.ProviderModelID != "" {
		e["provider_model_id"] = m.ProviderModelID
	}
	md := map[string]any{}
	if m.ContextLength != nil {
		md["context_length"] = *m.ContextLength
	}
	if m.EmbeddingDimension != nil {
		md["embedding_dimension"] = *m.EmbeddingDimension
	}
	if len(md) > 0 {
		e["metadata"] = md
	}
	return e, nil
}

// upsert puts e in rr[list], in place of the entry whose key is id, or last.
func upsert(rr map[string]any, list, key, id string, e map[string]any) {
	l, _ := rr[list].([]any)
	for i, x := range l {
		if m, ok := x.(map[string]any); ok && m[key] == id {
			l[i] = e
			rr[list] = l
			return
		}
	}
	rr[list] = append(l, e)
}

// pruneReferences drops the settings that point at a provider or shield no
// longer in the config: vector_stores defaults and safety.default_shield_id
// (also when the server would not register its shield: defaultShieldHolds).
func (g *gen) pruneReferences() error {
	prov := g.providersMap()
	if vs, ok := g.cfg["vector_stores"].(map[string]any); ok {
		if _, live := prov["vector_io"]; !live {
			delete(g.cfg, "vector_stores")
		} else {
			if id, ok := vs["default_provider_id"].(string); ok && !g.hasProvider("vector_io", id) {
				delete(vs, "default_provider_id")
			}
			for _, k := range []string{"default_embedding_model", "default_reranker_model"} {
				if m, ok := vs[k].(map[string]any); ok {
					if id, ok := m["provider_id"].(string); ok && !g.hasProvider("inference", id) {
						delete(vs, k)
					}
				}
			}
			for _, k := range []string{"rewrite_query_params", "contextual_retrieval_params"} {
				if p, ok := vs[k].(map[string]any); ok {
					if m, ok := p["model"].(map[string]any); ok {
						if id, ok := m["provider_id"].(string); ok && !g.hasProvider("inference", id) {
							delete(p, "model")
						}
					}
				}
			}
		}
	}
	if s, ok := g.cfg["safety"].(map[string]any); ok {
		if _, live := prov["safety"]; !live {
			delete(g.cfg, "safety")
		} else if id, ok := s["default_shield_id"].(string); ok && !g.defaultShieldHolds(id) {
			delete(s, "default_shield_id")
		}
	}
	// A section left empty says nothing the server's defaults do not.
	for _, k := range []string{"registered_resources", "safety", "vector_stores"} {
		if m, ok := g.cfg[k].(map[string]any); ok && len(m) == 0 {
			delete(g.cfg, k)
		}
	}
	return nil
}

// defaultShieldHolds reports whether safety.default_shield_id id can stay:
// its shield is listed, and the server's start-up check
// (validate_safety_config) passes, which wants it among the shields the
// server registers whenever it registers any. With the container's
// variables (podEnv), a base shield switched on by ${env.X:+id} is not
// registered while X is unset, and a shield of the CR then stops the
// server; a default that no shield registered needs is kept, as the base has it.
func (g *gen) defaultShieldHolds(id string) bool {
	rr, _ := g.cfg["registered_resources"].(map[string]any)
	l, _ := rr["shields"].([]any)
	env := g.podEnv()
	listed, registered, others := false, false, false
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if m["shield_id"] == id {
			listed = true
			registered = registered || shieldRegistered(m, env)
		} else {
			others = others || shieldRegistered(m, env)
		}
	}
	return listed && (registered || !others)
}

// shieldRegistered reports whether the server registers a shield entry at
// start: not when its provider_id resolves empty or to __disabled__
// (register_resources), nor when its shield_id resolves empty (the entry
// is skipped). A value from a Secret is taken as one that registers.
func shieldRegistered(m map[string]any, env map[string]podVar) bool {
	pid, _ := m["provider_id"].(string)
	if p, known, missing := expand(pid, env); missing == "" && known && (p == "" || p == "__disabled__") {
		return false
	}
	sid, _ := m["shield_id"].(string)
	return !resolvesEmpty(sid, env)
}

// marshal writes the tree as YAML with sorted keys.
func marshal(cfg map[string]any) ([]byte, error) {
	j, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}

// secretLikeKey matches config field names that hold credentials.
var secretLikeKey = regexp.MustCompile(`(?i)(^|[_-])(api_?key|token|password|passwd|secret|credentials?|private_key|access_key)($|[_-])`)

// warnSecretSettings notes every key of settings (at any depth) whose name says it
// holds a credential and whose value is a literal string: it ends up in a ConfigMap,
// readable by whoever reads ConfigMaps. A ${env.X} reference is not a literal.
func (g *gen) warnSecretSettings(field string, m map[string]any) {
	for _, k := range sortedKeys(m) {
		switch v := m[k].(type) {
		case map[string]any:
			g.warnSecretSettings(field+"."+k, v)
		case string:
			if v != "" && secretLikeKey.MatchString(k) && !strings.Contains(v, "${env.") {
				g.warnings = append(g.warnings, fmt.Sprintf(
					"%s.%s looks like a credential and is written into the generated ConfigMap as given, readable by whoever reads ConfigMaps; take it from a Secret with the provider's apiKey or secretRefs",
					field, k))
			}
		}
	}
}
