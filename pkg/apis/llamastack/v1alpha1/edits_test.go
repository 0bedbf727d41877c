package v1alpha1

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// v1alpha2OnlyFields reads the second table of v1alpha2's package doc: the paths of
// the fields v1alpha1 has no home for.
func v1alpha2OnlyFields(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, row := range docTable(t, "v1alpha2 only") {
		paths = append(paths, row[0])
	}
	return paths
}

// typeLeaves lists the JSON paths of the fields of a struct type, going into the
// structs of the package pkg and stopping at any other type.
func typeLeaves(typ reflect.Type, prefix, pkg string) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == pkg {
			out = append(out, typeLeaves(ft, prefix+name+".", pkg)...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

// under reports whether path is one of roots or lies beneath one.
func under(path string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return path == r || strings.HasPrefix(path, r+".") })
}

// TestEveryV1alpha2FieldHasAHomeOrSurvives: each v1alpha2 spec field is the home of a
// v1alpha1 field (the first table), or lies beneath one, or is in the table of fields
// only v1alpha2 has; and no field is in both.
func TestEveryV1alpha2FieldHasAHomeOrSurvives(t *testing.T) {
	var homes []string
	for _, v2 := range fieldHomes(t) {
		homes = append(homes, v2)
	}
	var only []string
	for _, p := range v1alpha2OnlyFields(t) {
		if spec, ok := strings.CutPrefix(p, "status."); ok {
			_, found := reflect.TypeFor[v1alpha2.LlamaStackDistributionStatus]().FieldByNameFunc(func(n string) bool {
				return strings.EqualFold(n, spec)
			})
			assert.True(t, found, "%s is a v1alpha2 status field", p)
			continue
		}
		only = append(only, p)
	}
	pkg := reflect.TypeFor[v1alpha2.LlamaStackDistribution]().PkgPath()
	for _, leaf := range typeLeaves(reflect.TypeFor[v1alpha2.LlamaStackDistributionSpec](), "", pkg) {
		home, v2only := under(leaf, homes), under(leaf, only)
		assert.True(t, home || v2only, "%s is neither a v1alpha1 field's home nor in the table of fields only v1alpha2 has", leaf)
		assert.False(t, home && v2only, "%s is both a v1alpha1 field's home and a field only v1alpha2 has", leaf)
	}
	for _, p := range only {
		assert.NotEmpty(t, slices.DeleteFunc(typeLeaves(reflect.TypeFor[v1alpha2.LlamaStackDistributionSpec](), "", pkg),
			func(leaf string) bool { return !under(leaf, []string{p}) }), "%s is a v1alpha2 spec field", p)
	}
}

// v1alpha1Paths lists every path of the v1alpha1 spec a client can edit: each leaf,
// and each block on the way to one.
func v1alpha1Paths(typ reflect.Type, prefix string) []string {
	return specPaths(typ, prefix, reflect.TypeFor[LlamaStackDistribution]().PkgPath())
}

// specPaths lists every path of a spec type of the package pkg: each leaf, and each
// block on the way to one.
func specPaths(typ reflect.Type, prefix, pkg string) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, prefix+name)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == pkg {
			out = append(out, specPaths(ft, prefix+name+".", pkg)...)
		}
	}
	return out
}

