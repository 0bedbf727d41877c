package v1alpha1

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// filler fills objects with random values that survive JSON, as objects the API
// server stores do: raw JSON fields hold JSON, quantities are numbers.
func filler(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.3).NumElements(0, 2).MaxDepth(12).Funcs(
		func(r *runtime.RawExtension, c randfill.Continue) {
			if c.Bool() {
				r.Raw = nil
				return
			}
			r.Raw = []byte(fmt.Sprintf(`{"k%d":%q,"n":%d}`, c.Intn(5), c.String(6), c.Intn(100)))
		},
		func(f *metav1.FieldsV1, c randfill.Continue) { f.Raw = []byte(`{"f:metadata":{}}`) },
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<40), resource.BinarySI)
		},
		// Blocks written empty are where the two versions differ most.
		sometimesEmpty[NetworkSpec](), sometimesEmpty[IngressSpec](), sometimesEmpty[AllowedFromSpec](),
		sometimesEmpty[PodOverrides](), sometimesEmpty[ContainerSpec](), sometimesEmpty[TLSConfig](),
		sometimesEmpty[CABundleConfig](), sometimesEmpty[StorageSpec](),
		sometimesEmpty[v1alpha2.NetworkingSpec](), sometimesEmpty[v1alpha2.ExposeSpec](),
		sometimesEmpty[v1alpha2.TLSSpec](), sometimesEmpty[v1alpha2.WorkloadSpec](),
		sometimesEmpty[v1alpha2.WorkloadOverrides](), sometimesEmpty[v1alpha2.AllowedFromSpec](),
		sometimesEmpty[v1alpha2.ProvidersSpec](), sometimesEmpty[v1alpha2.ResourcesSpec](),
		sometimesEmpty[v1alpha2.StateStorageSpec](),
	)
}

// sometimesEmpty fills a T, or leaves it empty one time in three.
func sometimesEmpty[T any]() func(*T, randfill.Continue) {
	return func(v *T, c randfill.Continue) {
		if c.Intn(3) == 0 {
			var zero T
			*v = zero
			return
		}
		c.FillNoCustom(v)
	}
}

// viaJSON stores obj as the API server does, and reads it back.
func viaJSON[T any](t *testing.T, obj *T) *T {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	out := new(T)
	require.NoError(t, json.Unmarshal(raw, out))
	return out
}

// apiServerDefaults fills in l the default of v1alpha1's schema that conversion maps
// back to unset, the container's name, as the API server does in every v1alpha1 write
// before conversion sees it.
func apiServerDefaults(l *LlamaStackDistribution) *LlamaStackDistribution {
	if l.Spec.Server.ContainerSpec.Name == "" {
		l.Spec.Server.ContainerSpec.Name = DefaultContainerName
	}
	return l
}

func assertSame(t *testing.T, want, got any, format string, args ...any) {
	t.Helper()
	if !equality.Semantic.DeepEqual(want, got) {
		t.Fatalf("%s: (-want +got)\n%s", fmt.Sprintf(format, args...), cmp.Diff(want, got))
	}
}

const fuzzRounds = 3000

// TestRoundTripFromV1alpha1: a v1alpha1 object stored as v1alpha2 and read back as
// v1alpha1 is the object written, whatever its fields.
func TestRoundTripFromV1alpha1(t *testing.T) {
	for i := range fuzzRounds {
		in := &LlamaStackDistribution{}
		filler(int64(i)).Fill(in)
		in.TypeMeta = metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: "LlamaStackDistribution"}
		delete(in.Annotations, ConversionDataAnnotation)
		in = viaJSON(t, apiServerDefaults(in))
		orig := in.DeepCopy()

		hub := &v1alpha2.LlamaStackDistribution{}
		require.NoError(t, in.ConvertTo(hub))
		assertSame(t, orig, in, "seed %d: ConvertTo changed its source", i)
		hub = viaJSON(t, hub)
		out := &LlamaStackDistribution{}
		require.NoError(t, out.ConvertFrom(hub))
		assertSame(t, orig, viaJSON(t, out), "seed %d: v1alpha1 -> v1alpha2 -> v1alpha1", i)
	}
}

