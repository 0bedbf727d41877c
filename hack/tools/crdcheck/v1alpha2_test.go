package crdcheck

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// artifacts/crd serves v1alpha1 and v1alpha2 (the storage version), converted by
// the controller's webhook. These tests check v1alpha2 as crd_test.go checks
// v1alpha1, and that adding v1alpha2 left v1alpha1 exactly as the CRD served it
// alone: they generate that CRD from a copy of pkg/apis with v1alpha2 skipped
// (controller-gen's package marker +kubebuilder:skip).
const (
	repoRoot           = "../../.."
	v1alpha2Dir        = "pkg/apis/llamastack/v1alpha2"
	skipMarker         = "// +kubebuilder:skip"
	groupMarker        = "// +groupName=llamastack.io"
	apiVersionV1alpha2 = "llamastack.io/v1alpha2"
	examplesV1alpha2   = examplesDir + "/v1alpha2"
)

var v1alpha1Only struct {
	once sync.Once
	crd  *apiextensionsv1.CustomResourceDefinition
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if v1alpha1OnlyDir != "" {
		_ = os.RemoveAll(v1alpha1OnlyDir)
	}
	os.Exit(code)
}

// v1alpha1OnlyDir is where the copy of the API and the generated CRD are kept for
// the whole test binary, removed by TestMain.
var v1alpha1OnlyDir string

// twoVersionCRD is the CRD of artifacts/crd, with both versions.
func twoVersionCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, ok := loadCRDs(t)[crdName]
	require.True(t, ok, "CRD %s not found in %s", crdName, crdDir)
	return crd
}

// v1alpha1OnlyCRD generates, once per test binary, the CRD without v1alpha2.
func v1alpha1OnlyCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	v1alpha1Only.once.Do(func() {
		v1alpha1Only.crd, v1alpha1Only.err = generateV1alpha1OnlyCRD()
	})
	require.NoError(t, v1alpha1Only.err)
	return v1alpha1Only.crd
}

// generateV1alpha1OnlyCRD copies the module's go.mod, go.sum and pkg/apis to a
// temporary module, adds the skip marker to the v1alpha2 package and runs
// controller-gen (this module's tool) on it.
func generateV1alpha1OnlyCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := os.MkdirTemp("", "crdcheck-v1alpha1-")
	if err != nil {
		return nil, err
	}
	v1alpha1OnlyDir = dir
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := copyFile(filepath.Join(repoRoot, f), filepath.Join(dir, f)); err != nil {
			return nil, err
		}
	}
	apis := filepath.Join(repoRoot, "pkg", "apis")
	err = filepath.WalkDir(apis, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		return copyFile(path, filepath.Join(dir, rel))
	})
	if err != nil {
		return nil, err
	}
	doc := filepath.Join(dir, v1alpha2Dir, "doc.go")
	text, err := os.ReadFile(doc)
	if err != nil {
		return nil, err
	}
	var kept []string
	added := false
	for _, line := range strings.Split(string(text), "\n") {
		if strings.TrimSpace(line) == skipMarker {
			return nil, fmt.Errorf("%s/doc.go has a %q line: v1alpha2 is not served", v1alpha2Dir, skipMarker)
		}
		kept = append(kept, line)
		if strings.TrimSpace(line) == groupMarker {
			kept = append(kept, skipMarker)
			added = true
		}
	}
	if !added {
		return nil, fmt.Errorf("%s/doc.go has no %q line to put %q under", v1alpha2Dir, groupMarker, skipMarker)
	}
	if err := os.WriteFile(doc, []byte(strings.Join(kept, "\n")), 0o644); err != nil {
		return nil, err
	}

	out := filepath.Join(dir, "crd")
	cmd := exec.Command("go", "tool", "controller-gen", "crd",
		"paths="+filepath.Join(dir, "pkg", "apis")+"/...", "output:crd:dir="+out)
	cmd.Dir = ".." // the hack/tools module, whose tool controller-gen is
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("controller-gen: %v\n%s", err, stderr.String())
	}
	j, err := os.ReadFile(filepath.Join(out, "llamastack.io_llamastackdistributions.yaml"))
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(j, crd); err != nil {
		return nil, err
	}
	return crd, nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

func version(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, name string) apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	for _, v := range crd.Spec.Versions {
		if v.Name == name {
			return v
		}
	}
	require.Failf(t, "missing version", "CRD has no version %s", name)
	return apiextensionsv1.CustomResourceDefinitionVersion{}
}

