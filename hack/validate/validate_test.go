package validate

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	crvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/apps"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	"k8s.io/kubernetes/pkg/apis/autoscaling"
	_ "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	autoscalingvalidation "k8s.io/kubernetes/pkg/apis/autoscaling/validation"
	"k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/networking"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	networkingvalidation "k8s.io/kubernetes/pkg/apis/networking/validation"
	"k8s.io/kubernetes/pkg/apis/policy"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	policyvalidation "k8s.io/kubernetes/pkg/apis/policy/validation"
	"sigs.k8s.io/yaml"
)

// Paths are relative to this directory, where go test runs.
const (
	crdFile      = "../../artifacts/crd/llamastack.io_llamastackdistributions.yaml"
	versionsFile = "../cluster/versions.env"
	// clusterToolsGoMod is the module the local control plane is built from.
	clusterToolsGoMod = "../cluster/tools/go.mod"
)

// fuzzObjects is one file written by pkg/controller's TestWriteFuzzObjects.
type fuzzObjects struct {
	Input    string            `json:"input"`
	RawSpec  json.RawMessage   `json:"rawSpec"`
	CR       json.RawMessage   `json:"cr"`
	Children []json.RawMessage `json:"children"`
	Status   json.RawMessage   `json:"status"`
}

// TestFuzzObjectsAreValid: for every input whose CR the CRD admits and whose
// pass-through core fields are valid by themselves, every child is valid for the API
// server and the status is valid for the CRD. $LLSC_FUZZ_OBJECTS names the directory.
func TestFuzzObjectsAreValid(t *testing.T) {
	dir := os.Getenv("LLSC_FUZZ_OBJECTS")
	if dir == "" {
		t.Skip("LLSC_FUZZ_OBJECTS is not set; run hack/fuzz.sh")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no objects in %s", dir)
	crd := loadCRD(t)
	checked, notAdmitted, userInvalid := 0, 0, 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		var doc fuzzObjects
		require.NoError(t, json.Unmarshal(raw, &doc), file)
		if errs := crd.admit(doc.RawSpec); len(errs) > 0 {
			// The harness's mirror of the CRD admitted it: say why the CRD does not, so
			// the mirror can follow.
			if notAdmitted++; notAdmitted <= 5 {
				t.Logf("input %s: not admitted by the CRD: %v", doc.Input, errs.ToAggregate())
			}
			continue
		}
		if errs := userPartsErrors(t, doc.CR); len(errs) > 0 {
			userInvalid++
			continue
		}
		for _, child := range doc.Children {
			kind, name, errs := validateChild(t, child)
			if len(errs) > 0 {
				t.Errorf("input %s: the API server would reject %s %s:\n%v\nspec: %s", doc.Input, kind, name, errs.ToAggregate(), doc.RawSpec)
			}
		}
		if errs := crd.validateStatus(doc.Status); len(errs) > 0 {
			t.Errorf("input %s: the CRD would reject the status:\n%v\nspec: %s", doc.Input, errs.ToAggregate(), doc.RawSpec)
		}
		checked++
	}
	t.Logf("%d inputs checked with the API's validators; skipped %d the CRD rejects and %d whose pass-through fields are invalid by themselves", checked, notAdmitted, userInvalid)
	require.NotZero(t, checked)
}

// TestSameBuildListAsTheControlPlane keeps this module's requirements and replaces on
// those of hack/cluster/tools (whose Kubernetes version is hack/cluster/versions.env's),
// so both share one build cache: every module both name has the same version.
func TestSameBuildListAsTheControlPlane(t *testing.T) {
	f, err := os.Open(versionsFile)
	require.NoError(t, err)
	defer f.Close()
	kube := ""
	for s := bufio.NewScanner(f); s.Scan(); {
		if v, ok := strings.CutPrefix(s.Text(), "KUBE_VERSION="); ok {
			kube = v
		}
	}
	ours, theirs := moduleVersions(t, "go.mod"), moduleVersions(t, clusterToolsGoMod)
	require.Equal(t, kube, ours["k8s.io/kubernetes"], "hack/validate/go.mod must require k8s.io/kubernetes %s", kube)
	require.Greater(t, len(theirs), 100, "hack/cluster/tools/go.mod did not parse")
	for path, v := range ours {
		if w, ok := theirs[path]; ok {
			assert.Equal(t, w, v, "%s: hack/cluster/tools has %s, hack/validate %s", path, w, v)
		}
	}
}