// TestRoundTripFromV1alpha2: a v1alpha2 object read and written back unchanged by a
// v1alpha1 client is the object it was, whatever its fields.
func TestRoundTripFromV1alpha2(t *testing.T) {
	for i := range fuzzRounds {
		in := &v1alpha2.LlamaStackDistribution{}
		filler(int64(i)).Fill(in)
		in.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha2.SchemeGroupVersion.String(), Kind: "LlamaStackDistribution"}
		delete(in.Annotations, ConversionDataAnnotation)
		in = viaJSON(t, in)
		orig := in.DeepCopy()

		spoke := &LlamaStackDistribution{}
		require.NoError(t, spoke.ConvertFrom(in))
		assertSame(t, orig, in, "seed %d: ConvertFrom changed its source", i)
		spoke = viaJSON(t, spoke)
		out := &v1alpha2.LlamaStackDistribution{}
		require.NoError(t, spoke.ConvertTo(out))
		assertSame(t, orig, viaJSON(t, out), "seed %d: v1alpha2 -> v1alpha1 -> v1alpha2", i)
	}
}

// hubWithEverything has a field of each kind v1alpha1 lacks, and fields of both.
func hubWithEverything() *v1alpha2.LlamaStackDistribution {
	return &v1alpha2.LlamaStackDistribution{
		TypeMeta:   metav1.TypeMeta{APIVersion: "llamastack.io/v1alpha2", Kind: "LlamaStackDistribution"},
		ObjectMeta: metav1.ObjectMeta{Name: "llsd", Namespace: "ns", Annotations: map[string]string{"team": "a"}},
		Spec: v1alpha2.LlamaStackDistributionSpec{
			Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			BaseConfig:   &v1alpha2.BaseConfigSpec{ConfigMapName: "base", Key: "config.yaml"},
			Providers: &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{
				ID: "vllm", Provider: "vllm", Endpoint: "http://vllm:8000/v1",
				APIKey:   &v1alpha2.SecretValue{SecretKeyRef: v1alpha2.SecretKeyRef{Name: "s", Key: "k"}},
				Settings: &runtime.RawExtension{Raw: []byte(`{"max_tokens":4096}`)},
			}}},
			Resources: &v1alpha2.ResourcesSpec{Models: []v1alpha2.ModelConfig{{Name: "m", Provider: "vllm"}}},
			Storage:   &v1alpha2.StateStorageSpec{KV: &v1alpha2.KVStorageSpec{Type: "redis", Redis: &v1alpha2.RedisSpec{Host: "redis", Port: 6379}}},
			Disabled:  []v1alpha2.APIName{v1alpha2.APIPostTraining},
			Networking: &v1alpha2.NetworkingSpec{
				Port:   8321,
				TLS:    &v1alpha2.TLSSpec{Enabled: true, SecretName: "cert"},
				Expose: &v1alpha2.ExposeSpec{Enabled: ptr.To(true), Hostname: "llama.example.com"},
			},
			Workload: v1alpha2.WorkloadSpec{
				Replicas:  ptr.To[int32](2),
				Overrides: &v1alpha2.WorkloadOverrides{Env: []corev1.EnvVar{{Name: "A", Value: "1"}}},
			},
		},
		Status: v1alpha2.LlamaStackDistributionStatus{
			Phase:                v1alpha2.PhaseReady,
			ResolvedDistribution: &v1alpha2.ResolvedDistributionStatus{Image: "img:1", ServerVersion: "0.3.4", ConfigSource: "distribution", ConfigHash: "abc"},
		},
	}
}

// TestV1alpha1EditsKeepV1alpha2Fields: a v1alpha1 client that reads an object,
// changes what it can see and writes it back keeps every v1alpha2-only field, and
// its changes apply.
func TestV1alpha1EditsKeepV1alpha2Fields(t *testing.T) {
	hub := hubWithEverything()
	spoke := &LlamaStackDistribution{}
	require.NoError(t, spoke.ConvertFrom(hub))
	assert.Contains(t, spoke.Annotations, ConversionDataAnnotation)
	assert.Equal(t, "a", spoke.Annotations["team"])
	assert.Equal(t, int32(2), spoke.Spec.Replicas)
	assert.Equal(t, int32(8321), spoke.Spec.Server.ContainerSpec.Port)
	assert.True(t, spoke.Spec.Network.ExposeRoute)
	assert.Equal(t, "llama.example.com", spoke.Spec.Network.Ingress.Host)

	spoke = viaJSON(t, spoke)
	spoke.Spec.Replicas = 3
	spoke.Spec.Server.ContainerSpec.Env = append(spoke.Spec.Server.ContainerSpec.Env, corev1.EnvVar{Name: "B", Value: "2"})
	spoke.Spec.Server.ContainerSpec.Port = 9000

	out := &v1alpha2.LlamaStackDistribution{}
	require.NoError(t, spoke.ConvertTo(out))
	want := hubWithEverything()
	want.APIVersion = "llamastack.io/v1alpha2"
	want.Spec.Workload.Replicas = ptr.To[int32](3)
	want.Spec.Workload.Overrides.Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}
	want.Spec.Networking.Port = 9000
	assertSame(t, want, out, "after a v1alpha1 edit")
	assert.NotContains(t, out.Annotations, ConversionDataAnnotation, "the annotation is consumed")
}