// TestTwoVersionCRD checks the CRD of both versions: accepted by the API server,
// structural, its CEL rules within budget, v1alpha2 the storage version with the
// same subresources, columns and short name, v1alpha1 exactly as the CRD served it
// alone, and conversion by the controller's webhook.
func TestTwoVersionCRD(t *testing.T) {
	crd := twoVersionCRD(t)
	require.Equal(t, crdName, crd.Name)
	require.Len(t, crd.Spec.Versions, 2)
	assert.Equal(t, []string{"llsd"}, crd.Spec.Names.ShortNames)

	t.Run("accepted", func(t *testing.T) { assertCRDAccepted(t, crd) })
	for _, v := range crd.Spec.Versions {
		t.Run("structural/"+v.Name, func(t *testing.T) { assertStructural(t, v) })
		t.Run("CEL/"+v.Name, func(t *testing.T) { assertCELWithinBudget(t, v) })
	}

	v1 := version(t, crd, "v1alpha1")
	v2 := version(t, crd, "v1alpha2")
	assert.True(t, v1.Served)
	assert.False(t, v1.Storage)
	assert.True(t, v2.Served)
	assert.True(t, v2.Storage, "v1alpha2 is the storage version")

	require.NotNil(t, v2.Subresources)
	assert.NotNil(t, v2.Subresources.Status)
	require.NotNil(t, v2.Subresources.Scale)
	assert.Equal(t, ".spec.workload.replicas", v2.Subresources.Scale.SpecReplicasPath)
	assert.Equal(t, ".status.replicas", v2.Subresources.Scale.StatusReplicasPath)
	require.NotNil(t, v2.Subresources.Scale.LabelSelectorPath)
	assert.Equal(t, ".status.selector", *v2.Subresources.Scale.LabelSelectorPath)
	// v1alpha2 has v1alpha1's columns and, after Ready, Progressing's reason: a change
	// rolling out, refused (a user error, the CR staying Ready while it serves) or stuck.
	require.GreaterOrEqual(t, len(v1.AdditionalPrinterColumns), 2)
	wantColumns := slices.Concat(v1.AdditionalPrinterColumns[:2], []apiextensionsv1.CustomResourceColumnDefinition{{
		Name: "Progressing", Type: "string", JSONPath: `.status.conditions[?(@.type=="Progressing")].reason`,
	}}, v1.AdditionalPrinterColumns[2:])
	assert.Equal(t, "Ready", v1.AdditionalPrinterColumns[1].Name)
	assert.Equal(t, wantColumns, v2.AdditionalPrinterColumns)

	// v1alpha1 as the CRD served it alone, but for the storage flag.
	alone := v1alpha1OnlyCRD(t)
	require.Len(t, alone.Spec.Versions, 1)
	want := alone.Spec.Versions[0]
	require.True(t, want.Storage)
	want.Storage = false
	assert.Equal(t, want, v1, "adding v1alpha2 must not change v1alpha1")
	assert.Nil(t, alone.Spec.Conversion, "controller-gen writes no conversion: hack/update-codegen.sh adds it")

	conv := crd.Spec.Conversion
	require.NotNil(t, conv)
	assert.Equal(t, apiextensionsv1.WebhookConverter, conv.Strategy)
	require.NotNil(t, conv.Webhook)
	assert.Equal(t, []string{"v1"}, conv.Webhook.ConversionReviewVersions)
	require.NotNil(t, conv.Webhook.ClientConfig)
	assert.Nil(t, conv.Webhook.ClientConfig.URL)
	assert.Empty(t, conv.Webhook.ClientConfig.CABundle, "the controller or cert-manager sets the CA bundle in the cluster")
	assert.Equal(t, &apiextensionsv1.ServiceReference{
		Namespace: "llama-stack-controller-system",
		Name:      "llama-stack-controller-webhook",
		Path:      ptrTo("/convert"),
		Port:      ptrTo(int32(443)),
	}, conv.Webhook.ClientConfig.Service)
}

// TestTwoVersionCRDSelectableFields: the ConfigMaps a CR names can be looked up by
// field selector in v1alpha2 too.
func TestTwoVersionCRDSelectableFields(t *testing.T) {
	v2 := version(t, twoVersionCRD(t), "v1alpha2")
	var got []string
	for _, f := range v2.SelectableFields {
		got = append(got, f.JSONPath)
	}
	assert.ElementsMatch(t, []string{
		".spec.overrideConfig.configMapName",
		".spec.overrideConfig.configMapNamespace",
		".spec.networking.tls.caBundle.configMapName",
		".spec.networking.tls.caBundle.configMapNamespace",
		".spec.baseConfig.configMapName",
	}, got)
}

// TestV1alpha2Examples admits every LlamaStackDistribution in artifacts/examples/v1alpha2
// and checks that each example file of v1alpha1 has its v1alpha2 version there.
func TestV1alpha2Examples(t *testing.T) {
	s := serveVersion(t, twoVersionCRD(t), "v1alpha2")

	v1files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	require.NoError(t, err)
	for _, file := range v1files {
		hasLLSD := false
		for _, doc := range readDocuments(t, file) {
			hasLLSD = hasLLSD || decodeObject(t, doc)["kind"] == kind
		}
		if hasLLSD {
			name := strings.Replace(filepath.Base(file), "_v1alpha1_", "_v1alpha2_", 1)
			assert.FileExists(t, filepath.Join(examplesV1alpha2, name), "%s has no v1alpha2 version", file)
		}
	}

	forEachExampleCR(t, examplesV1alpha2, func(t *testing.T, u unstructured.Unstructured) {
		assert.Equal(t, apiVersionV1alpha2, u.GetAPIVersion())
		a := s.create(t, u.Object)
		assert.Empty(t, a.errs.ToAggregate())
		assert.Empty(t, a.unknownFields, "fields outside the schema: kubectl's strict field validation rejects them")
	})
}

// forEachExampleCR runs f, as a subtest named after the file, the document and the
// object, on every LlamaStackDistribution of the YAML files in dir, and fails when
// there is none.
func forEachExampleCR(t *testing.T, dir string, f func(t *testing.T, u unstructured.Unstructured)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	total := 0
	for _, file := range files {
		for i, doc := range readDocuments(t, file) {
			obj := decodeObject(t, doc)
			if obj["kind"] != kind {
				continue
			}
			total++
			u := unstructured.Unstructured{Object: obj}
			t.Run(fmt.Sprintf("%s#%d/%s", filepath.Base(file), i, u.GetName()), func(t *testing.T) { f(t, u) })
		}
	}
	assert.Positive(t, total, "no LlamaStackDistribution in %s", dir)
}