// walk returns the field at a JSON path of v; with grow, nil pointers on the way are
// allocated, without, a nil on the way is reported as not found.
func walk(v reflect.Value, path string, grow bool) (reflect.Value, bool) {
	for _, name := range strings.Split(path, ".") {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !grow {
					return reflect.Value{}, false
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		found := false
		for i := range v.NumField() {
			if tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); tag == name {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return reflect.Value{}, false
		}
	}
	return v, true
}

// editV1alpha1 makes up to four random edits to spec, as a client would: set a field
// or a block, change it, clear it, or reorder a list. It returns what it did.
func editV1alpha1(spec *LlamaStackDistributionSpec, seed int64) []string {
	return editSpec(reflect.ValueOf(spec).Elem(), v1alpha1Paths(reflect.TypeFor[LlamaStackDistributionSpec](), ""), seed)
}

// editV1alpha2 makes up to four random edits to the networking and workload of a
// v1alpha2 spec, as a v1alpha2 client between two v1alpha1 writes would: what it leaves
// tests the shapes an earlier v1alpha1 write recorded.
func editV1alpha2(spec *v1alpha2.LlamaStackDistributionSpec, seed int64) []string {
	var paths []string
	for _, p := range specPaths(reflect.TypeFor[v1alpha2.LlamaStackDistributionSpec](), "", reflect.TypeFor[v1alpha2.LlamaStackDistribution]().PkgPath()) {
		if strings.HasPrefix(p, "networking") || strings.HasPrefix(p, "workload") {
			paths = append(paths, p)
		}
	}
	var done []string
	for _, d := range editSpec(reflect.ValueOf(spec).Elem(), paths, seed) {
		done = append(done, "v1alpha2 "+d)
	}
	return done
}

// editSpec makes up to four random edits at paths of the spec root.
func editSpec(root reflect.Value, paths []string, seed int64) []string {
	r := rand.New(rand.NewSource(seed))
	fill := filler(seed)
	var done []string
	for range 1 + r.Intn(4) {
		path := paths[r.Intn(len(paths))]
		switch r.Intn(4) {
		case 0: // clear
			if f, ok := walk(root, path, false); ok {
				f.Set(reflect.Zero(f.Type()))
				done = append(done, "clear "+path)
			}
		case 1: // reorder
			if f, ok := walk(root, path, false); ok && f.Kind() == reflect.Slice && f.Len() > 1 {
				reflect.Swapper(f.Interface())(0, f.Len()-1)
				done = append(done, "reorder "+path)
			}
		default: // set, or change what is there
			f, _ := walk(root, path, true)
			if f.Kind() == reflect.Pointer {
				f.Set(reflect.New(f.Type().Elem()))
				fill.Fill(f.Interface())
			} else {
				fill.Fill(f.Addr().Interface())
			}
			done = append(done, "set "+path)
		}
	}
	return done
}

// jsonValues returns the value at each dotted path of an object as JSON gives it,
// "absent" where there is none.
func jsonValues(t *testing.T, obj any, paths []string) map[string]any {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	var doc any
	require.NoError(t, json.Unmarshal(raw, &doc))
	out := make(map[string]any, len(paths))
	for _, path := range paths {
		cur := doc
		for _, name := range strings.Split(path, ".") {
			m, _ := cur.(map[string]any)
			if cur = m[name]; cur == nil {
				cur = "absent"
				break
			}
		}
		out[path] = cur
	}
	return out
}

// reportedHubs are the objects of the reported losses, the fuzzing's first inputs
// (seeds -1, -2, ...): rollback off with an HTTPRoute, with an OpenShift Route, and with
// the server's own TLS beside a CA bundle.
var reportedHubs = []func() *v1alpha2.LlamaStackDistribution{
	routedHub,
	func() *v1alpha2.LlamaStackDistribution {
		hub := routedHub()
		hub.Spec.Networking.Expose = &v1alpha2.ExposeSpec{
			Enabled: ptr.To(true), Type: v1alpha2.ExposeRoute,
			Route: &v1alpha2.RouteSpec{Termination: v1alpha2.RouteTerminationReencrypt, InsecureEdgeTerminationPolicy: "None"},
		}
		return hub
	},
	func() *v1alpha2.LlamaStackDistribution {
		hub := routedHub()
		hub.Spec.Networking.TLS.CABundle = &v1alpha2.CABundleConfig{ConfigMapName: "ca", ConfigMapKeys: []v1alpha2.ConfigMapKey{"a.crt", "b.crt"}}
		hub.Spec.Networking.AllowedFrom = &v1alpha2.AllowedFromSpec{Namespaces: []string{"a", "b"}}
		return hub
	},
}

// assertV1alpha1WritesKeepV1alpha2Fields reads a v1alpha2 object in v1alpha1 (a random
// one filled from seed, or from -seed a reported one), edits it at random and writes it
// back, three times over (edits), with now and then a v1alpha2 edit in between (leaving
// the shapes the last write recorded): after each v1alpha1 write every field only
// v1alpha2 has is what it was before it, and the object read again in v1alpha1 is
// exactly what the client wrote.
func assertV1alpha1WritesKeepV1alpha2Fields(t *testing.T, seed, edits int64) {
	hub := &v1alpha2.LlamaStackDistribution{}
	if seed < 0 && -seed <= int64(len(reportedHubs)) {
		hub = reportedHubs[-seed-1]()
	} else {
		filler(seed).Fill(hub)
	}
	hub.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha2.SchemeGroupVersion.String(), Kind: "LlamaStackDistribution"}
	delete(hub.Annotations, ConversionDataAnnotation)
	hub = viaJSON(t, hub)
	only := v1alpha2OnlyFields(t)
	orig := jsonValues(t, hub, only)

	var history []string
	for round := range int64(3) {
		if round > 0 && (edits+round)%3 == 0 {
			// A v1alpha2 client's edit in between: the fields only v1alpha2 has are then
			// what it left.
			history = append(history, editV1alpha2(&hub.Spec, edits*31+round)...)
			hub = viaJSON(t, hub)
			orig = jsonValues(t, hub, only)
		}
		spoke := &LlamaStackDistribution{}
		require.NoError(t, spoke.ConvertFrom(hub))
		spoke = viaJSON(t, spoke)
		history = append(history, editV1alpha1(&spoke.Spec, edits+round)...)
		spoke = viaJSON(t, apiServerDefaults(spoke))
		written := spoke.DeepCopy()

		hub = &v1alpha2.LlamaStackDistribution{}
		require.NoError(t, spoke.ConvertTo(hub))
		hub = viaJSON(t, hub)
		if !assert.Equal(t, orig, jsonValues(t, hub, only), "seeds %d, %d: the fields only v1alpha2 has, after %q", seed, edits, history) {
			t.FailNow()
		}
		again := &LlamaStackDistribution{}
		require.NoError(t, again.ConvertFrom(hub))
		assertSame(t, written.Spec, viaJSON(t, again).Spec, "seeds %d, %d: read back in v1alpha1 after %q", seed, edits, history)
	}
}