// TestOGXAPIsKeptThroughV1alpha1: the providers and disabled entries of the APIs
// OGX added (interactions, messages, skills), which v1alpha1 has no field for, come
// back from a v1alpha1 read and write, with the client's edit applied.
func TestOGXAPIsKeptThroughV1alpha1(t *testing.T) {
	hub := hubWithEverything()
	hub.Spec.Providers.Interactions = []v1alpha2.ProviderConfig{{ID: "interactions", Provider: "inline::builtin"}}
	hub.Spec.Providers.Messages = []v1alpha2.ProviderConfig{{
		ID: "messages", Provider: "inline::builtin",
		Settings: &runtime.RawExtension{Raw: []byte(`{"kvstore":{"backend":"kv_default","namespace":"message_batches"}}`)},
	}}
	hub.Spec.Disabled = []v1alpha2.APIName{v1alpha2.APIPostTraining, v1alpha2.APISkills}
	hub = viaJSON(t, hub)
	want := hub.DeepCopy()

	spoke := &LlamaStackDistribution{}
	require.NoError(t, spoke.ConvertFrom(hub))
	assert.Contains(t, spoke.Annotations[ConversionDataAnnotation], `"messages"`)
	spoke = viaJSON(t, spoke)
	spoke.Spec.Replicas = 5

	out := &v1alpha2.LlamaStackDistribution{}
	require.NoError(t, spoke.ConvertTo(out))
	want.Spec.Workload.Replicas = ptr.To[int32](5)
	assertSame(t, want, viaJSON(t, out), "OGX APIs after a v1alpha1 edit")
}

// TestV1alpha1EditOfASharedFieldWins: a field both versions have that the v1alpha1
// client changed takes the client's value, not the kept one.
func TestV1alpha1EditOfASharedFieldWins(t *testing.T) {
	hub := hubWithEverything()
	hub.Spec.Workload.Replicas = nil // kept in the annotation: v1alpha1 reads 0
	spoke := &LlamaStackDistribution{}
	require.NoError(t, spoke.ConvertFrom(hub))

	out := &v1alpha2.LlamaStackDistribution{}
	require.NoError(t, spoke.DeepCopy().ConvertTo(out))
	assert.Nil(t, out.Spec.Workload.Replicas, "unchanged: the kept value comes back")

	spoke.Spec.Replicas = 4
	require.NoError(t, spoke.ConvertTo(out))
	assert.Equal(t, ptr.To[int32](4), out.Spec.Workload.Replicas, "changed: the client's value")

	// TLS of the server itself survives the removal of the CA bundle's v1alpha1 form.
	hub = hubWithEverything()
	hub.Spec.Networking.TLS.CABundle = &v1alpha2.CABundleConfig{ConfigMapName: "ca"}
	require.NoError(t, spoke.ConvertFrom(hub))
	spoke.Spec.Server.TLSConfig = nil
	require.NoError(t, spoke.ConvertTo(out))
	assert.Equal(t, &v1alpha2.TLSSpec{Enabled: true, SecretName: "cert"}, out.Spec.Networking.TLS)
}

// TestNoAnnotationWhenNothingIsLost: an object that v1alpha1 holds whole carries no
// conversion data in either version.
func TestNoAnnotationWhenNothingIsLost(t *testing.T) {
	in := &LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: "llsd"},
		Spec: LlamaStackDistributionSpec{
			Replicas: 1,
			Server: ServerSpec{
				Distribution:  DistributionType{Name: "starter"},
				ContainerSpec: ContainerSpec{Name: "llama-stack", Port: 8321},
				UserConfig:    &UserConfigSpec{ConfigMapName: "run"},
			},
			Network: &NetworkSpec{ExposeRoute: true},
		},
	}
	hub := &v1alpha2.LlamaStackDistribution{}
	require.NoError(t, in.ConvertTo(hub))
	assert.Empty(t, hub.Annotations)
	back := &LlamaStackDistribution{}
	require.NoError(t, back.ConvertFrom(hub))
	assert.Empty(t, back.Annotations)
}