// TestV1alpha2RulesNeedNoDefaults runs the CEL rules over every v1alpha2 example
// without v1alpha2's defaults, as the API server validates an object that it reads from
// one stored in v1alpha1 (made before the upgrade) and converts: it applies the defaults
// of the version an object is stored in, not those of the version it converts it to. A
// rule that reads a defaulted field without has() fails there, on every write of the
// object, its status included (the CA bundle example did, until the TLS rule tested
// has(self.enabled)).
func TestV1alpha2RulesNeedNoDefaults(t *testing.T) {
	s := serveVersion(t, twoVersionCRD(t), "v1alpha2")
	forEachExampleCR(t, examplesV1alpha2, func(t *testing.T, u unstructured.Unstructured) {
		u.SetNamespace("default")
		assert.Empty(t, s.runCEL(context.Background(), u.Object, nil).ToAggregate())
	})
}

// newLLSDv2 builds a v1alpha2 LlamaStackDistribution named name with spec given as YAML.
func newLLSDv2(t *testing.T, name, spec string) map[string]any {
	t.Helper()
	obj := newLLSD(t, name, spec)
	obj["apiVersion"] = apiVersionV1alpha2
	return obj
}

const validV2 = `
distribution:
  name: starter
`

// TestV1alpha2Admission creates v1alpha2 objects that the schema and its CEL rules
// must admit or reject: each rule new in v1alpha2, and each v1alpha1 rule at its new
// home.
func TestV1alpha2Admission(t *testing.T) {
	cases := map[string]admissionCase{
		"minimal": {spec: validV2},
		"image alone": {spec: `
distribution: {image: quay.io/example/llama-stack:1.0}`},

		// v1alpha1's rules at their v1alpha2 homes.
		"distribution with both name and image": {
			spec: "distribution: {name: starter, image: quay.io/x:1}",
			want: []string{"spec.distribution", "Only one of name or image can be specified"},
		},
		"distribution with neither": {
			spec:    "distribution: {}",
			want:    []string{"spec.distribution", "One of name or image must be specified"},
			notWant: []string{"Only one of"},
		},
		"image with a space": {
			spec: `distribution: {image: " quay.io/x:1"}`,
			want: []string{"spec.distribution.image", "should match"},
		},
		"name of 49 characters": {
			name: strings.Repeat("a", 49), spec: validV2,
			want: []string{"metadata.name must be at most 48 characters"},
		},
		"name not a DNS-1035 label": {
			name: "1abc", spec: validV2,
			want: []string{"must be a DNS-1035 label"},
		},
		"autoscaling minReplicas above maxReplicas": {
			spec: validV2 + "workload:\n  autoscaling: {minReplicas: 5, maxReplicas: 2}\n",
			want: []string{"spec.workload.autoscaling", "minReplicas must be less than or equal to maxReplicas"},
		},
		"PDB with both budgets": {
			spec: validV2 + "workload:\n  podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}\n",
			want: []string{"spec.workload.podDisruptionBudget", "Only one of minAvailable or maxUnavailable can be specified"},
		},
		"PDB maxUnavailable over 100%": {
			spec: validV2 + "workload:\n  podDisruptionBudget: {maxUnavailable: 150%}\n",
			want: []string{"spec.workload.podDisruptionBudget", "maxUnavailable must be a non-negative integer or a percentage"},
		},
		"PDB minAvailable negative": {
			spec: validV2 + "workload:\n  podDisruptionBudget: {minAvailable: -1}\n",
			want: []string{"spec.workload.podDisruptionBudget", "minAvailable must be a non-negative integer or a percentage"},
		},
		"storage size zero": {
			spec: validV2 + "workload:\n  storage: {size: \"0\"}\n",
			want: []string{"spec.workload.storage.size", "storage.size must be more than zero"},
		},
		"storage mountPath relative": {
			spec: validV2 + "workload:\n  storage: {mountPath: data}\n",
			want: []string{"spec.workload.storage.mountPath", "storage.mountPath must be an absolute path"},
		},
		"storage access mode unknown": {
			spec: validV2 + "workload:\n  storage: {accessModes: [ReadWriteSometimes]}\n",
			want: []string{"spec.workload.storage.accessModes", "accessModes may hold"},
		},
		"volumeMount relative": {
			spec: validV2 + `
workload:
  overrides:
    volumes: [{name: a, emptyDir: {}}]
    volumeMounts: [{name: a, mountPath: data}]`,
			want: []string{"spec.workload.overrides.volumeMounts[0].mountPath", "mountPath must be an absolute path"},
		},
		"container name not a DNS label": {
			spec: validV2 + "workload:\n  overrides: {containerName: Bad_Name}\n",
			want: []string{"spec.workload.overrides.containerName", "should match"},
		},
		"an HTTPRoute": {
			spec: validV2 + "networking:\n  expose:\n    type: HTTPRoute\n    hostname: llama.example.com\n" +
				"    httpRoute: {parentRefs: [{name: gw, namespace: infra, sectionName: https}], path: /llama}\n",
		},
		"type HTTPRoute without httpRoute": {
			spec: validV2 + "networking:\n  expose: {type: HTTPRoute}\n",
			want: []string{"spec.networking.expose", "httpRoute is set with type HTTPRoute, and only then"},
		},
		"httpRoute without type HTTPRoute": {
			spec: validV2 + "networking:\n  expose: {httpRoute: {parentRefs: [{name: gw}]}}\n",
			want: []string{"spec.networking.expose", "httpRoute is set with type HTTPRoute, and only then"},
		},
		"an HTTPRoute with an Ingress class": {
			spec: validV2 + "networking:\n  expose: {type: HTTPRoute, className: nginx, httpRoute: {parentRefs: [{name: gw}]}}\n",
			want: []string{"spec.networking.expose", "className and tlsSecretName are Ingress settings"},
		},
		"an HTTPRoute with an Ingress TLS Secret": {
			spec: validV2 + "networking:\n  expose: {type: HTTPRoute, tlsSecretName: tls, httpRoute: {parentRefs: [{name: gw}]}}\n",
			want: []string{"spec.networking.expose", "className and tlsSecretName are Ingress settings"},
		},
		"an HTTPRoute attached to nothing": {
			spec: validV2 + "networking:\n  expose: {type: HTTPRoute, httpRoute: {parentRefs: []}}\n",
			want: []string{"spec.networking.expose.httpRoute.parentRefs", "should have at least 1 items"},
		},
		"an HTTPRoute path not normalized": {
			spec: validV2 + "networking:\n  expose: {type: HTTPRoute, httpRoute: {parentRefs: [{name: gw}], path: /a/../b}}\n",
			want: []string{"spec.networking.expose.httpRoute.path", "normalized absolute path"},
		},
		"an HTTPRoute path not absolute": {
			spec: validV2 + "networking:\n  expose: {type: HTTPRoute, httpRoute: {parentRefs: [{name: gw}], path: llama}}\n",
			want: []string{"spec.networking.expose.httpRoute.path", "should match"},
		},
		"a Gateway name that is no name": {
			spec: validV2 + "networking:\n  expose: {type: HTTPRoute, httpRoute: {parentRefs: [{name: My_Gateway}]}}\n",
			want: []string{"spec.networking.expose.httpRoute.parentRefs[0].name", "should match"},
		},
		"an expose type not known": {
			spec: validV2 + "networking:\n  expose: {type: LoadBalancer}\n",
			want: []string{"spec.networking.expose.type", "Unsupported value"},
		},
		"a Route with the defaults": {spec: validV2 + "networking:\n  expose: {type: Route}\n"},
		"a Route with a host, edge, plain HTTP allowed": {
			spec: validV2 + "networking:\n  expose: {type: Route, hostname: llama.apps.example.com, route: {termination: Edge, insecureEdgeTerminationPolicy: Allow}}\n",
		},
		"a reencrypting Route to a TLS server": {
			spec: validV2 + "networking:\n  tls: {enabled: true, secretName: cert}\n  expose: {type: Route, route: {termination: Reencrypt}}\n",
		},
		"a passthrough Route to a TLS server": {
			spec: validV2 + "networking:\n  tls: {enabled: true, secretName: cert}\n  expose: {type: Route, route: {termination: Passthrough, insecureEdgeTerminationPolicy: None}}\n",
		},
		"route without type Route": {
			spec: validV2 + "networking:\n  expose: {route: {termination: Edge}}\n",
			want: []string{"spec.networking.expose", "route is set with type Route only"},
		},
		"a Route with an Ingress class": {
			spec: validV2 + "networking:\n  expose: {type: Route, className: nginx}\n",
			want: []string{"spec.networking.expose", "className and tlsSecretName are Ingress settings: a Route"},
		},
		"a Route with an Ingress TLS Secret": {
			spec: validV2 + "networking:\n  expose: {type: Route, tlsSecretName: tls}\n",
			want: []string{"spec.networking.expose", "className and tlsSecretName are Ingress settings: a Route"},
		},
		"a Route for a wildcard host": {
			spec: validV2 + "networking:\n  expose: {type: Route, hostname: \"*.apps.example.com\"}\n",
			want: []string{"spec.networking.expose", "a Route serves one host name"},
		},
		"an edge Route to a TLS server": {
			spec: validV2 + "networking:\n  tls: {enabled: true, secretName: cert}\n  expose: {type: Route, route: {termination: Edge}}\n",
			want: []string{"spec.networking", "expose.route.termination Edge forwards plain HTTP"},
		},
		"a reencrypting Route to a plain server": {
			spec: validV2 + "networking:\n  expose: {type: Route, route: {termination: Reencrypt}}\n",
			want: []string{"spec.networking", "Reencrypt and Passthrough reach a server that serves TLS"},
		},
		"a passthrough Route allowing plain HTTP": {
			spec: validV2 + "networking:\n  tls: {enabled: true, secretName: cert}\n  expose: {type: Route, route: {termination: Passthrough, insecureEdgeTerminationPolicy: Allow}}\n",
			want: []string{"spec.networking.expose.route", "a Passthrough route cannot allow plain HTTP"},
		},
		"a Route termination not known": {
			spec: validV2 + "networking:\n  expose: {type: Route, route: {termination: edge}}\n",
			want: []string{"spec.networking.expose.route.termination", "Unsupported value"},
		},
		"ingress annotation key not a qualified name": {
			spec: validV2 + "networking:\n  expose: {annotations: {\"bad key!\": v}}\n",
			want: []string{"spec.networking.expose.annotations", "annotation keys must be qualified names"},
		},
		"CA bundle key with ..": {
			spec: validV2 + "networking:\n  tls:\n    caBundle: {configMapName: ca, configMapKeys: [a..b]}\n",
			want: []string{"spec.networking.tls.caBundle.configMapKeys[0]", "a ConfigMap key must not contain '..'"},
		},
		"baseConfig key with ..": {
			spec: "distribution: {image: quay.io/x:1}\nbaseConfig: {configMapName: base, key: a..b}\n",
			want: []string{"spec.baseConfig.key", "a ConfigMap key must not contain '..'"},
		},
		"port 0 written out": {
			spec: validV2 + "networking: {port: 0}\n",
			want: []string{"spec.networking.port", "should be greater than or equal to 1"},
		},
		"replicas -1": {
			spec: validV2 + "workload: {replicas: -1}\n",
			want: []string{"spec.workload.replicas", "should be greater than or equal to 0"},
		},
		"replicas 0": {spec: validV2 + "workload: {replicas: 0}\n"},

		// overrideConfig is the whole config.
		"overrideConfig alone": {spec: validV2 + "overrideConfig: {configMapName: run}\n"},
		"overrideConfig with providers": {
			spec: validV2 + "overrideConfig: {configMapName: run}\nproviders:\n  inference: [{provider: vllm}]\n",
			want: []string{"overrideConfig is the whole config.yaml as given: it cannot be combined with providers, resources, storage or disabled"},
		},
		"overrideConfig with resources": {
			spec: validV2 + "overrideConfig: {configMapName: run}\nresources:\n  models: [{name: m}]\n",
			want: []string{"it cannot be combined with providers, resources, storage or disabled"},
		},
		"overrideConfig with storage": {
			spec: validV2 + "overrideConfig: {configMapName: run}\nstorage:\n  kv: {type: sqlite}\n",
			want: []string{"it cannot be combined with providers, resources, storage or disabled"},
		},
		"overrideConfig with disabled": {
			spec: validV2 + "overrideConfig: {configMapName: run}\ndisabled: [safety]\n",
			want: []string{"it cannot be combined with providers, resources, storage or disabled"},
		},
		"overrideConfig with baseConfig": {
			spec: validV2 + "overrideConfig: {configMapName: run}\nbaseConfig: {configMapName: base}\n",
			want: []string{"overrideConfig is the whole config.yaml as given: it cannot be combined with baseConfig"},
		},

		// An empty provider list says nothing (it would keep the base's providers).
		"an empty provider list": {
			spec: validV2 + "providers:\n  inference: []\n",
			want: []string{"spec.providers.inference", "an empty list would keep the base config's providers", "disabled"},
		},
		"an empty skills list": {
			spec: validV2 + "providers:\n  skills: []\n",
			want: []string{"spec.providers.skills", "an empty list would keep the base config's providers"},
		},
		// Resource names the server registers as given.
		"a model name with a newline": {
			spec: validV2 + "resources:\n  models: [{name: \"llama\\nx\"}]\n",
			want: []string{"spec.resources.models[0].name", "must not contain a control character"},
		},
		"a provider model id with a tab": {
			spec: validV2 + "resources:\n  models: [{name: llama, providerModelId: \"meta\\tx\"}]\n",
			want: []string{"spec.resources.models[0].providerModelId", "must not contain a control character"},
		},
		"a model name with spaces and slashes": {spec: validV2 + "resources:\n  models: [{name: \"meta-llama/Llama 3\"}]\n"},

		// Provider ids.
		"one provider without id": {spec: validV2 + "providers:\n  inference: [{provider: vllm, endpoint: \"http://vllm:8000/v1\"}]\n"},
		"two providers with ids":  {spec: validV2 + "providers:\n  inference: [{id: a, provider: vllm}, {id: b, provider: ollama}]\n"},
		"two providers, one without id": {
			spec: validV2 + "providers:\n  inference: [{id: a, provider: vllm}, {provider: ollama}]\n",
			want: []string{"spec.providers.inference", "every provider of a list of two or more needs an id"},
		},
		"two vector stores without ids": {
			spec: validV2 + "providers:\n  vectorIo: [{provider: inline::faiss}, {provider: pgvector}]\n",
			want: []string{"spec.providers.vectorIo", "every provider of a list of two or more needs an id"},
		},
		"same id in two APIs": {
			spec: validV2 + "providers:\n  inference: [{id: shared, provider: vllm}]\n  safety: [{id: shared, provider: inline::llama-guard}]\n",
			want: []string{"spec.providers", "provider ids must be unique across all APIs"},
		},
		"same id twice in one API": {
			spec: validV2 + "providers:\n  toolRuntime: [{id: t, provider: tavily-search}, {id: t, provider: brave-search}]\n",
			want: []string{"spec.providers", "provider ids must be unique across all APIs"},
		},
		"defaulted ids that collide across APIs": {
			spec: validV2 + "providers:\n  agents: [{provider: inline::meta-reference}]\n  eval: [{provider: inline::meta-reference}]\n",
			want: []string{"spec.providers", "provider ids must be unique across all APIs"},
		},
		"defaulted ids that collide across the OGX APIs": {
			spec: validV2 + "providers:\n  messages: [{provider: inline::builtin}]\n  skills: [{provider: inline::builtin}]\n",
			want: []string{"spec.providers", "provider ids must be unique across all APIs"},
		},
		"OGX APIs with distinct ids": {
			spec: validV2 + "providers:\n  interactions: [{id: interactions, provider: inline::builtin}]\n  messages: [{id: messages, provider: inline::builtin}]\n  skills: [{id: skills, provider: inline::builtin}]\n",
		},
		"two skills providers, one without id": {
			spec: validV2 + "providers:\n  skills: [{id: a, provider: inline::builtin}, {provider: inline::builtin}]\n",
			want: []string{"spec.providers.skills", "every provider of a list of two or more needs an id"},
		},
		"defaulted id colliding with an explicit one": {
			spec: validV2 + "providers:\n  inference: [{provider: remote::vllm}]\n  files: [{id: vllm, provider: inline::localfs}]\n",
			want: []string{"spec.providers", "provider ids must be unique across all APIs"},
		},
		"distinct defaulted ids": {spec: validV2 + "providers:\n  inference: [{provider: vllm}]\n  safety: [{provider: inline::llama-guard}]\n  files: [{provider: inline::localfs}]\n"},
		"provider type with unknown prefix": {
			spec: validV2 + "providers:\n  inference: [{provider: \"other::vllm\"}]\n",
			want: []string{"spec.providers.inference[0].provider", "should match"},
		},
		"endpoint without scheme": {
			spec: validV2 + "providers:\n  inference: [{provider: vllm, endpoint: \"vllm:8000\"}]\n",
			want: []string{"spec.providers.inference[0].endpoint", "should match"},
		},
		"provider with secrets and settings": {spec: validV2 + `
providers:
  inference:
  - provider: vllm
    apiKey: {secretKeyRef: {name: vllm, key: token}}
    secretRefs: {tls_cert: {secretKeyRef: {name: vllm, key: cert}}}
    settings: {max_tokens: 4096, network: {tls: {verify: false}}}`},
		"apiKey and secretRefs.api_key": {
			spec: validV2 + `
providers:
  inference:
  - provider: openai
    apiKey: {secretKeyRef: {name: a, key: k}}
    secretRefs: {api_key: {secretKeyRef: {name: b, key: k}}}`,
			want: []string{"spec.providers.inference[0]", "apiKey and secretRefs.api_key would be the same environment variable"},
		},
		"secretRefs key not snake_case": {
			spec: validV2 + `
providers:
  inference:
  - provider: openai
    secretRefs: {Api-Key: {secretKeyRef: {name: b, key: k}}}`,
			want: []string{"spec.providers.inference[0].secretRefs", "secretRefs keys must be snake_case config field names"},
		},
		"secretKeyRef without key": {
			spec: validV2 + `
providers:
  inference:
  - provider: openai
    apiKey: {secretKeyRef: {name: a}}`,
			want: []string{"spec.providers.inference[0].apiKey.secretKeyRef.key", "Required value"},
		},

		// Disabled APIs.
		"disabled alone": {spec: validV2 + "disabled: [postTraining, telemetry]\n"},
		"disabled API with providers": {
			spec: validV2 + "disabled: [safety]\nproviders:\n  safety: [{provider: inline::llama-guard}]\n",
			want: []string{"spec.disabled", "an API in disabled cannot also have providers"},
		},
		"disabled API, providers of another": {spec: validV2 + "disabled: [safety]\nproviders:\n  inference: [{provider: vllm}]\n"},
		"disabled OGX APIs":                  {spec: validV2 + "disabled: [interactions, messages, skills]\n"},
		"disabled messages with providers": {
			spec: validV2 + "disabled: [messages]\nproviders:\n  messages: [{provider: inline::builtin}]\n",
			want: []string{"spec.disabled", "an API in disabled cannot also have providers"},
		},
		"disabled skills, providers of interactions": {spec: validV2 + "disabled: [skills]\nproviders:\n  interactions: [{provider: inline::builtin}]\n"},
		"every API disabled":                         {spec: validV2 + "disabled: [inference, safety, vectorIo, toolRuntime, files, agents, responses, batches, datasetio, eval, scoring, postTraining, fileProcessors, telemetry, interactions, messages, skills]\n"},
		"disabled unknown API": {
			spec: validV2 + "disabled: [vector_io]\n",
			want: []string{"spec.disabled[0]", "Unsupported value"},
		},
		"disabled inference with models": {
			spec: validV2 + "disabled: [inference]\nresources:\n  models: [{name: m}]\n",
			want: []string{"spec.resources", "resources need their API"},
		},
		"disabled safety with shields": {
			spec: validV2 + "disabled: [safety]\nresources:\n  shields: [{name: s}]\n",
			want: []string{"spec.resources", "resources need their API"},
		},
		"disabled toolRuntime with tools": {
			spec: validV2 + "disabled: [toolRuntime]\nresources:\n  tools: [{name: builtin::websearch}]\n",
			want: []string{"spec.resources", "resources need their API"},
		},

		// Resources naming providers.
		"model naming a CR inference provider": {spec: validV2 + `
providers:
  inference: [{id: a, provider: vllm}, {id: b, provider: ollama}]
resources:
  models: [{name: m1, provider: b}, {name: m2}]`},
		"model naming the defaulted id": {spec: validV2 + `
providers:
  inference: [{provider: remote::vllm}]
resources:
  models: [{name: m1, provider: vllm}]`},
		"model naming a provider the CR does not have": {
			spec: validV2 + `
providers:
  inference: [{id: a, provider: vllm}]
resources:
  models: [{name: m1, provider: ollama}]`,
			want: []string{"spec.resources.models", "resources.models[].provider must be the id of one of providers.inference"},
		},
		"model naming a safety provider": {
			spec: validV2 + `
providers:
  inference: [{id: a, provider: vllm}]
  safety: [{id: guard, provider: inline::llama-guard}]
resources:
  models: [{name: m1, provider: guard}]`,
			want: []string{"spec.resources.models", "resources.models[].provider must be the id of one of providers.inference"},
		},
		"model naming a base provider (no CR inference providers)": {spec: validV2 + `
resources:
  models: [{name: m1, provider: ollama}]`},
		"shield naming a provider the CR does not have": {
			spec: validV2 + `
providers:
  safety: [{id: guard, provider: inline::llama-guard}]
resources:
  shields: [{name: s, provider: other}]`,
			want: []string{"spec.resources.shields", "resources.shields[].provider must be the id of one of providers.safety"},
		},
		"tool naming a provider the CR does not have": {
			spec: validV2 + `
providers:
  toolRuntime: [{id: tavily, provider: tavily-search}]
resources:
  tools: [{name: builtin::websearch, provider: brave}]`,
			want: []string{"spec.resources.tools", "resources.tools[].provider must be the id of one of providers.toolRuntime"},
		},
		"two models of one name": {
			spec: validV2 + "resources:\n  models: [{name: m}, {name: m}]\n",
			want: []string{"spec.resources.models[1]", "Duplicate value"},
		},
		"model type unknown": {
			spec: validV2 + "resources:\n  models: [{name: m, modelType: vision}]\n",
			want: []string{"spec.resources.models[0].modelType", "Unsupported value"},
		},

		// State storage.
		"kv redis": {spec: validV2 + "storage:\n  kv: {type: redis, redis: {host: redis}}\n"},
		"kv redis without its block": {
			spec: validV2 + "storage:\n  kv: {type: redis}\n",
			want: []string{"spec.storage.kv", "kv.redis is required with type redis, and allowed only with it"},
		},
		"kv redis block with type sqlite": {
			spec: validV2 + "storage:\n  kv: {redis: {host: redis}}\n",
			want: []string{"spec.storage.kv", "kv.redis is required with type redis, and allowed only with it"},
		},
		"kv redis without host": {
			spec: validV2 + "storage:\n  kv: {type: redis, redis: {port: 6380}}\n",
			want: []string{"spec.storage.kv.redis.host", "Required value"},
		},
		"kv postgres without its block": {
			spec: validV2 + "storage:\n  kv: {type: postgres}\n",
			want: []string{"spec.storage.kv", "kv.postgres is required with type postgres, and allowed only with it"},
		},
		"sql postgres": {spec: validV2 + "storage:\n  sql: {type: postgres, postgres: {host: pg, user: llama, passwordSecretRef: {name: pg, key: password}}}\n"},
		"sql postgres without its block": {
			spec: validV2 + "storage:\n  sql: {type: postgres}\n",
			want: []string{"spec.storage.sql", "sql.postgres is required with type postgres, and allowed only with it"},
		},
		"sql postgres block with type sqlite": {
			spec: validV2 + "storage:\n  sql: {type: sqlite, postgres: {host: pg, user: llama}}\n",
			want: []string{"spec.storage.sql", "sql.postgres is required with type postgres, and allowed only with it"},
		},
		"sql postgres without user": {
			spec: validV2 + "storage:\n  sql: {type: postgres, postgres: {host: pg}}\n",
			want: []string{"spec.storage.sql.postgres.user", "Required value"},
		},
		"sql redis": {
			spec: validV2 + "storage:\n  sql: {type: redis}\n",
			want: []string{"spec.storage.sql.type", "Unsupported value"},
		},

		// Server TLS.
		"tls enabled with a Secret": {spec: validV2 + "networking:\n  tls: {enabled: true, secretName: cert}\n"},
		"tls enabled without a Secret": {
			spec: validV2 + "networking:\n  tls: {enabled: true}\n",
			want: []string{"spec.networking.tls", "tls.secretName is required when tls.enabled is true"},
		},
		"tls caBundle only": {spec: validV2 + "networking:\n  tls: {caBundle: {configMapName: ca}}\n"},
	}

	// Every rule of the v1alpha2 schema has a case that expects its message.
	var wants []string
	for _, tc := range cases {
		wants = append(wants, tc.want...)
	}
	for _, msg := range ruleMessages(version(t, twoVersionCRD(t), "v1alpha2").Schema.OpenAPIV3Schema) {
		covered := false
		for _, w := range wants {
			covered = covered || (len(w) >= 15 && strings.Contains(msg, w))
		}
		assert.True(t, covered, "no case rejects an object with the rule message %q", msg)
	}

	serveVersion(t, twoVersionCRD(t), "v1alpha2").admitCases(t, cases, newLLSDv2)
}