// TestV1alpha1EditsFuzzed runs assertV1alpha1WritesKeepV1alpha2Fields on a thousand
// random objects and on each reported one under a hundred random edits, each written
// three times; FuzzV1alpha1Edits searches further.
func TestV1alpha1EditsFuzzed(t *testing.T) {
	for i := range int64(1000) {
		assertV1alpha1WritesKeepV1alpha2Fields(t, i, 7919*i+1)
	}
	for i := range int64(len(reportedHubs)) {
		for edits := range int64(100) {
			assertV1alpha1WritesKeepV1alpha2Fields(t, -i-1, edits)
		}
	}
}

func FuzzV1alpha1Edits(f *testing.F) {
	for i := range int64(len(reportedHubs)) {
		f.Add(-i-1, int64(1))
	}
	for _, seeds := range [][2]int64{{0, 1}, {1, 2}, {42, 42}, {1000, 7}} {
		f.Add(seeds[0], seeds[1])
	}
	f.Fuzz(assertV1alpha1WritesKeepV1alpha2Fields)
}

// routedHub is the object of the cases the random edits first missed: rollback off,
// exposed through an HTTPRoute, serving TLS, with providers.
func routedHub() *v1alpha2.LlamaStackDistribution {
	hub := hubWithEverything()
	hub.Spec.Workload.Rollback = &v1alpha2.RollbackSpec{Enabled: ptr.To(false)}
	hub.Spec.Networking.Expose = &v1alpha2.ExposeSpec{
		Enabled: ptr.To(true), Type: v1alpha2.ExposeHTTPRoute, Hostname: "llama.example.com",
		HTTPRoute: &v1alpha2.HTTPRouteSpec{ParentRefs: []v1alpha2.GatewayParentRef{{Name: "gw", SectionName: "web"}}, Path: "/v1"},
	}
	hub.Status.Rollback = &v1alpha2.RollbackStatus{Reason: "CrashLoop"}
	return hub
}

