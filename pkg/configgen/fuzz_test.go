package configgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// fuzzBases are the bases a fuzzed spec is applied to: the named
// distributions' and the direct-image bases of the golden cases.
func fuzzBases(t testing.TB) []Input {
	var ins []Input
	for _, d := range distributions {
		for _, v := range d.BaseVersions() {
			base, _ := d.BaseFor(v)
			ins = append(ins, Input{Name: "fuzz", ServerVersion: v, Base: base, BaseField: "spec.distribution.name",
				Spec: v1alpha2.LlamaStackDistributionSpec{Distribution: v1alpha2.DistributionSpec{Name: d.Name}}})
		}
	}
	for _, c := range []struct{ dir, version string }{
		{"v03-direct-vllm-url", "0.3.4"}, {"v06-direct-image-name-to-distro-name", "0.6.0"},
		{"v05-direct-disabled-safety-files", "0.5.0"}, {"err-model-default-only-conditional", "0.7.1"},
	} {
		base, err := os.ReadFile("testdata/" + c.dir + "/base.yaml")
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, Input{Name: "fuzz", ServerVersion: c.version, Base: base, BaseField: "spec.baseConfig",
			Spec: v1alpha2.LlamaStackDistributionSpec{Distribution: v1alpha2.DistributionSpec{Image: "example:" + c.version}}})
	}
	return ins
}

var (
	fuzzProviders = []string{"vllm", "openai", "ollama", "together", "milvus", "pgvector", "qdrant", "chromadb", "brave-search",
		"remote::tavily-search", "inline::llama-guard", "inline::faiss", "inline::sentence-transformers", "inline::builtin",
		"inline::meta-reference", "inline::localfs", "nvidia", "my-gateway"}
	fuzzIDs        = []string{"a", "b-1", "c_2", "d.3", "vllm", "x9", "9z", "openai", "a-b", "a_b"}
	fuzzSecretKeys = []string{"password", "token", "api_token", "x_y", "base_url"}
	fuzzSettings   = []string{`{}`, `{"max_tokens": 4096}`, `{"base_url": "http://s:1/v1"}`, `{"nested": {"a": [1, "b", null], "t": true}}`,
		`{"persistence": {"backend": "kv_default", "namespace": "n"}}`, `{"api_key": "literal"}`, `{"x": 1.5e3}`}
)