// TestUnreadableAnnotationIsIgnored: a hand-edited annotation that is not JSON
// converts as if absent.
func TestUnreadableAnnotationIsIgnored(t *testing.T) {
	in := &LlamaStackDistribution{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ConversionDataAnnotation: "{not json"}}}
	in.Spec.Server.Distribution.Name = "starter"
	hub := &v1alpha2.LlamaStackDistribution{}
	require.NoError(t, in.ConvertTo(hub))
	assert.NotContains(t, hub.Annotations, ConversionDataAnnotation)
	assert.Equal(t, "starter", hub.Spec.Distribution.Name)
}

// readLLSDs returns the LlamaStackDistributions of a YAML file, as JSON.
func readLLSDs(t *testing.T, file string) [][]byte {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	var out [][]byte
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			break
		}
		if obj["kind"] != "LlamaStackDistribution" {
			continue
		}
		j, err := json.Marshal(obj)
		require.NoError(t, err)
		out = append(out, j)
	}
	return out
}

// TestExamplesConvert: each example in artifacts/examples/v1alpha2 that has a v1alpha1
// version converts to exactly that version (the conversion annotation aside), and back.
func TestExamplesConvert(t *testing.T) {
	const dir = "../../../../artifacts/examples"
	files, err := filepath.Glob(filepath.Join(dir, "v1alpha2", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	compared := 0
	for _, file := range files {
		v1file := filepath.Join(dir, strings.Replace(filepath.Base(file), "_v1alpha2_", "_v1alpha1_", 1))
		if _, err := os.Stat(v1file); err != nil {
			continue // only in v1alpha2
		}
		hubs, spokes := readLLSDs(t, file), readLLSDs(t, v1file)
		require.Len(t, hubs, len(spokes), file)
		for i := range hubs {
			hub := &v1alpha2.LlamaStackDistribution{}
			require.NoError(t, yaml.UnmarshalStrict(hubs[i], hub), file)
			want := &LlamaStackDistribution{}
			require.NoError(t, yaml.UnmarshalStrict(spokes[i], want), v1file)
			want = apiServerDefaults(want)

			got := &LlamaStackDistribution{}
			require.NoError(t, got.ConvertFrom(hub))
			back := &v1alpha2.LlamaStackDistribution{}
			require.NoError(t, got.DeepCopy().ConvertTo(back))
			assertSame(t, hub, back, "%s: back to v1alpha2", file)

			delete(got.Annotations, ConversionDataAnnotation)
			if len(got.Annotations) == 0 {
				got.Annotations = nil
			}
			assertSame(t, want, got, "%s#%d as v1alpha1", file, i)
			compared++
		}
	}
	assert.Positive(t, compared)
}

var (
	docOnce sync.Once
	docText []byte
	docErr  error
)

// docTable reads a table of v1alpha2's package doc, the one whose header row starts
// with header: the words of each row below it.
func docTable(t *testing.T, header string) [][]string {
	t.Helper()
	docOnce.Do(func() { docText, docErr = os.ReadFile("../v1alpha2/doc.go") })
	require.NoError(t, docErr)
	var rows [][]string
	in := false
	for _, line := range strings.Split(string(docText), "\n") {
		if strings.HasPrefix(line, "//\t"+header+" ") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "//\t") {
			break
		}
		rows = append(rows, strings.Fields(strings.TrimPrefix(line, "//")))
	}
	require.NotEmpty(t, rows, "the table %q of v1alpha2's package doc", header)
	return rows
}

// fieldHomes reads the table of v1alpha2's package doc: each v1alpha1 spec field and
// its v1alpha2 home (a row may wrap its second column onto the next line).
func fieldHomes(t *testing.T) map[string]string {
	t.Helper()
	lines := docTable(t, "v1alpha1")
	homes := map[string]string{}
	for i := 0; i < len(lines); i++ {
		f := lines[i]
		switch {
		case f[0] == "status.*":
			continue
		case len(f) == 1 && i+1 < len(lines) && len(lines[i+1]) == 1:
			homes[f[0]] = lines[i+1][0]
			i++
		case len(f) == 2:
			homes[f[0]] = f[1]
		default:
			t.Fatalf("cannot read the row %q", f)
		}
	}
	return homes
}

// specLeaves lists the JSON paths of the fields of a spec type, going into the
// structs of this package and stopping at any other type.
func specLeaves(typ reflect.Type, prefix string) []string {
	return typeLeaves(typ, prefix, reflect.TypeFor[LlamaStackDistribution]().PkgPath())
}

// fieldAt returns the settable field at a JSON path of v, allocating pointers on the way.
func fieldAt(t *testing.T, v reflect.Value, path string) reflect.Value {
	t.Helper()
	f, ok := walk(v, path, true)
	require.True(t, ok, "no field %s", path)
	return f
}

// jsonAt returns the value at a dotted path of an object as JSON gives it.
func jsonAt(t *testing.T, obj any, path string) (any, bool) {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	var cur any
	require.NoError(t, json.Unmarshal(raw, &cur))
	for _, name := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[name]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// TestEveryV1alpha1FieldHasItsDocumentedHome: the table in v1alpha2's package doc
// lists every v1alpha1 spec field once, and the conversion puts each field's value
// at the v1alpha2 path the table gives.
func TestEveryV1alpha1FieldHasItsDocumentedHome(t *testing.T) {
	homes := fieldHomes(t)
	leaves := specLeaves(reflect.TypeFor[LlamaStackDistributionSpec](), "")
	var listed []string
	for v1 := range homes {
		listed = append(listed, v1)
	}
	assert.ElementsMatch(t, leaves, listed, "the table and the v1alpha1 spec differ")

	for v1path, v2path := range homes {
		t.Run(v1path, func(t *testing.T) {
			f := randfill.NewWithSeed(1).NilChance(0).NumElements(1, 2).MaxDepth(6).Funcs(
				func(q *resource.Quantity, c randfill.Continue) {
					*q = *resource.NewQuantity(1+c.Int63n(1<<30), resource.BinarySI)
				},
			)
			for try := range 20 {
				in := &LlamaStackDistribution{}
				field := fieldAt(t, reflect.ValueOf(&in.Spec).Elem(), v1path)
				if field.Kind() == reflect.Pointer {
					// Filled through the pointer: a nil *IntOrString fills itself with nothing.
					field.Set(reflect.New(field.Type().Elem()))
					f.Fill(field.Interface())
				} else {
					f.Fill(field.Addr().Interface())
				}
				want, ok := jsonAt(t, in.Spec, v1path)
				if !ok || reflect.ValueOf(want).IsZero() {
					continue // a zero value is omitted: fill again
				}
				hub := &v1alpha2.LlamaStackDistribution{}
				require.NoError(t, in.ConvertTo(hub))
				got, ok := jsonAt(t, hub.Spec, v2path)
				require.True(t, ok, "try %d: %s is not set in v1alpha2", try, v2path)
				assert.Equal(t, want, got)
				return
			}
			t.Fatalf("could not fill %s", v1path)
		})
	}
}

// TestStatusKeepsItsNames: every v1alpha1 status field has the same name and value
// in v1alpha2, as the table says.
func TestStatusKeepsItsNames(t *testing.T) {
	for i := range 200 {
		in := &LlamaStackDistribution{}
		filler(int64(i)).Fill(&in.Status)
		want, _ := jsonAt(t, in, "status")
		hub := &v1alpha2.LlamaStackDistribution{}
		require.NoError(t, in.ConvertTo(hub))
		got, _ := jsonAt(t, hub, "status")
		assert.Equal(t, want, got, "seed %d", i)
	}
}

// TestDefaultContainerNameStaysUnset: a v1alpha2 object that does not name its
// container reads in v1alpha1 with the schema's default name, and a v1alpha1 client's
// write of it (which the API server defaults the same) leaves it unnamed in v1alpha2;
// one that names the default keeps it.
func TestDefaultContainerNameStaysUnset(t *testing.T) {
	for _, named := range []string{"", DefaultContainerName} {
		hub := &v1alpha2.LlamaStackDistribution{
			ObjectMeta: metav1.ObjectMeta{Name: "llsd", Namespace: "ns"},
			Spec: v1alpha2.LlamaStackDistributionSpec{
				Distribution: v1alpha2.DistributionSpec{Name: "starter"},
				Workload:     v1alpha2.WorkloadSpec{Replicas: ptr.To[int32](1)},
			},
		}
		if named != "" {
			hub.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{ContainerName: named}
		}
		spoke := &LlamaStackDistribution{}
		require.NoError(t, spoke.ConvertFrom(hub))
		assert.Equal(t, DefaultContainerName, spoke.Spec.Server.ContainerSpec.Name, "named %q", named)
		spoke = viaJSON(t, apiServerDefaults(spoke))
		spoke.Labels = map[string]string{"team": "a"}
		back := &v1alpha2.LlamaStackDistribution{}
		require.NoError(t, spoke.ConvertTo(back))
		assert.Equal(t, hub.Spec, back.Spec, "named %q", named)
	}
}
