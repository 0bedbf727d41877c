package controller

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/testcert"
	"github.com/llamastack/llama-stack-controller/pkg/controller/probe"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// Fuzz targets: `make fuzz` (hack/fuzz.sh) explores each for a while; plain `go test`
// runs their seeds, in testdata/fuzz/<Target>/ and below, as regression tests.

// fuzzOperatorNamespace is the operator namespace of the fuzzed NetworkPolicies.
const fuzzOperatorNamespace = "llama-stack-controller-system"

// fuzzResult is what one FuzzBuilders input makes: the children a sync would apply and
// the status it would write.
type fuzzResult struct {
	cr       *v1alpha1.LlamaStackDistribution
	hub      *v1alpha2.LlamaStackDistribution // cr in v1alpha2, as the builders saw it
	before   *v1alpha2.LlamaStackDistribution // hub before the builders ran
	children []runtime.Object
	status   v1alpha2.LlamaStackDistributionStatus
}

// buildForFuzz does what a sync does with a CR, without an API server: it resolves the
// image and the user ConfigMap (which, when cross-namespace, has opted in and holds
// configData), builds every child the spec asks for, and computes the status.
func buildForFuzz(spec v1alpha1.LlamaStackDistributionSpec, configData string, caBundle bool) fuzzResult {
	l := &v1alpha1.LlamaStackDistribution{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "LlamaStackDistribution"},
		ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Namespace: "ns", UID: "uid", Generation: 1},
		Spec:       spec,
	}
	c := &Controller{distributions: revision.BuiltinDistributions(), operatorVersion: "v", operatorNamespace: fuzzOperatorNamespace}
	h := hub(l)
	res := fuzzResult{cr: l, hub: h, before: h.DeepCopy()}
	var obs status.Observed
	image, problem := (&revision.Resolver{Distributions: c.distributions}).ChooseImage(h, revision.OperatorConfig{})
	if problem != nil {
		obs.Problems = append(obs.Problems, *problem)
	}
	in := revision.Inputs{Image: image}
	if uc := spec.Server.UserConfig; uc != nil {
		source := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: revision.UserConfigNamespace(h), Name: uc.ConfigMapName},
			Data:       map[string]string{llsd.UserConfigKey: configData},
		}
		switch {
		case len(apimachineryNameErrors(uc.ConfigMapName)) > 0 || len(apimachineryNameErrors(source.Namespace)) > 0:
			// No such ConfigMap can exist.
			obs.Problems = append(obs.Problems, fault.Problem{Reason: v1alpha2.ReasonConfigMapNotFound, Message: fmt.Sprintf("ConfigMap %s/%s referenced by %s was not found", source.Namespace, source.Name, revision.UserConfigField)})
		case source.Namespace != l.Namespace:
			cp := newUserConfigCopy(h, source)
			res.children = append(res.children, cp)
			in.UserConfigMap, in.UserConfigHash = cp.Name, cp.Annotations[llsd.AnnotationSourceHash]
		default:
			in.UserConfigMap, in.UserConfigHash = source.Name, revision.ConfigMapHash(source)
		}
	}
	if caBundle {
		cm := newCABundleConfigMap(h, configData, "sources")
		res.children = append(res.children, cm)
		in.CABundleHash = revision.CABundleMountHash(cm)
	}
	obs.MountsChecked, obs.NestedMounts = true, children.PodNestedMounts(h, in)
	if conflict := children.PodConflict(h, in); conflict != nil {
		obs.Problems = append(obs.Problems, *conflict)
	}
	if len(obs.Problems) > 0 {
		// A user error leaves every child as it is (a pod conflict only the Deployment;
		// the other children are checked through the specs without one).
		res.children = nil
		res.status = c.calculateStatus(h, obs, metav1.Now())
		return res
	}
	if spec.Server.Autoscaling == nil {
		in.Replicas = &l.Spec.Replicas
	} else {
		min := children.HPAMinReplicas(h)
		in.Replicas = &min
	}
	obs.Deployment = children.NewDeployment(h, in)
	obs.Service = children.NewService(h, children.AskedListening(h, in.ServerVersion))
	res.children = append(res.children, obs.Deployment, obs.Service, children.NewNetworkPolicy(h, fuzzOperatorNamespace, children.AskedListening(h, in.ServerVersion)))
	if spec.Server.Storage != nil {
		obs.PVC = children.NewPVC(h)
		res.children = append(res.children, obs.PVC)
	}
	if spec.Server.Autoscaling != nil {
		res.children = append(res.children, children.NewHPA(h))
	}
	if children.WantsPDB(h) {
		res.children = append(res.children, children.NewPDB(h))
	}
	if children.WantsIngress(h) {
		obs.Ingress = children.NewIngress(h)
		res.children = append(res.children, obs.Ingress)
	}
	if len(configData)%2 == 1 {
		// A server that runs and answers its probes: its version, health message and
		// providers reach the status. configData stands for what it says.
		c.prober = &probe.Prober{}
		d := obs.Deployment.DeepCopy()
		d.Status.Replicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = max(1, *in.Replicas), max(1, *in.Replicas), max(1, *in.Replicas)
		obs.Deployment = d
		obs.Probe = &probe.Result{UID: l.UID, Info: probe.Info{
			Healthy: strings.HasPrefix(configData, "ok"), HealthMessage: configData, Version: configData,
			Providers: []v1alpha2.ProviderInfo{{API: "inference", ProviderID: configData, ProviderType: "remote::x",
				Health: v1alpha2.ProviderHealthStatus{Status: "OK", Message: configData}}},
			ProvidersKnown: true,
		}}
	}
	res.status = c.calculateStatus(h, obs, metav1.Now())
	return res
}