// TestV1alpha1EditCases: the writes of a v1alpha1 client that lost v1alpha2 fields
// before each field was merged on its own, each with what v1alpha2 then holds.
func TestV1alpha1EditCases(t *testing.T) {
	cases := []struct {
		name string
		hub  func() *v1alpha2.LlamaStackDistribution
		edit func(*LlamaStackDistribution)
		want func(*v1alpha2.LlamaStackDistribution)
	}{{
		name: "replicas",
		hub:  routedHub,
		edit: func(l *LlamaStackDistribution) { l.Spec.Replicas = 3 },
		want: func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Replicas = ptr.To[int32](3) },
	}, {
		name: "port",
		hub:  routedHub,
		edit: func(l *LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Port = 8443 },
		want: func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Networking.Port = 8443 },
	}, {
		name: "replicas and port at once, and an env var",
		hub:  routedHub,
		edit: func(l *LlamaStackDistribution) {
			l.Spec.Replicas = 1
			l.Spec.Server.ContainerSpec.Port = 9000
			l.Spec.Server.ContainerSpec.Env = nil
		},
		want: func(l *v1alpha2.LlamaStackDistribution) {
			l.Spec.Workload.Replicas = ptr.To[int32](1)
			l.Spec.Networking.Port = 9000
			l.Spec.Workload.Overrides = nil
		},
	}, {
		name: "hostname changed",
		hub:  routedHub,
		edit: func(l *LlamaStackDistribution) { l.Spec.Network.Ingress.Host = "other.example.com" },
		want: func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Networking.Expose.Hostname = "other.example.com" },
	}, {
		name: "exposure turned off, the route kept for when it is turned on",
		hub:  routedHub,
		edit: func(l *LlamaStackDistribution) { l.Spec.Network = nil },
		want: func(l *v1alpha2.LlamaStackDistribution) {
			l.Spec.Networking.Expose = &v1alpha2.ExposeSpec{
				Enabled: ptr.To(false), Type: v1alpha2.ExposeHTTPRoute,
				HTTPRoute: l.Spec.Networking.Expose.HTTPRoute,
			}
		},
	}, {
		name: "the CA bundle removed, the server's own TLS kept",
		hub: func() *v1alpha2.LlamaStackDistribution {
			hub := routedHub()
			hub.Spec.Networking.TLS.CABundle = &v1alpha2.CABundleConfig{ConfigMapName: "ca"}
			return hub
		},
		edit: func(l *LlamaStackDistribution) { l.Spec.Server.TLSConfig = nil },
		want: func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Networking.TLS.CABundle = nil },
	}, {
		name: "a Route's settings kept through a port change",
		hub:  reportedHubs[1],
		edit: func(l *LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Port = 8443 },
		want: func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Networking.Port = 8443 },
	}, {
		name: "rollback kept when every workload field changes",
		hub:  routedHub,
		edit: func(l *LlamaStackDistribution) {
			l.Spec.Replicas = 2
			l.Spec.Server.Workers = ptr.To[int32](4)
			l.Spec.Server.ContainerSpec.Env = nil
			l.Spec.Server.PodOverrides = &PodOverrides{ServiceAccountName: "sa"}
		},
		want: func(l *v1alpha2.LlamaStackDistribution) {
			l.Spec.Workload.Replicas = ptr.To[int32](2)
			l.Spec.Workload.Workers = ptr.To[int32](4)
			l.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{ServiceAccountName: "sa"}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spoke := &LlamaStackDistribution{}
			require.NoError(t, spoke.ConvertFrom(viaJSON(t, tc.hub())))
			spoke = viaJSON(t, spoke)
			tc.edit(spoke)
			spoke = viaJSON(t, spoke)
			written := spoke.DeepCopy()

			got := &v1alpha2.LlamaStackDistribution{}
			require.NoError(t, spoke.ConvertTo(got))
			want := tc.hub()
			tc.want(want)
			compared := viaJSON(t, got)
			delete(compared.Annotations, ConversionDataAnnotation)
			assertSame(t, viaJSON(t, want), compared, "v1alpha2 after the v1alpha1 write")

			again := &LlamaStackDistribution{}
			require.NoError(t, again.ConvertFrom(viaJSON(t, got)))
			assertSame(t, written.Spec, viaJSON(t, again).Spec, "read back in v1alpha1")
		})
	}
}