// TestV1alpha2Defaults checks the defaults the API server fills in on create.
func TestV1alpha2Defaults(t *testing.T) {
	s := serveVersion(t, twoVersionCRD(t), "v1alpha2")
	get := func(t *testing.T, obj map[string]any, path ...string) any {
		t.Helper()
		v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
		require.NoError(t, err)
		require.True(t, found, "%v not set", path)
		return v
	}

	// workload defaults to {} so that replicas (the scale subresource's path) is
	// always there.
	a := s.create(t, newLLSDv2(t, "defaults", validV2))
	require.Empty(t, a.errs.ToAggregate())
	assert.EqualValues(t, 1, get(t, a.obj.Object, "spec", "workload", "replicas"))
	_, found, err := unstructured.NestedFieldNoCopy(a.obj.Object, "spec", "networking")
	require.NoError(t, err)
	assert.False(t, found, "networking has no default")

	a = s.create(t, newLLSDv2(t, "defaults", `
distribution: {image: quay.io/x:1}
baseConfig: {configMapName: base}
networking:
  expose: {}
  tls: {caBundle: {configMapName: ca}}
storage:
  kv: {type: redis, redis: {host: redis}}
  sql: {type: postgres, postgres: {host: pg, user: llama}}
workload: {replicas: 0}
`))
	require.Empty(t, a.errs.ToAggregate())
	o := a.obj.Object
	assert.EqualValues(t, 0, get(t, o, "spec", "workload", "replicas"), "replicas 0 is kept")
	assert.Equal(t, "config.yaml", get(t, o, "spec", "baseConfig", "key"))
	assert.Equal(t, true, get(t, o, "spec", "networking", "expose", "enabled"), "expose: {} exposes")
	assert.Equal(t, false, get(t, o, "spec", "networking", "tls", "enabled"))
	assert.EqualValues(t, 6379, get(t, o, "spec", "storage", "kv", "redis", "port"))
	assert.EqualValues(t, 5432, get(t, o, "spec", "storage", "sql", "postgres", "port"))

	a = s.create(t, newLLSDv2(t, "defaults", validV2+"storage:\n  kv: {}\n  sql: {}\n"))
	require.Empty(t, a.errs.ToAggregate())
	assert.Equal(t, "sqlite", get(t, a.obj.Object, "spec", "storage", "kv", "type"))
	assert.Equal(t, "sqlite", get(t, a.obj.Object, "spec", "storage", "sql", "type"))
}