// apimachineryNameErrors checks the name of an object that must exist (a DNS subdomain).
func apimachineryNameErrors(name string) []string {
	if name == "" {
		return []string{"empty"}
	}
	return validation.IsDNS1123Subdomain(name)
}

// FuzzBuilders feeds arbitrary specs that the CRD admits to every builder and to the
// status computation: none may panic or change the CR, every child carries its name,
// namespace and controller reference, passes the API server's validation as far as it
// can be checked offline (fuzzcheck_test.go), and the status passes the CRD's. Specs
// whose pass-through core fields (env, volumes, resources) are invalid by themselves
// are skipped: the API server rejects them and the CR reports ResourceInvalid.
func FuzzBuilders(f *testing.F) {
	f.Add([]byte(`{"server":{"distribution":{"name":"starter"}}}`), startingUserConfig, false)
	f.Add([]byte(`{"replicas":3,"server":{"distribution":{"image":"x:1"},"workers":4,"storage":{},"autoscaling":{"maxReplicas":5,"minReplicas":2}}}`), "", true)
	f.Fuzz(checkBuilders)
}

// checkBuilders is the body of FuzzBuilders (and of FuzzSpecFields once it has made a spec).
func checkBuilders(t *testing.T, specJSON []byte, configData string, caBundle bool) {
	spec, ok := admittedSpec(specJSON)
	if !ok || !userPartsValid(&spec) || len(configData) > revision.MaxBundleBytes {
		return // configData stands for a ConfigMap's value, or an accepted bundle
	}
	before := spec.DeepCopy()
	res := buildForFuzz(spec, configData, caBundle)
	if !equalJSON(before, &res.cr.Spec) || !equalJSON(&res.before.Spec, &res.hub.Spec) {
		t.Fatal("a builder changed the CR")
	}
	for _, obj := range res.children {
		o := obj.(metav1.Object)
		if o.GetName() == "" || o.GetNamespace() != "ns" || !llsd.IsControlledBy(o, res.hub) {
			t.Fatalf("%T: name %q namespace %q, controlled %v", obj, o.GetName(), o.GetNamespace(), llsd.IsControlledBy(o, res.hub))
		}
		if errs := childErrors(obj); len(errs) > 0 {
			t.Fatalf("%T %s would be rejected: %v\nspec: %s", obj, o.GetName(), errs.ToAggregate(), specJSON)
		}
	}
	if errs := statusErrors(&res.status); len(errs) > 0 {
		t.Fatalf("status would be rejected: %v\nspec: %s", errs.ToAggregate(), specJSON)
	}
}