// fuzzSpec builds, from r, a spec that the CRD's schema and CEL rules admit.
// Half of the specs keep to what server v has (its APIs, and endpoint and
// apiKey only where the provider type has those fields), so that most of
// them generate rather than fail early.
func fuzzSpec(r *rand.Rand, v Version, spec *v1alpha2.LlamaStackDistributionSpec) {
	pick := func(l []string) string { return l[r.Intn(len(l))] }
	fits := r.Intn(2) == 0
	used := map[string]bool{}
	lists := map[v1alpha2.APIName][]v1alpha2.ProviderConfig{}
	for _, a := range apiNames {
		if r.Intn(4) != 0 || (fits && !hasAPI(v, a.server)) {
			continue
		}
		n := 1 + r.Intn(3)
		var list []v1alpha2.ProviderConfig
		for i := 0; i < n; i++ {
			p := v1alpha2.ProviderConfig{Provider: pick(fuzzProviders)}
			if types := providerTypes(a.server, v); fits && len(types) > 0 {
				p.Provider = pick(types)
			}
			if n > 1 || r.Intn(2) == 0 {
				p.ID = pick(fuzzIDs)
			}
			if used[ProviderID(p)] {
				continue
			}
			if r.Intn(2) == 0 && (!fits || endpointField(a.server, ProviderType(p.Provider), v) != "") {
				p.Endpoint = fmt.Sprintf("http://h%d:80/v1", r.Intn(9))
			}
			if r.Intn(3) == 0 && (!fits || keyField(a.server, ProviderType(p.Provider), v) != "") {
				p.APIKey = &v1alpha2.SecretValue{SecretKeyRef: v1alpha2.SecretKeyRef{Name: "s", Key: "k"}}
			}
			if r.Intn(3) == 0 {
				p.SecretRefs = map[string]v1alpha2.SecretValue{}
				for j := r.Intn(3); j >= 0; j-- {
					p.SecretRefs[pick(fuzzSecretKeys)] = v1alpha2.SecretValue{SecretKeyRef: v1alpha2.SecretKeyRef{Name: "s", Key: "k2"}}
				}
			}
			if r.Intn(2) == 0 && !fits {
				p.Settings = &runtime.RawExtension{Raw: []byte(pick(fuzzSettings))}
			} else if r.Intn(2) == 0 {
				p.Settings = &runtime.RawExtension{Raw: []byte(pick([]string{fuzzSettings[0], fuzzSettings[3]}))}
			}
			if fits {
				fillUserFields(a.server, v, &p)
			}
			if n > 1 && p.ID == "" {
				continue
			}
			used[ProviderID(p)] = true
			list = append(list, p)
		}
		if n > 1 && len(list) == 1 && list[0].ID == "" {
			list[0].ID = "solo"
			if used["solo"] {
				list = nil
			}
			used["solo"] = true
		}
		if len(list) > 0 {
			lists[a.crd] = list
		}
	}
	if len(lists) > 0 {
		p := &v1alpha2.ProvidersSpec{}
		p.Inference, p.Safety, p.VectorIO, p.ToolRuntime = lists["inference"], lists["safety"], lists["vectorIo"], lists["toolRuntime"]
		p.Files, p.Agents, p.Responses, p.Batches = lists["files"], lists["agents"], lists["responses"], lists["batches"]
		p.DatasetIO, p.Eval, p.Scoring, p.PostTraining = lists["datasetio"], lists["eval"], lists["scoring"], lists["postTraining"]
		p.FileProcessors, p.Telemetry = lists["fileProcessors"], lists["telemetry"]
		p.Interactions, p.Messages, p.Skills = lists["interactions"], lists["messages"], lists["skills"]
		spec.Providers = p
	}
	refTo := func(api v1alpha2.APIName) string {
		if l := lists[api]; len(l) > 0 {
			if r.Intn(3) == 0 {
				return ""
			}
			return ProviderID(l[r.Intn(len(l))])
		}
		if r.Intn(2) == 0 {
			return ""
		}
		return pick([]string{"vllm-inference", "llama-guard", "tavily-search", "fireworks", "nope", "sentence-transformers"})
	}
	res := &v1alpha2.ResourcesSpec{}
	for i := r.Intn(3); i > 0; i-- {
		m := v1alpha2.ModelConfig{Name: fmt.Sprintf("m%d", i), Provider: refTo(v1alpha2.APIInference)}
		if r.Intn(2) == 0 {
			m.ModelType = pick([]string{"llm", "embedding", "rerank"})
			if fits && !v.atLeast(4) {
				m.ModelType = "llm"
			}
		}
		if r.Intn(2) == 0 {
			n := int32(1 + r.Intn(100000))
			m.ContextLength, m.EmbeddingDimension = &n, &n
		}
		res.Models = append(res.Models, m)
	}
	for i := r.Intn(2); i > 0; i-- {
		res.Shields = append(res.Shields, v1alpha2.ShieldConfig{Name: fmt.Sprintf("s%d", i), Provider: refTo(v1alpha2.APISafety)})
	}
	for i := r.Intn(2); i > 0 && !(fits && v.atLeast(7)); i-- {
		res.Tools = append(res.Tools, v1alpha2.ToolGroupConfig{Name: fmt.Sprintf("builtin::t%d", i), Provider: refTo(v1alpha2.APIToolRuntime)})
	}
	if len(res.Models)+len(res.Shields)+len(res.Tools) > 0 {
		spec.Resources = res
	}
	if r.Intn(2) == 0 {
		st := &v1alpha2.StateStorageSpec{}
		pg := func() *v1alpha2.PostgresSpec {
			p := &v1alpha2.PostgresSpec{Host: "pg", User: "u", Port: int32(r.Intn(2) * 5433)}
			if r.Intn(2) == 0 {
				p.DB = "d"
			}
			if r.Intn(2) == 0 {
				p.PasswordSecretRef = &v1alpha2.SecretKeyRef{Name: "pg", Key: "pw"}
			}
			return p
		}
		switch r.Intn(4) {
		case 1:
			st.KV = &v1alpha2.KVStorageSpec{Type: "sqlite"}
		case 2:
			st.KV = &v1alpha2.KVStorageSpec{Type: "redis", Redis: &v1alpha2.RedisSpec{Host: "r"}}
		case 3:
			st.KV = &v1alpha2.KVStorageSpec{Type: "postgres", Postgres: pg()}
		}
		switch r.Intn(3) {
		case 1:
			st.SQL = &v1alpha2.SQLStorageSpec{Type: "sqlite"}
		case 2:
			st.SQL = &v1alpha2.SQLStorageSpec{Type: "postgres", Postgres: pg()}
		}
		spec.Storage = st
	}
	for _, a := range apiNames {
		if r.Intn(6) != 0 || len(lists[a.crd]) > 0 || (fits && !hasAPI(v, a.server)) {
			continue
		}
		if (a.crd == v1alpha2.APIInference && len(res.Models) > 0) || (a.crd == v1alpha2.APISafety && len(res.Shields) > 0) ||
			(a.crd == v1alpha2.APIToolRuntime && len(res.Tools) > 0) {
			continue
		}
		spec.Disabled = append(spec.Disabled, a.crd)
	}
	// The bases of postgres-demo and meta-reference-gpu register a model
	// ${env.INFERENCE_MODEL}, which has no default.
	if r.Intn(8) != 0 {
		spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{Env: []corev1.EnvVar{{Name: "INFERENCE_MODEL", Value: "m"}}}
	}
}