// TestV1alpha2Status writes a v1alpha2 status through the status subresource: v1alpha1's
// status plus resolvedDistribution.
func TestV1alpha2Status(t *testing.T) {
	s := serveVersion(t, twoVersionCRD(t), "v1alpha2")
	obj := newLLSDv2(t, "sample", validV2)
	j, err := yaml.YAMLToJSON([]byte(validStatus + `
resolvedDistribution:
  image: docker.io/llamastack/distribution-starter:0.3.4
  serverVersion: 0.3.4
  configSource: distribution
  configHash: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
`))
	require.NoError(t, err)
	obj["status"] = decodeObject(t, j)
	a := s.updateStatus(t, obj)
	assert.Empty(t, a.errs.ToAggregate())
	assert.Empty(t, a.unknownFields)
	img, _, err := unstructured.NestedString(a.obj.Object, "status", "resolvedDistribution", "image")
	require.NoError(t, err)
	assert.Equal(t, "docker.io/llamastack/distribution-starter:0.3.4", img)
}

// TestV1alpha2Settings: provider settings are free-form and kept as given.
func TestV1alpha2Settings(t *testing.T) {
	s := serveVersion(t, twoVersionCRD(t), "v1alpha2")
	a := s.create(t, newLLSDv2(t, "settings", validV2+`
providers:
  inference:
  - provider: vllm
    settings:
      max_tokens: 4096
      network: {tls: {verify: false}, headers: {X-A: b}}
      allowed_models: [a, b]
`))
	require.Empty(t, a.errs.ToAggregate())
	assert.Empty(t, a.unknownFields)
	providers, _, err := unstructured.NestedSlice(a.obj.Object, "spec", "providers", "inference")
	require.NoError(t, err)
	require.Len(t, providers, 1)
	assert.Equal(t, map[string]any{
		"max_tokens":     int64(4096),
		"network":        map[string]any{"tls": map[string]any{"verify": false}, "headers": map[string]any{"X-A": "b"}},
		"allowed_models": []any{"a", "b"},
	}, providers[0].(map[string]any)["settings"])
}