// specSlots each put one fuzzed value (a string s, a number n) into one field of a
// spec. FuzzSpecFields combines two: mutating JSON bytes seldom reaches a field's
// content, and the bugs are in the fields and in how two of them meet.
var specSlots = []func(spec map[string]any, s string, n int64){
	func(m map[string]any, s string, _ int64) { setField(m, s, "server", "containerSpec", "name") },
	func(m map[string]any, s string, _ int64) {
		setField(m, map[string]any{"image": s}, "server", "distribution")
	},
	func(m map[string]any, s string, _ int64) {
		setField(m, map[string]any{"name": s}, "server", "distribution")
	},
	func(m map[string]any, _ string, n int64) { setField(m, n, "server", "containerSpec", "port") },
	func(m map[string]any, _ string, n int64) { setField(m, n, "replicas") },
	func(m map[string]any, _ string, n int64) { setField(m, n, "server", "workers") },
	func(m map[string]any, s string, _ int64) {
		setField(m, s, "server", "podOverrides", "serviceAccountName")
	},
	func(m map[string]any, _ string, n int64) {
		setField(m, n, "server", "podOverrides", "terminationGracePeriodSeconds")
	},
	func(m map[string]any, s string, _ int64) { setField(m, s, "server", "storage", "size") },
	func(m map[string]any, s string, _ int64) { setField(m, s, "server", "storage", "storageClassName") },
	func(m map[string]any, s string, _ int64) { setField(m, s, "server", "storage", "mountPath") },
	func(m map[string]any, s string, _ int64) {
		appendField(m, map[string]any{"name": s, "emptyDir": map[string]any{}}, "server", "podOverrides", "volumes")
	},
	func(m map[string]any, s string, _ int64) {
		appendField(m, map[string]any{"name": "extra", "emptyDir": map[string]any{}}, "server", "podOverrides", "volumes")
		appendField(m, map[string]any{"name": "extra", "mountPath": s}, "server", "podOverrides", "volumeMounts")
	},
	func(m map[string]any, s string, _ int64) {
		appendField(m, map[string]any{"name": s, "value": "v"}, "server", "containerSpec", "env")
	},
	func(m map[string]any, s string, _ int64) {
		setField(m, s, "server", "containerSpec", "resources", "limits", "cpu")
	},
	func(m map[string]any, s string, _ int64) {
		setField(m, s, "server", "containerSpec", "resources", "limits", "memory")
	},
	func(m map[string]any, s string, _ int64) {
		setField(m, s, "server", "containerSpec", "resources", "requests", "cpu")
	},
	func(m map[string]any, s string, n int64) {
		setField(m, intOrString(s, n), "server", "podDisruptionBudget", "minAvailable")
	},
	func(m map[string]any, s string, n int64) {
		setField(m, intOrString(s, n), "server", "podDisruptionBudget", "maxUnavailable")
	},
	func(m map[string]any, s string, n int64) {
		setField(m, map[string]any{"maxReplicas": n, "minReplicas": int64(len(s))}, "server", "autoscaling")
	},
	func(m map[string]any, s string, n int64) {
		appendField(m, map[string]any{"maxSkew": n, "topologyKey": s, "whenUnsatisfiable": "DoNotSchedule"}, "server", "topologySpreadConstraints")
	},
	func(m map[string]any, s string, n int64) {
		uc := map[string]any{"configMapName": s}
		if n%2 != 0 {
			uc["configMapNamespace"] = "shared"
		}
		setField(m, uc, "server", "userConfig")
	},
	func(m map[string]any, s string, _ int64) {
		setField(m, map[string]any{"configMapName": "ca", "configMapKeys": []any{s}}, "server", "tlsConfig", "caBundle")
	},
	func(m map[string]any, s string, _ int64) {
		setField(m, true, "network", "exposeRoute")
		setField(m, s, "network", "ingress", "host")
	},
	func(m map[string]any, s string, _ int64) {
		setField(m, true, "network", "exposeRoute")
		setField(m, s, "network", "ingress", "className")
	},
	func(m map[string]any, s string, _ int64) {
		setField(m, true, "network", "exposeRoute")
		setField(m, s, "network", "ingress", "tlsSecretName")
	},
	func(m map[string]any, s string, _ int64) {
		setField(m, true, "network", "exposeRoute")
		setField(m, "v", "network", "ingress", "annotations", s)
	},
	func(m map[string]any, s string, _ int64) { appendField(m, s, "network", "allowedFrom", "namespaces") },
	func(m map[string]any, s string, _ int64) { appendField(m, s, "network", "allowedFrom", "labels") },
}

// setField sets m[path...] to v, making the maps on the way.
func setField(m map[string]any, v any, path ...string) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// appendField appends v to the list at m[path...].
func appendField(m map[string]any, v any, path ...string) {
	parent := m
	for _, p := range path[:len(path)-1] {
		next, ok := parent[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			parent[p] = next
		}
		parent = next
	}
	last := path[len(path)-1]
	list, _ := parent[last].([]any)
	parent[last] = append(list, v)
}

func intOrString(s string, n int64) any {
	if s == "" {
		return n
	}
	return s
}