// fillUserFields gives a provider, in settings, the fields its type requires
// at v that only a user knows and that endpoint, apiKey and secretRefs do not
// set, so that a fitting spec generates.
func fillUserFields(api string, v Version, p *v1alpha2.ProviderConfig) {
	ptype := ProviderType(p.Provider)
	settings := map[string]any{}
	if p.Settings != nil {
		_ = json.Unmarshal(p.Settings.Raw, &settings)
	}
	added := false
	for _, f := range requiredAt(api, ptype, v) {
		_, secret := p.SecretRefs[f.field]
		_, set := settings[f.field]
		switch {
		case f.kind != userField || secret || set:
		case f.field == endpointField(api, ptype, v):
			p.Endpoint = "http://required:80/v1"
		case f.field == keyField(api, ptype, v):
			p.APIKey = &v1alpha2.SecretValue{SecretKeyRef: v1alpha2.SecretKeyRef{Name: "s", Key: "k"}}
		default:
			settings[f.field] = "value-of-" + f.field
			added = true
		}
	}
	if added {
		raw, _ := json.Marshal(settings)
		p.Settings = &runtime.RawExtension{Raw: raw}
	}
}

func checkGenerate(t *testing.T, in Input) {
	out, err := Generate(in)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Field == "" || e.Reason == "" {
			t.Fatalf("error without a field and reason: %v", err)
		}
		return
	}
	v, _ := ParseVersion(in.ServerVersion)
	if err := Validate(out.Config, v); err != nil {
		t.Fatalf("output fails the model: %v\n%s", err, out.Config)
	}
	if err := registryErrors(out.Config, v); err != nil {
		t.Fatalf("output is one the server refuses at start: %v\n%s", err, out.Config)
	}
	if err := requiredErrors(out.Config, v); err != nil {
		t.Fatalf("output lacks a field the server requires: %v\n%s", err, out.Config)
	}
	again, err := Generate(in)
	if err != nil || !bytes.Equal(again.Config, out.Config) || again.Hash != out.Hash {
		t.Fatalf("same input, different output (%v)", err)
	}
	for _, e := range out.Env {
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Fatalf("env %s is not from a Secret key", e.Name)
		}
		if !bytes.Contains(out.Config, []byte("${env."+e.Name+"}")) {
			t.Fatalf("env %s is not referenced by the config", e.Name)
		}
	}
}

func FuzzGenerate(f *testing.F) {
	for seed := int64(0); seed < 64; seed++ {
		f.Add(seed, uint8(seed))
	}
	bases := fuzzBases(f)
	f.Fuzz(func(t *testing.T, seed int64, which uint8) {
		in := bases[int(which)%len(bases)]
		v, _ := ParseVersion(in.ServerVersion)
		fuzzSpec(rand.New(rand.NewSource(seed)), v, &in.Spec)
		checkGenerate(t, in)
	})
}

// TestGenerateDeterministic generates from each base and a few specs many
// times: map order must never show in the output.
func TestGenerateDeterministic(t *testing.T) {
	ok := 0
	for _, base := range fuzzBases(t) {
		for seed := int64(0); seed < 8; seed++ {
			in := base
			v, _ := ParseVersion(in.ServerVersion)
			fuzzSpec(rand.New(rand.NewSource(seed)), v, &in.Spec)
			first, err := Generate(in)
			if err != nil {
				continue
			}
			ok++
			for i := 0; i < 10; i++ {
				again, err := Generate(in)
				if err != nil || !bytes.Equal(first.Config, again.Config) {
					t.Fatalf("%s seed %d: run %d differs", in.ServerVersion, seed, i)
				}
			}
		}
	}
	if ok < 10 {
		t.Fatalf("only %d generated configs: the fuzzed specs are mostly refused", ok)
	}
}