// ruleMessages lists the messages of the x-kubernetes-validations rules in a schema.
func ruleMessages(s *apiextensionsv1.JSONSchemaProps) []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, r := range s.XValidations {
		out = append(out, r.Message)
	}
	for _, p := range s.Properties {
		out = append(out, ruleMessages(&p)...)
	}
	if s.Items != nil {
		out = append(out, ruleMessages(s.Items.Schema)...)
	}
	if s.AdditionalProperties != nil {
		out = append(out, ruleMessages(s.AdditionalProperties.Schema)...)
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// The rules on overrideConfig, which a v1alpha1 write (server.userConfig) could break
// before the admission policy refused it, judge a create in full and an update that
// brings one of their fields, but not an update that leaves their fields as they are:
// the scale subresource (spec.workload.replicas) and other edits of an object stored
// in that state are admitted.
func TestV1alpha2OverrideConfigRulesRatchet(t *testing.T) {
	s := serveVersion(t, twoVersionCRD(t), "v1alpha2")
	const (
		withProviders = "overrideConfig is the whole config.yaml as given: it cannot be combined with providers, resources, storage or disabled"
		withBase      = "overrideConfig is the whole config.yaml as given: it cannot be combined with baseConfig"
		override      = "overrideConfig: {configMapName: run}\n"
		providers     = "providers:\n  inference: [{provider: vllm}]\n"
		base          = "baseConfig: {configMapName: base}\n"
	)
	obj := func(spec string) map[string]any { return newLLSDv2(t, "app", validV2+spec) }
	cases := map[string]struct {
		old, spec string
		want      string
	}{
		"replicas of an object with overrideConfig and providers": {
			old: override + providers, spec: override + providers + "workload: {replicas: 3}\n",
		},
		"workers and the ConfigMap's name of an object with overrideConfig and providers": {
			old: override + providers, spec: "overrideConfig: {configMapName: other}\n" + providers + "workload: {workers: 2}\n",
		},
		"replicas of an object with overrideConfig and baseConfig": {
			old: override + base, spec: override + base + "workload: {replicas: 0}\n",
		},
		"providers removed": {old: override + providers, spec: override},
		"overrideConfig added to providers": {
			old: providers, spec: override + providers, want: withProviders,
		},
		"providers added to overrideConfig": {
			old: override, spec: override + providers, want: withProviders,
		},
		"storage added to overrideConfig and providers": {
			old: override + providers, spec: override + providers + "storage: {kv: {type: sqlite}}\n", want: withProviders,
		},
		"overrideConfig added to baseConfig": {
			old: base, spec: override + base, want: withBase,
		},
		"baseConfig added to overrideConfig and providers": {
			old: override + providers, spec: override + providers + base, want: withBase,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := s.update(t, obj(tc.old), obj(tc.spec))
			if tc.want == "" {
				assert.Empty(t, a.errs)
				return
			}
			assert.ErrorContains(t, a.errs.ToAggregate(), tc.want)
			assert.Len(t, a.errs, 1, "%v", a.errs)
		})
	}
	// A create is judged in full.
	assert.ErrorContains(t, s.create(t, obj(override+providers)).errs.ToAggregate(), withProviders)
	assert.ErrorContains(t, s.create(t, obj(override+base)).errs.ToAggregate(), withBase)
}