// specFromSlots makes the spec of a FuzzSpecFields input.
func specFromSlots(slot1 int, s1 string, slot2 int, s2 string, n int64) []byte {
	spec := map[string]any{"server": map[string]any{"distribution": map[string]any{"name": "starter"}}}
	pick := func(i int) func(map[string]any, string, int64) {
		if i < 0 {
			i = -(i + 1)
		}
		return specSlots[i%len(specSlots)]
	}
	pick(slot1)(spec, s1, n)
	pick(slot2)(spec, s2, n)
	raw, _ := json.Marshal(spec)
	return raw
}

// FuzzSpecFields is FuzzBuilders over specs made of two fields set to fuzzed values.
func FuzzSpecFields(f *testing.F) {
	for i := range specSlots {
		f.Add(i, "a", (i+1)%len(specSlots), "/data", int64(2))
	}
	f.Fuzz(func(t *testing.T, slot1 int, s1 string, slot2 int, s2 string, n int64) {
		checkBuilders(t, specFromSlots(slot1, s1, slot2, s2, n), startingUserConfig, n%3 == 0)
	})
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// FuzzOperatorConfig: any ConfigMap content parses without a panic; overrides that are
// kept are valid image references.
func FuzzOperatorConfig(f *testing.F) {
	f.Add("enableNetworkPolicy:\n  enabled: true\n", "starter: quay.io/a/b:1\n")
	f.Add("[", "starter: [")
	f.Add("enableServiceMonitor: {enabled: no}\nenableNetworkPolicy: {enabled: \"false\"}\n", "")
	f.Add("", "a: ''\nb: 'x y'\nc: docker.io/llamastack/distribution-starter@sha256:"+strings.Repeat("a", 64))
	f.Fuzz(func(t *testing.T, flags, overrides string) {
		dists := revision.BuiltinDistributions()
		cfg := revision.ParseOperatorConfig(&corev1.ConfigMap{Data: map[string]string{revision.KeyFeatureFlags: flags, revision.KeyImageOverrides: overrides}}, dists)
		for name, image := range cfg.ImageOverrides {
			if !revision.ValidImageReference(image) {
				t.Fatalf("override %s=%q kept but invalid", name, image)
			}
			if _, ok := dists[name]; !ok {
				t.Fatalf("override kept for %q, which is not a distribution", name)
			}
		}
		// Whatever is not clear keeps what runs, and says so.
		if (!cfg.NetworkPolicyKnown || !cfg.ServiceMonitorKnown || cfg.KeepAllImages || len(cfg.KeepImages) > 0) && len(cfg.Problems) == 0 {
			t.Fatalf("featureFlags %q / image-overrides %q: something kept as it is without a problem reported", flags, overrides)
		}
	})
}

// FuzzCABundle: arbitrary ConfigMap data never panics the parser, the output is
// deterministic, every block in it is a certificate, and a bundle that is accepted fits
// in the managed ConfigMap.
func FuzzCABundle(f *testing.F) {
	cert := testcert.CertPEMs(f, 1)[0]
	f.Add(cert, "  ", false)
	f.Add(cert+"trailing text", testcert.PEMBlock("PUBLIC KEY", []byte("k")), true)
	f.Add(testcert.PEMBlock("CERTIFICATE", []byte("garbage")), cert+cert, false)
	f.Fuzz(func(t *testing.T, a, b string, optional bool) {
		src := []revision.CASource{{Namespace: "ns", Name: "ca", Data: map[string]string{"a": a, "b": b}, Optional: optional}}
		out1, n, _, err := revision.BuildCABundle(src)
		out2, _, _, _ := revision.BuildCABundle(src)
		if out1 != out2 {
			t.Fatal("not deterministic")
		}
		if err == nil && n > 0 && strings.Count(out1, "-----BEGIN CERTIFICATE-----") != n {
			t.Fatalf("%d certificates reported, %d in the bundle", n, strings.Count(out1, "-----BEGIN CERTIFICATE-----"))
		}
		if err == nil {
			l := &v1alpha1.LlamaStackDistribution{ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Namespace: "ns", UID: "uid"}}
			if errs := configMapErrors(newCABundleConfigMap(hub(l), out1, "h")); len(errs) > 0 {
				t.Fatalf("the managed ConfigMap would be rejected: %v", errs.ToAggregate())
			}
		}
	})
}

// Seed corpus files. Go's corpus format ("go test fuzz v1", then one Go literal per
// argument) is read and written here for the seeds made from the examples and for
// hack/fuzz.sh's check with the API's real validators.