// moduleVersions reads "module version" pairs from a go.mod's require and replace
// directives (a replace counts for its target).
func moduleVersions(t *testing.T, file string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	out := map[string]string{}
	block := ""
	for _, line := range strings.Split(string(raw), "\n") {
		line, _, _ = strings.Cut(line, "//")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case len(fields) == 2 && fields[1] == "(":
			block = fields[0]
			continue
		case fields[0] == ")":
			block = ""
			continue
		}
		kind := block
		if fields[0] == "require" || fields[0] == "replace" {
			kind, fields = fields[0], fields[1:] // a one-line directive
		}
		switch {
		case kind == "require" && len(fields) == 2:
			out[fields[0]] = fields[1]
		case kind == "replace" && len(fields) >= 4 && fields[len(fields)-3] == "=>":
			out["replace "+fields[0]] = fields[len(fields)-2] + " " + fields[len(fields)-1]
		}
	}
	return out
}

// crd is the LlamaStackDistribution CRD, prepared as the API server serves it.
type crd struct {
	structural      *structuralschema.Structural
	validator       crvalidation.SchemaValidator
	statusValidator crvalidation.SchemaValidator
	statusSchema    *structuralschema.Structural
	cel             *cel.Validator
	statusCEL       *cel.Validator
	apiVersion      string
}

func loadCRD(t *testing.T) *crd {
	t.Helper()
	raw, err := os.ReadFile(crdFile)
	require.NoError(t, err)
	v1 := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, yaml.UnmarshalStrict(raw, v1))
	scheme := runtime.NewScheme()
	apiextensionsinstall.Install(scheme)
	scheme.Default(v1)
	internal := &apiextensionsinternal.CustomResourceDefinition{}
	require.NoError(t, scheme.Convert(v1, internal, nil))
	// The fuzzed CRs are v1alpha1 (the builders' inputs are written in it).
	i := slices.IndexFunc(internal.Spec.Versions, func(v apiextensionsinternal.CustomResourceDefinitionVersion) bool {
		return v.Name == "v1alpha1"
	})
	require.GreaterOrEqual(t, i, 0, "the CRD has no v1alpha1")
	version := internal.Spec.Versions[i]
	// The internal type keeps a schema shared by every version at the top.
	validation := internal.Spec.Validation
	if version.Schema != nil {
		validation = version.Schema
	}
	require.NotNil(t, validation)
	schema := validation.OpenAPIV3Schema
	s, err := structuralschema.NewStructural(schema)
	require.NoError(t, err)
	validator, _, err := crvalidation.NewSchemaValidator(schema)
	require.NoError(t, err)
	statusProps := schema.Properties["status"]
	statusValidator, _, err := crvalidation.NewSchemaValidator(&statusProps)
	require.NoError(t, err)
	status := s.Properties["status"]
	return &crd{
		structural: s, validator: validator,
		statusValidator: statusValidator, statusSchema: &status,
		cel:        cel.NewValidator(s, true, celconfig.PerCallLimit),
		statusCEL:  cel.NewValidator(&status, false, celconfig.PerCallLimit),
		apiVersion: internal.Spec.Group + "/" + version.Name,
	}
}