// TestKeptExposeIsOff: an expose kept only for type and httpRoute after the client
// removed network is off, and turning exposure on again in v1alpha1 brings the
// HTTPRoute back as it was.
func TestKeptExposeIsOff(t *testing.T) {
	spoke := &LlamaStackDistribution{}
	require.NoError(t, spoke.ConvertFrom(routedHub()))
	spoke.Spec.Network = nil
	off := &v1alpha2.LlamaStackDistribution{}
	require.NoError(t, spoke.ConvertTo(off))
	require.NotNil(t, off.Spec.Networking.Expose)
	assert.Equal(t, ptr.To(false), off.Spec.Networking.Expose.Enabled, "the client left the server unexposed")
	assert.Contains(t, off.Annotations[ConversionDataAnnotation], `"noNetwork":true`)

	spoke = &LlamaStackDistribution{}
	require.NoError(t, spoke.ConvertFrom(viaJSON(t, off)))
	assert.Nil(t, spoke.Spec.Network, "v1alpha1 reads no network, as written")
	spoke.Spec.Network = &NetworkSpec{ExposeRoute: true}
	on := &v1alpha2.LlamaStackDistribution{}
	require.NoError(t, spoke.ConvertTo(on))
	want := routedHub().Spec.Networking.Expose
	want.Hostname = ""
	assert.Equal(t, want, on.Spec.Networking.Expose)
	assert.NotContains(t, on.Annotations, ConversionDataAnnotation)
}

// A shape left behind by a v1alpha2 edit changes nothing: network.ingress: {} recorded
// at a v1alpha1 write, the expose it became then removed in v1alpha2, and a v1alpha1
// client's next write reads back as written.
func TestStaleEmptyIngressShape(t *testing.T) {
	spoke := &LlamaStackDistribution{Spec: LlamaStackDistributionSpec{
		Replicas: 1,
		Server:   ServerSpec{Distribution: DistributionType{Name: "starter"}},
		Network:  &NetworkSpec{Ingress: &IngressSpec{}, AllowedFrom: &AllowedFromSpec{Namespaces: []string{"a"}}},
	}}
	hub := &v1alpha2.LlamaStackDistribution{}
	require.NoError(t, spoke.ConvertTo(hub))
	require.Contains(t, hub.Annotations[ConversionDataAnnotation], "emptyIngress")
	hub = viaJSON(t, hub)
	hub.Spec.Networking.Expose = nil // a v1alpha2 edit

	spoke = &LlamaStackDistribution{}
	require.NoError(t, spoke.ConvertFrom(hub))
	spoke = viaJSON(t, spoke)
	assert.Nil(t, spoke.Spec.Network.Ingress, "no expose, no ingress")
	spoke.Spec.Network.AllowedFrom = nil
	written := spoke.DeepCopy()
	out := &v1alpha2.LlamaStackDistribution{}
	require.NoError(t, spoke.ConvertTo(out))
	again := &LlamaStackDistribution{}
	require.NoError(t, again.ConvertFrom(viaJSON(t, out)))
	assertSame(t, written.Spec, viaJSON(t, again).Spec, "read back in v1alpha1")
}