const corpusHeader = "go test fuzz v1"

// readCorpusFile parses one corpus file whose arguments are []byte, string or bool.
func readCorpusFile(path string) ([]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) == 0 || lines[0] != corpusHeader {
		return nil, fmt.Errorf("%s: not a corpus file", path)
	}
	var args []any
	for _, line := range lines[1:] {
		open := strings.IndexByte(line, '(')
		if open < 0 || !strings.HasSuffix(line, ")") {
			return nil, fmt.Errorf("%s: cannot parse %q", path, line)
		}
		typ, lit := line[:open], line[open+1:len(line)-1]
		switch typ {
		case "[]byte", "string":
			s, err := strconv.Unquote(lit)
			if err != nil {
				return nil, fmt.Errorf("%s: %v in %q", path, err, line)
			}
			if typ == "string" {
				args = append(args, s)
			} else {
				args = append(args, []byte(s))
			}
		case "int", "int64":
			v, err := strconv.ParseInt(lit, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %v in %q", path, err, line)
			}
			if typ == "int" {
				args = append(args, int(v))
			} else {
				args = append(args, v)
			}
		case "bool":
			b, err := strconv.ParseBool(lit)
			if err != nil {
				return nil, fmt.Errorf("%s: %v in %q", path, err, line)
			}
			args = append(args, b)
		default:
			return nil, fmt.Errorf("%s: unsupported type %s", path, typ)
		}
	}
	return args, nil
}

// fuzzInput turns the arguments of a FuzzBuilders or FuzzSpecFields input into those
// of checkBuilders.
func fuzzInput(target string, args []any) (specJSON []byte, configData string, caBundle bool, ok bool) {
	switch target {
	case "FuzzBuilders":
		specJSON, ok1 := argAt[[]byte](args, 0)
		configData, ok2 := argAt[string](args, 1)
		caBundle, ok3 := argAt[bool](args, 2)
		return specJSON, configData, caBundle, len(args) == 3 && ok1 && ok2 && ok3
	case "FuzzSpecFields":
		slot1, ok1 := argAt[int](args, 0)
		s1, ok2 := argAt[string](args, 1)
		slot2, ok3 := argAt[int](args, 2)
		s2, ok4 := argAt[string](args, 3)
		n, ok5 := argAt[int64](args, 4)
		return specFromSlots(slot1, s1, slot2, s2, n), startingUserConfig, n%3 == 0, len(args) == 5 && ok1 && ok2 && ok3 && ok4 && ok5
	}
	return nil, "", false, false
}

// argAt returns args[i] if it has type T.
func argAt[T any](args []any, i int) (T, bool) {
	var zero T
	if i >= len(args) {
		return zero, false
	}
	v, ok := args[i].(T)
	return v, ok
}

// formatCorpusFile renders arguments in the corpus format.
func formatCorpusFile(args ...any) []byte {
	var b bytes.Buffer
	b.WriteString(corpusHeader + "\n")
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
		case string:
			fmt.Fprintf(&b, "string(%s)\n", strconv.Quote(v))
		case bool:
			fmt.Fprintf(&b, "bool(%t)\n", v)
		case int:
			fmt.Fprintf(&b, "int(%d)\n", v)
		case int64:
			fmt.Fprintf(&b, "int64(%d)\n", v)
		default:
			panic(fmt.Sprintf("no corpus format for %T", a))
		}
	}
	return b.Bytes()
}