// admit is what the API server makes of a create of a CR with this spec: fields outside
// the schema are dropped, defaults applied, then the schema and the CEL rules checked.
func (c *crd) admit(spec json.RawMessage) field.ErrorList {
	var s any
	if err := utiljson.Unmarshal(spec, &s); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), string(spec), err.Error())}
	}
	obj := map[string]any{
		"apiVersion": c.apiVersion,
		"kind":       "LlamaStackDistribution",
		"metadata":   map[string]any{"name": "fuzz", "namespace": "ns"},
		"spec":       s,
	}
	structuralpruning.PruneWithOptions(obj, c.structural, true, structuralschema.UnknownFieldPathOptions{})
	structuraldefaulting.Default(obj, c.structural)
	errs := crvalidation.ValidateCustomResource(nil, obj, c.validator)
	celErrs, _ := c.cel.Validate(context.Background(), nil, c.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// validateStatus checks a status as a write through the status subresource would.
func (c *crd) validateStatus(status json.RawMessage) field.ErrorList {
	var s any
	if err := utiljson.Unmarshal(status, &s); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("status"), string(status), err.Error())}
	}
	p := field.NewPath("status")
	errs := crvalidation.ValidateCustomResource(p, s, c.statusValidator)
	celErrs, _ := c.statusCEL.Validate(context.Background(), p, c.statusSchema, s, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// toInternal decodes a versioned object, defaults it and converts it to its internal
// type, as the API server does before validating a create.
func toInternal(t *testing.T, raw []byte) runtime.Object {
	t.Helper()
	obj, gvk, err := legacyscheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	require.NoError(t, err, "%s", raw)
	legacyscheme.Scheme.Default(obj)
	internal, err := legacyscheme.Scheme.ConvertToVersion(obj, gvk.GroupKind().WithVersion(runtime.APIVersionInternal).GroupVersion())
	require.NoError(t, err)
	return internal
}

// validateChild runs the API server's create validation of one child.
func validateChild(t *testing.T, raw []byte) (kind, name string, errs field.ErrorList) {
	t.Helper()
	switch o := toInternal(t, raw).(type) {
	case *apps.Deployment:
		return "Deployment", o.Name, appsvalidation.ValidateDeployment(o, podutil.GetValidationOptionsFromPodTemplate(&o.Spec.Template, nil))
	case *core.Service:
		return "Service", o.Name, corevalidation.ValidateServiceCreate(o)
	case *core.PersistentVolumeClaim:
		return "PersistentVolumeClaim", o.Name, corevalidation.ValidatePersistentVolumeClaim(o, corevalidation.ValidationOptionsForPersistentVolumeClaim(o, nil))
	case *core.ConfigMap:
		return "ConfigMap", o.Name, corevalidation.ValidateConfigMap(o)
	case *autoscaling.HorizontalPodAutoscaler:
		return "HorizontalPodAutoscaler", o.Name, autoscalingvalidation.ValidateHorizontalPodAutoscaler(o, autoscalingvalidation.HorizontalPodAutoscalerSpecValidationOptions{
			MinReplicasLowerBound:           1,
			ScaleTargetRefValidationOptions: autoscalingvalidation.CrossVersionObjectReferenceValidationOptions{},
			ObjectMetricsValidationOptions:  autoscalingvalidation.CrossVersionObjectReferenceValidationOptions{AllowEmptyAPIGroup: true},
		})
	case *policy.PodDisruptionBudget:
		return "PodDisruptionBudget", o.Name, policyvalidation.ValidatePodDisruptionBudget(o, policyvalidation.PodDisruptionBudgetValidationOptions{})
	case *networking.Ingress:
		return "Ingress", o.Name, networkingvalidation.ValidateIngressCreate(o)
	case *networking.NetworkPolicy:
		return "NetworkPolicy", o.Name, networkingvalidation.ValidateNetworkPolicy(o, networkingvalidation.ValidationOptionsForNetworking(o, nil))
	default:
		t.Fatalf("no validation for %T", o)
		return "", "", nil
	}
}

// userPartsErrors validates the parts of a CR the controller copies into the pod as
// they are (environment, resources, security contexts, volumes, mounts, topology
// spread), in a pod of their own: the CRD cannot check these embedded core types, and
// when they are invalid the CR reports the API server's rejection, as intended.
func userPartsErrors(t *testing.T, rawCR []byte) field.ErrorList {
	t.Helper()
	var cr struct {
		Spec struct {
			Server struct {
				ContainerSpec struct {
					Env             json.RawMessage `json:"env,omitempty"`
					Resources       json.RawMessage `json:"resources,omitempty"`
					SecurityContext json.RawMessage `json:"securityContext,omitempty"`
				} `json:"containerSpec"`
				PodOverrides *struct {
					Volumes         []map[string]any `json:"volumes,omitempty"`
					VolumeMounts    []map[string]any `json:"volumeMounts,omitempty"`
					SecurityContext json.RawMessage  `json:"securityContext,omitempty"`
				} `json:"podOverrides,omitempty"`
				TopologySpreadConstraints json.RawMessage `json:"topologySpreadConstraints,omitempty"`
			} `json:"server"`
		} `json:"spec"`
	}
	require.NoError(t, json.Unmarshal(rawCR, &cr))
	srv := cr.Spec.Server
	container := map[string]any{"name": "c", "image": "i"}
	pod := map[string]any{}
	set := func(m map[string]any, key string, v json.RawMessage) {
		if len(v) > 0 && string(v) != "null" {
			m[key] = v
		}
	}
	set(container, "env", srv.ContainerSpec.Env)
	set(container, "resources", srv.ContainerSpec.Resources)
	set(container, "securityContext", srv.ContainerSpec.SecurityContext)
	set(pod, "topologySpreadConstraints", srv.TopologySpreadConstraints)
	if o := srv.PodOverrides; o != nil {
		volumes := o.Volumes
		defined := map[any]bool{}
		for _, v := range volumes {
			defined[v["name"]] = true
		}
		// Mounts may name the controller's volumes: stand-ins for them.
		for _, m := range o.VolumeMounts {
			if n, ok := m["name"].(string); ok && !defined[n] {
				defined[n] = true
				volumes = append(volumes, map[string]any{"name": n, "emptyDir": map[string]any{}})
			}
		}
		pod["volumes"] = volumes
		container["volumeMounts"] = o.VolumeMounts
		set(pod, "securityContext", o.SecurityContext)
	}
	pod["containers"] = []any{container}
	raw, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "ns"},
		"spec":     pod,
	})
	require.NoError(t, err)
	obj, _, err := legacyscheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), string(raw), err.Error())}
	}
	legacyscheme.Scheme.Default(obj)
	internal := &core.Pod{}
	require.NoError(t, legacyscheme.Scheme.Convert(obj, internal, nil))
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&internal.Spec, nil, &internal.ObjectMeta, nil)
	return corevalidation.ValidatePodSpec(&internal.Spec, &metav1.ObjectMeta{}, field.NewPath("spec"), opts)
}