// exampleSeeds returns a seed, by target and name, for every LlamaStackDistribution in
// artifacts/examples (upstream's samples among them; FuzzBuilders, with the data of a
// user ConfigMap the file holds) and every operator ConfigMap in artifacts
// (FuzzOperatorConfig).
func exampleSeeds(t *testing.T) map[string]map[string][]any {
	t.Helper()
	files, err := filepath.Glob("../../artifacts/examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	files = append(files, "../../artifacts/controller/operator_config.yaml")
	out := map[string]map[string][]any{"FuzzBuilders": {}, "FuzzOperatorConfig": {}}
	for _, file := range files {
		f, err := os.Open(file)
		require.NoError(t, err)
		r := utilyaml.NewYAMLReader(bufio.NewReader(f))
		var specs []json.RawMessage
		config := ""
		base := strings.TrimSuffix(filepath.Base(file), ".yaml")
		name := "example-" + strings.TrimPrefix(strings.TrimPrefix(base, "_"), "example-")
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, file)
			var obj struct {
				Kind     string            `json:"kind"`
				Metadata metav1.ObjectMeta `json:"metadata"`
				Spec     json.RawMessage   `json:"spec"`
				Data     map[string]string `json:"data"`
			}
			require.NoError(t, yaml.Unmarshal(doc, &obj), file)
			switch {
			case obj.Kind == "LlamaStackDistribution":
				specs = append(specs, obj.Spec)
			case obj.Kind == "ConfigMap" && obj.Metadata.Name == OperatorConfigMapName:
				out["FuzzOperatorConfig"][name] = []any{obj.Data[revision.KeyFeatureFlags], obj.Data[revision.KeyImageOverrides]}
			case obj.Kind == "ConfigMap":
				if c, ok := obj.Data[llsd.UserConfigKey]; ok {
					config = c
				}
			}
		}
		f.Close()
		for i, s := range specs {
			n := name
			if len(specs) > 1 {
				n += "-" + strconv.Itoa(i+1)
			}
			compact := &bytes.Buffer{}
			require.NoError(t, json.Compact(compact, s))
			out["FuzzBuilders"][n] = []any{compact.Bytes(), config, strings.Contains(compact.String(), `"caBundle"`)}
		}
	}
	require.NotEmpty(t, out["FuzzOperatorConfig"])
	return out
}

// TestFuzzSeedsFromExamples keeps a seed for every example CR and operator ConfigMap,
// so each shipped manifest is fuzzed from. LLSC_UPDATE_SEEDS=1 writes them.
func TestFuzzSeedsFromExamples(t *testing.T) {
	for target, seeds := range exampleSeeds(t) {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, args := range seeds {
			path := filepath.Join(dir, name)
			want := formatCorpusFile(args...)
			if os.Getenv("LLSC_UPDATE_SEEDS") == "1" {
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, os.WriteFile(path, want, 0o644))
				continue
			}
			got, err := os.ReadFile(path)
			require.NoError(t, err, "no seed %s: run LLSC_UPDATE_SEEDS=1 go test -run TestFuzzSeedsFromExamples ./pkg/controller/", path)
			require.Equal(t, string(want), string(got), "seed %s is out of date: run LLSC_UPDATE_SEEDS=1 go test -run TestFuzzSeedsFromExamples ./pkg/controller/", path)
			if target == "FuzzBuilders" {
				spec, ok := admittedSpec(args[0].([]byte))
				require.True(t, ok, "example %s: the harness's mirror of the CRD rejects it", name)
				require.True(t, userPartsValid(&spec), "example %s", name)
			}
		}
	}
}

// TestWriteFuzzObjects writes, for every FuzzBuilders and FuzzSpecFields input in the
// corpus directories listed in $LLSC_FUZZ_CORPUS (separated by ':', each named after its
// target), the CR and what the builders make of it as JSON into $LLSC_FUZZ_OBJECTS, for
// hack/validate to check with the API's real validators. Without those variables it
// does nothing.
func TestWriteFuzzObjects(t *testing.T) {
	dirs, out := os.Getenv("LLSC_FUZZ_CORPUS"), os.Getenv("LLSC_FUZZ_OBJECTS")
	if dirs == "" || out == "" {
		t.Skip("LLSC_FUZZ_CORPUS and LLSC_FUZZ_OBJECTS are not set (hack/fuzz.sh sets them)")
	}
	require.NoError(t, os.MkdirAll(out, 0o755))
	written := 0
	for _, dir := range filepath.SplitList(dirs) {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		for _, e := range entries {
			args, err := readCorpusFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			specJSON, configData, caBundle, ok := fuzzInput(filepath.Base(dir), args)
			if !ok {
				// Left in the cache by an older signature; go test skips it too.
				t.Logf("skipping %s: not the arguments of %s", e.Name(), filepath.Base(dir))
				continue
			}
			spec, ok := admittedSpec(specJSON)
			if !ok || !userPartsValid(&spec) || !json.Valid(specJSON) {
				continue
			}
			res := buildForFuzz(spec, configData, caBundle)
			doc := map[string]any{
				"input":    filepath.Join(filepath.Base(dir), e.Name()),
				"rawSpec":  json.RawMessage(specJSON),
				"cr":       res.cr,
				"children": res.children,
				"status":   res.status,
			}
			raw, err := json.Marshal(doc)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(out, filepath.Base(dir)+"-"+e.Name()+".json"), raw, 0o644))
			written++
		}
	}
	t.Logf("wrote %d inputs to %s", written, out)
}
