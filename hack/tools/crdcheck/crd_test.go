package crdcheck

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

// Paths are relative to this file's directory (hack/tools/crdcheck), where `go test` runs.
const (
	crdDir      = "../../../artifacts/crd"
	examplesDir = "../../../artifacts/examples"

	crdName    = "llamastackdistributions.llamastack.io"
	apiVersion = "llamastack.io/v1alpha1"
	kind       = "LlamaStackDistribution"
)

// upstreamSamples are upstream's config/samples, kept unchanged in artifacts/examples so
// that every manifest written for upstream is proven to apply to this CRD.
var upstreamSamples = []string{
	"_v1alpha1_llamastackdistribution.yaml",
	"example-with-ca-bundle.yaml",
	"example-with-configmap.yaml",
	"example-with-network-config.yaml",
	"example-withoutconfigmap.yaml",
}

// served is one version of the CRD, prepared as the API server prepares it to serve
// custom resources (see apiextensions-apiserver's customresource_handler.go).
type served struct {
	gvk string // apiVersion, group/version

	// structural has its defaults pruned, as the handler keeps it.
	structural *structuralschema.Structural
	validator  validation.SchemaValidator
	// statusValidator checks status writes through the status subresource.
	statusValidator validation.SchemaValidator
	celValidator    *cel.Validator
}

// readDocuments splits a multi-document YAML file and returns each non-empty
// document as JSON.
func readDocuments(t *testing.T, file string) [][]byte {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()

	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		require.NoError(t, err, file)
		j, err := yaml.YAMLToJSON(doc)
		require.NoError(t, err, file)
		if j = bytes.TrimSpace(j); len(j) == 0 || string(j) == "null" {
			continue // only comments or "---"
		}
		docs = append(docs, j)
	}
}

// decodeObject decodes JSON as the API server does: whole numbers become int64.
func decodeObject(t *testing.T, j []byte) map[string]any {
	t.Helper()
	var obj map[string]any
	require.NoError(t, json.Unmarshal(j, &obj))
	return obj
}

// loadCRDs reads every CRD in artifacts/crd, strictly (an unknown field is an error).
func loadCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no CRD in %s", crdDir)

	crds := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, file := range files {
		for _, doc := range readDocuments(t, file) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			require.NoError(t, yaml.UnmarshalStrict(doc, crd), file)
			require.Equal(t, "CustomResourceDefinition", crd.Kind, file)
			crds[crd.Name] = crd
		}
	}
	return crds
}

// toInternal defaults a CRD and converts it to the internal apiextensions type, as the
// API server does before it validates a CRD.
func toInternal(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensions.CustomResourceDefinition {
	t.Helper()
	scheme := runtime.NewScheme()
	apiextensionsinstall.Install(scheme)
	crd = crd.DeepCopy()
	scheme.Default(crd)
	internal := &apiextensions.CustomResourceDefinition{}
	require.NoError(t, scheme.Convert(crd, internal, nil))
	return internal
}

// internalSchema converts one version's v1 schema to the internal type.
func internalSchema(t *testing.T, v apiextensionsv1.CustomResourceDefinitionVersion) *apiextensions.JSONSchemaProps {
	t.Helper()
	require.NotNil(t, v.Schema, "version %s has no schema", v.Name)
	internal := &apiextensions.CustomResourceValidation{}
	require.NoError(t, apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil))
	require.NotNil(t, internal.OpenAPIV3Schema)
	return internal.OpenAPIV3Schema
}

// serve prepares the LlamaStackDistribution CRD's v1alpha1 for admission (v1alpha2,
// the storage version, is checked by v1alpha2_test.go).
func serve(t *testing.T) *served {
	t.Helper()
	crd, ok := loadCRDs(t)[crdName]
	require.True(t, ok, "CRD %s not found in %s", crdName, crdDir)
	require.Len(t, crd.Spec.Versions, 2)
	return serveVersion(t, crd, "v1alpha1")
}

// serveVersion prepares one served version of a CRD for admission.
func serveVersion(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, version string) *served {
	t.Helper()
	var v apiextensionsv1.CustomResourceDefinitionVersion
	found := false
	for _, cv := range crd.Spec.Versions {
		if cv.Name == version {
			v, found = cv, true
		}
	}
	require.True(t, found, "CRD %s has no version %s", crd.Name, version)
	require.True(t, v.Served)
	require.NotNil(t, v.Subresources)
	require.NotNil(t, v.Subresources.Status, "the controller writes status through the status subresource")

	schema := internalSchema(t, v)
	s, err := structuralschema.NewStructural(schema)
	require.NoError(t, err)
	s = s.DeepCopy()
	require.NoError(t, defaulting.PruneDefaults(s))

	validator, _, err := validation.NewSchemaValidator(schema)
	require.NoError(t, err)
	statusSchema, ok := schema.Properties["status"]
	require.True(t, ok, "the schema has no status")
	statusValidator, _, err := validation.NewSchemaValidator(&statusSchema)
	require.NoError(t, err)

	return &served{
		gvk:             crd.Spec.Group + "/" + v.Name,
		structural:      s,
		validator:       validator,
		statusValidator: statusValidator,
		celValidator:    cel.NewValidator(s, true, celconfig.PerCallLimit),
	}
}

// admission is what the API server would make of a create request.
type admission struct {
	// obj is the object as it would be stored: pruned and defaulted.
	obj *unstructured.Unstructured
	// unknownFields are the fields pruning dropped. With field validation Strict (the
	// default of kubectl apply and create) the API server rejects the request instead.
	unknownFields []string
	errs          field.ErrorList
}

// decodeAsServer prunes and defaults obj the way the API server's decoder does for a
// custom resource: metadata round-trips through ObjectMeta, fields outside the schema
// are dropped, then defaults are applied.
func (s *served) decodeAsServer(t *testing.T, in map[string]any) *admission {
	t.Helper()
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(in)}
	if u.GetNamespace() == "" {
		u.SetNamespace("default") // from the request path, as kubectl sends it
	}
	meta, foundMeta, unknown, err := objectmeta.GetObjectMetaWithOptions(u.Object, objectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	require.NoError(t, err)
	unknown = append(unknown, pruning.PruneWithOptions(u.Object, s.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	defaulting.PruneNonNullableNullsWithoutDefaults(u.Object, s.structural)
	fieldErr, paths := objectmeta.CoerceWithOptions(nil, u.Object, s.structural, false, objectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	require.Nil(t, fieldErr)
	unknown = append(unknown, paths...)
	if foundMeta {
		require.NoError(t, objectmeta.SetObjectMeta(u.Object, meta))
	}
	defaulting.Default(u.Object, s.structural)
	return &admission{obj: u, unknownFields: unknown}
}

// create runs a create request through the API server's steps for a custom resource
// with a status subresource (customresource.strategy PrepareForCreate and Validate,
// then the generic ObjectMeta validation).
func (s *served) create(t *testing.T, in map[string]any) *admission {
	t.Helper()
	ctx := context.Background()
	a := s.decodeAsServer(t, in)
	u := a.obj

	// PrepareForCreate: status cannot be set on create.
	delete(u.Object, "status")
	u.SetGeneration(1)

	if u.GetAPIVersion() != s.gvk {
		a.errs = append(a.errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), "must be "+s.gvk))
	}
	if u.GetKind() != kind {
		a.errs = append(a.errs, field.Invalid(field.NewPath("kind"), u.GetKind(), "must be "+kind))
	}
	a.errs = append(a.errs, apimachineryvalidation.ValidateObjectMetaAccessor(u, true, path.ValidatePathSegmentName, field.NewPath("metadata"))...)
	a.errs = append(a.errs, validation.ValidateCustomResource(nil, u.Object, s.validator)...)
	a.errs = append(a.errs, objectmeta.Validate(ctx, nil, u.Object, s.structural, false)...)
	a.errs = append(a.errs, listtype.ValidateListSetsAndMaps(nil, s.structural, u.Object)...)
	a.errs = append(a.errs, s.runCEL(ctx, u.Object, a.errs)...)
	return a
}

// updateStatus runs a write of obj (spec and status) through the status subresource:
// only the status schema is checked, then list types and CEL over the whole object.
func (s *served) updateStatus(t *testing.T, in map[string]any) *admission {
	t.Helper()
	ctx := context.Background()
	a := s.decodeAsServer(t, in)
	u := a.obj
	if status, ok := u.Object["status"]; ok {
		a.errs = append(a.errs, validation.ValidateCustomResource(field.NewPath("status"), status, s.statusValidator)...)
	}
	a.errs = append(a.errs, listtype.ValidateListSetsAndMaps(nil, s.structural, u.Object)...)
	a.errs = append(a.errs, s.runCEL(ctx, u.Object, a.errs)...)
	return a
}

// update runs an update of old to in through the API server's steps for a custom
// resource (customresource.strategy ValidateUpdate: the schema, list types and CEL
// rules with old as oldSelf), with validation ratcheting as the API server does since
// CRDValidationRatcheting (on by default from Kubernetes 1.30): an error of a node
// equal to its old value is dropped.
func (s *served) update(t *testing.T, old, in map[string]any) *admission {
	t.Helper()
	ctx := context.Background()
	a := s.decodeAsServer(t, in)
	prior := s.decodeAsServer(t, old).obj
	u := a.obj
	correlated := common.NewCorrelatedObject(u.Object, prior.Object, &model.Structural{Structural: s.structural})
	a.errs = append(a.errs, validation.ValidateCustomResourceUpdate(nil, u.Object, prior.Object, s.validator, validation.WithRatcheting(correlated))...)
	a.errs = append(a.errs, listtype.ValidateListSetsAndMaps(nil, s.structural, u.Object)...)
	celErrs, _ := s.celValidator.Validate(ctx, nil, s.structural, u.Object, prior.Object, celconfig.RuntimeCELCostBudget, cel.WithRatcheting(correlated))
	a.errs = append(a.errs, celErrs...)
	return a
}

// runCEL evaluates the x-kubernetes-validations rules unless an earlier error makes
// the object unfit for them, as the strategy's hasBlockingErr decides.
func (s *served) runCEL(ctx context.Context, obj map[string]any, errs field.ErrorList) field.ErrorList {
	if s.celValidator == nil {
		return nil
	}
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.ErrorList{field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")}
		}
	}
	celErrs, _ := s.celValidator.Validate(ctx, nil, s.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return celErrs
}

// newLLSD builds a LlamaStackDistribution named name with spec given as YAML.
func newLLSD(t *testing.T, name, spec string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(spec))
	require.NoError(t, err)
	return map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       decodeObject(t, j),
	}
}

// TestCRDIsAccepted creates every CRD in artifacts/crd as the API server would:
// the same validation as a POST to customresourcedefinitions, which includes the
// structural schema, defaults, CEL compilation and the CRD's total CEL cost.
func TestCRDIsAccepted(t *testing.T) {
	for name, crd := range loadCRDs(t) {
		t.Run(name, func(t *testing.T) { assertCRDAccepted(t, crd) })
	}
}

// assertCRDAccepted validates crd as a POST to customresourcedefinitions does.
func assertCRDAccepted(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	internal := toInternal(t, crd)
	// The registry's PrepareForCreate.
	internal.Status = apiextensions.CustomResourceDefinitionStatus{}
	for _, v := range internal.Spec.Versions {
		if v.Storage {
			internal.Status.StoredVersions = []string{v.Name}
		}
	}
	errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal)
	assert.Empty(t, errs.ToAggregate(), "the API server would reject the CRD")
}

// TestSchemaIsStructural checks each version's schema is structural, which a v1 CRD
// needs for pruning, defaulting and CEL.
func TestSchemaIsStructural(t *testing.T) {
	for name, crd := range loadCRDs(t) {
		for _, v := range crd.Spec.Versions {
			t.Run(name+"/"+v.Name, func(t *testing.T) { assertStructural(t, v) })
		}
	}
}

func assertStructural(t *testing.T, v apiextensionsv1.CustomResourceDefinitionVersion) {
	t.Helper()
	s, err := structuralschema.NewStructural(internalSchema(t, v))
	require.NoError(t, err)
	assert.Empty(t, structuralschema.ValidateStructural(nil, s).ToAggregate())
}

// compiledRule is one x-kubernetes-validations rule after compilation.
type compiledRule struct {
	path string
	rule string
	cost uint64 // worst-case cost, times how often the rule can run in one object
}

// celEnv is the environment the API server compiles the rules of a new CRD with.
func celEnv() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
}

// compileAll compiles the rules at s and below with the API server's compiler. It walks
// the schema the way cel.NewValidator does, carrying the CEL type of each node, and
// multiplies each rule's cost by the number of times the rule can run: the product of
// the maxItems/maxProperties of the lists and maps above it, or the compiler's own
// estimate where one of them is unbounded.
func compileAll(t *testing.T, s *structuralschema.Structural, declType *apiservercel.DeclType, fldPath *field.Path, cardinality *uint64) []compiledRule {
	t.Helper()
	var out []compiledRule
	if len(s.XValidations) > 0 {
		require.NotNil(t, declType, "%s: CEL cannot see this field, so its rules would never run", fldPath)
		results, err := cel.Compile(s, declType, celconfig.PerCallLimit, celEnv(), cel.NewExpressionsEnvLoader())
		require.NoError(t, err, fldPath.String())
		for i, r := range results {
			rule := s.XValidations[i].Rule
			if r.Error != nil {
				t.Errorf("%s: rule %q does not compile: %s", fldPath, rule, r.Error.Detail)
				continue
			}
			if r.MessageExpressionError != nil {
				t.Errorf("%s: messageExpression of %q does not compile: %s", fldPath, rule, r.MessageExpressionError.Detail)
			}
			times := r.MaxCardinality
			if cardinality != nil {
				times = *cardinality
			}
			out = append(out, compiledRule{path: fldPath.String(), rule: rule, cost: multiply(r.MaxCost, times)})
		}
	}

	elemType := func() *apiservercel.DeclType {
		if declType == nil {
			return nil
		}
		return declType.ElemType
	}
	for name, prop := range s.Properties {
		var propType *apiservercel.DeclType
		if escaped, ok := apiservercel.Escape(name); ok {
			if declType != nil {
				if f, ok := declType.Fields[escaped]; ok {
					propType = f.Type
				}
			}
		} else {
			propType = model.SchemaDeclType(&prop, prop.XEmbeddedResource)
		}
		out = append(out, compileAll(t, &prop, propType, fldPath.Child(name), cardinality)...)
	}
	if s.Items != nil {
		var maxItems *int64
		if s.ValueValidation != nil {
			maxItems = s.ValueValidation.MaxItems
		}
		out = append(out, compileAll(t, s.Items, elemType(), fldPath.Child("items"), times(cardinality, maxItems))...)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
		var maxProperties *int64
		if s.ValueValidation != nil {
			maxProperties = s.ValueValidation.MaxProperties
		}
		out = append(out, compileAll(t, s.AdditionalProperties.Structural, elemType(), fldPath.Child("additionalProperties"), times(cardinality, maxProperties))...)
	}
	return out
}

// times multiplies a cardinality by a maxItems/maxProperties limit; nil is unbounded.
func times(cardinality *uint64, limit *int64) *uint64 {
	if cardinality == nil || limit == nil {
		return nil
	}
	n := multiply(*cardinality, uint64(max(*limit, 0)))
	return &n
}

func add(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

func multiply(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}

// countRules counts the x-kubernetes-validations rules anywhere in a v1 schema, so
// that a rule the compilation walk cannot reach is noticed.
func countRules(s *apiextensionsv1.JSONSchemaProps) int {
	if s == nil {
		return 0
	}
	n := len(s.XValidations)
	for _, p := range s.Properties {
		n += countRules(&p)
	}
	if s.Items != nil {
		n += countRules(s.Items.Schema)
		for i := range s.Items.JSONSchemas {
			n += countRules(&s.Items.JSONSchemas[i])
		}
	}
	if s.AdditionalProperties != nil {
		n += countRules(s.AdditionalProperties.Schema)
	}
	for _, list := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range list {
			n += countRules(&list[i])
		}
	}
	return n + countRules(s.Not)
}

// TestCELRulesCompile compiles every x-kubernetes-validations rule as the API server
// does when the CRD is created, with the per-call cost limit, and checks each rule's
// estimated cost against the per-rule limit and the sum against the per-CRD limit.
func TestCELRulesCompile(t *testing.T) {
	for name, crd := range loadCRDs(t) {
		for _, v := range crd.Spec.Versions {
			t.Run(name+"/"+v.Name, func(t *testing.T) { assertCELWithinBudget(t, v) })
		}
	}
}

// assertCELWithinBudget compiles the rules of one version and checks their costs; it
// returns the total estimated cost.
func assertCELWithinBudget(t *testing.T, v apiextensionsv1.CustomResourceDefinitionVersion) uint64 {
	t.Helper()
	s, err := structuralschema.NewStructural(internalSchema(t, v))
	require.NoError(t, err)
	one := uint64(1)
	rules := compileAll(t, s, model.SchemaDeclType(s, true), field.NewPath("openAPIV3Schema"), &one)
	require.Len(t, rules, countRules(v.Schema.OpenAPIV3Schema), "some rules were not reached")

	var total uint64
	for _, r := range rules {
		t.Logf("%s: cost %d: %s", r.path, r.cost, r.rule)
		assert.LessOrEqual(t, r.cost, uint64(crdvalidation.StaticEstimatedCostLimit),
			"%s: rule %q is over the per-rule cost budget", r.path, r.rule)
		total = add(total, r.cost)
	}
	assert.LessOrEqual(t, total, uint64(crdvalidation.StaticEstimatedCRDCostLimit), "rules are over the CRD's cost budget")
	return total
}

// TestExamplesAreAdmitted creates every LlamaStackDistribution in artifacts/examples,
// among them upstream's samples, and expects no error and no unknown field.
func TestExamplesAreAdmitted(t *testing.T) {
	s := serve(t)
	for _, sample := range upstreamSamples {
		assert.FileExists(t, filepath.Join(examplesDir, sample), "upstream's sample must be kept in %s", examplesDir)
	}

	forEachExampleCR(t, examplesDir, func(t *testing.T, u unstructured.Unstructured) {
		a := s.create(t, u.Object)
		assert.Empty(t, a.errs.ToAggregate())
		assert.Empty(t, a.unknownFields, "fields outside the schema: kubectl's strict field validation rejects them")
	})
}

const validSpec = `
server:
  distribution:
    name: starter
`

// TestAdmission creates objects that the schema and CEL rules must admit or reject.
func TestAdmission(t *testing.T) {
	cases := map[string]admissionCase{
		"minimal": {spec: validSpec},
		"distribution with both name and image": {
			spec: `
server:
  distribution: {name: starter, image: quay.io/example/llama-stack:1.0}`,
			want: []string{"spec.server.distribution", "Only one of name or image can be specified"},
		},
		"distribution with neither name nor image": {
			spec: `
server:
  distribution: {}`,
			want:    []string{"spec.server.distribution", "One of name or image must be specified"},
			notWant: []string{"Only one of"},
		},
		"distribution image alone": {spec: `
server:
  distribution: {image: quay.io/example/llama-stack:1.0}`},
		"autoscaling maxReplicas 0": {
			spec: validSpec + `
  autoscaling: {maxReplicas: 0}`,
			want: []string{"spec.server.autoscaling.maxReplicas", "should be greater than or equal to 1"},
		},
		"autoscaling without maxReplicas": {
			spec: validSpec + `
  autoscaling: {minReplicas: 1}`,
			want: []string{"spec.server.autoscaling.maxReplicas", "Required value"},
		},
		"autoscaling minReplicas above maxReplicas": {
			spec: validSpec + `
  autoscaling: {minReplicas: 5, maxReplicas: 2}`,
			want: []string{"spec.server.autoscaling", "minReplicas must be less than or equal to maxReplicas"},
		},
		"autoscaling minReplicas equal to maxReplicas": {spec: validSpec + `
  autoscaling: {minReplicas: 2, maxReplicas: 2}`},
		"autoscaling maxReplicas alone": {spec: validSpec + `
  autoscaling: {maxReplicas: 3}`},
		"podDisruptionBudget with both minAvailable and maxUnavailable": {
			spec: validSpec + `
  podDisruptionBudget: {minAvailable: 1, maxUnavailable: "50%"}`,
			want: []string{"spec.server.podDisruptionBudget", "Only one of minAvailable or maxUnavailable can be specified"},
		},
		"podDisruptionBudget maxUnavailable percentage": {spec: validSpec + `
  podDisruptionBudget: {maxUnavailable: "50%"}`},
		"port not set": {spec: validSpec + "  containerSpec: {name: llama-stack}\n"},
		"port 1":       {spec: validSpec + "  containerSpec: {port: 1}\n"},
		"port 65535":   {spec: validSpec + "  containerSpec: {port: 65535}\n"},
		"port 70000": {
			spec: validSpec + "  containerSpec: {port: 70000}\n",
			want: []string{"spec.server.containerSpec.port", "should be less than or equal to 65535"},
		},
		"port -1": {
			spec: validSpec + "  containerSpec: {port: -1}\n",
			want: []string{"spec.server.containerSpec.port", "should be greater than or equal to 1"},
		},
		// The Go client never sends port 0 (omitempty); written by hand it is refused.
		"port 0 written out": {
			spec: validSpec + "  containerSpec: {port: 0}\n",
			want: []string{"spec.server.containerSpec.port", "should be greater than or equal to 1"},
		},
		"replicas 0": {spec: "replicas: 0\n" + validSpec},
		"replicas -1": {
			spec: "replicas: -1\n" + validSpec,
			want: []string{"spec.replicas", "should be greater than or equal to 0"},
		},
		"workers 1": {spec: validSpec + "  workers: 1\n"},
		"workers 0": {
			spec: validSpec + "  workers: 0\n",
			want: []string{"spec.server.workers", "should be greater than or equal to 1"},
		},
		// Mount paths must be absolute: a relative one is resolved against a directory
		// the runtime chooses, and cannot be compared with the controller's mounts.
		"storage mountPath relative": {
			spec: validSpec + "  storage: {mountPath: data}\n",
			want: []string{"spec.server.storage.mountPath", "storage.mountPath must be an absolute path, starting with '/'"},
		},
		"storage mountPath dot-relative": {
			spec: validSpec + "  storage: {mountPath: ./.llama}\n",
			want: []string{"spec.server.storage.mountPath", "storage.mountPath must be an absolute path"},
		},
		"storage mountPath absolute":        {spec: validSpec + "  storage: {mountPath: /home/lls/.lls}\n"},
		"storage mountPath trailing slash":  {spec: validSpec + "  storage: {mountPath: /.llama/}\n"},
		"storage mountPath empty (default)": {spec: validSpec + "  storage: {mountPath: \"\"}\n"},
		"volumeMounts mountPath relative": {
			spec: validSpec + `
  podOverrides:
    volumes: [{name: a, emptyDir: {}}, {name: b, emptyDir: {}}]
    volumeMounts: [{name: a, mountPath: /a}, {name: b, mountPath: data}]`,
			want:    []string{"spec.server.podOverrides.volumeMounts[1].mountPath", "mountPath must be an absolute path, starting with '/'"},
			notWant: []string{"volumeMounts[0]"},
		},
		"volumeMounts mountPath empty": {
			spec: validSpec + `
  podOverrides:
    volumes: [{name: a, emptyDir: {}}]
    volumeMounts: [{name: a, mountPath: ""}]`,
			want: []string{"spec.server.podOverrides.volumeMounts[0].mountPath", "mountPath must be an absolute path"},
		},
		"volumeMounts mountPath absolute": {spec: validSpec + `
  podOverrides:
    volumes: [{name: a, emptyDir: {}}, {name: b, emptyDir: {}}]
    volumeMounts: [{name: a, mountPath: /models/}, {name: b, mountPath: /.llama/./cache, subPath: x}]`},
		"name of 48 characters": {name: "a" + strings.Repeat("b", 46) + "1", spec: validSpec},
		"name of 49 characters": {
			name: strings.Repeat("a", 49), spec: validSpec,
			want: []string{"metadata.name must be at most 48 characters"},
		},
		"name with upper case and underscore": {
			name: "Bad_Name", spec: validSpec,
			want: []string{"must be a DNS-1035 label"},
		},
		"name starting with a digit": {
			name: "1abc", spec: validSpec,
			want: []string{"must be a DNS-1035 label"},
		},
		"name with a dot": {
			name: "a.b", spec: validSpec,
			want: []string{"must be a DNS-1035 label"},
		},
	}

	// Fields the fuzzer (pkg/controller FuzzBuilders) found admitted although the child
	// they make is rejected by the API server.
	childRules := map[string]struct {
		spec string
		want []string
	}{
		"container name not a DNS label": {validSpec + `
  containerSpec: {name: Bad_Name}`, []string{"spec.server.containerSpec.name", "should match"}},
		"image with a space": {`
server:
  distribution: {image: " quay.io/x:1"}`, []string{"spec.server.distribution.image", "should match"}},
		"image ending in a vertical tab": {`
server:
  distribution: {image: "quay.io/x:1\v"}`, []string{"spec.server.distribution.image", "should match"}},
		"image with a no-break space": {`
server:
  distribution: {image: "quay.io/x:1\u00a0"}`, []string{"spec.server.distribution.image", "should match"}},
		"serviceAccountName not a DNS subdomain": {validSpec + `
  podOverrides: {serviceAccountName: My_SA}`, []string{"spec.server.podOverrides.serviceAccountName", "should match"}},
		"storage size zero": {validSpec + `
  storage: {size: "0"}`, []string{"spec.server.storage.size", "storage.size must be more than zero"}},
		"storage size negative": {validSpec + `
  storage: {size: -1Gi}`, []string{"spec.server.storage.size", "storage.size must be more than zero"}},
		"storage class not a DNS subdomain": {validSpec + `
  storage: {storageClassName: Fast_SSD}`, []string{"spec.server.storage.storageClassName", "should match"}},
		"PDB minAvailable not a number or percentage": {validSpec + `
  podDisruptionBudget: {minAvailable: half}`, []string{"spec.server.podDisruptionBudget", "minAvailable must be a non-negative integer or a percentage"}},
		"PDB maxUnavailable over 100%": {validSpec + `
  podDisruptionBudget: {maxUnavailable: 150%}`, []string{"spec.server.podDisruptionBudget", "maxUnavailable must be a non-negative integer or a percentage"}},
		"PDB minAvailable negative": {validSpec + `
  podDisruptionBudget: {minAvailable: -1}`, []string{"spec.server.podDisruptionBudget", "minAvailable must be a non-negative integer or a percentage"}},
		"ingress class not a DNS subdomain": {validSpec + `
network:
  exposeRoute: true
  ingress: {className: My_Class}`, []string{"spec.network.ingress.className", "should match"}},
		"ingress TLS secret not a DNS subdomain": {validSpec + `
network:
  exposeRoute: true
  ingress: {tlsSecretName: My_Secret}`, []string{"spec.network.ingress.tlsSecretName", "should match"}},
		"ingress annotation key not a qualified name": {validSpec + `
network:
  exposeRoute: true
  ingress: {annotations: {"bad key!": v}}`, []string{"spec.network.ingress.annotations", "annotation keys must be qualified names"}},
		"allowedFrom namespace not a label value": {validSpec + `
network:
  allowedFrom: {namespaces: ["two words"]}`, []string{"spec.network.allowedFrom.namespaces[0]", "should match"}},
	}
	for name, r := range childRules {
		cases[name] = admissionCase{spec: r.spec, want: r.want}
	}
	for name, spec := range map[string]string{
		"storage size 1Mi":               validSpec + "\n  storage: {size: 1Mi}",
		"storage class empty":            validSpec + "\n  storage: {storageClassName: \"\"}",
		"PDB 0% and 100%":                validSpec + "\n  podDisruptionBudget: {minAvailable: 100%}",
		"PDB maxUnavailable 0":           validSpec + "\n  podDisruptionBudget: {maxUnavailable: 0}",
		"allowedFrom upstream's nsA":     validSpec + "\nnetwork:\n  allowedFrom: {namespaces: [nsA, \"*\"]}",
		"ingress annotation with prefix": validSpec + "\nnetwork:\n  exposeRoute: true\n  ingress: {annotations: {cert-manager.io/cluster-issuer: x}}",
	} {
		cases[name] = admissionCase{spec: spec}
	}

	configMapKeyErrors := map[string][]string{
		"ca-bundle.crt":          nil,
		"a_b-c.d":                nil,
		"A1":                     nil,
		strings.Repeat("k", 253): nil,
		"a/b":                    {"should match"},
		"../x":                   {"should match"},
		"a..b":                   {"a ConfigMap key must not contain '..'"},
		"-a":                     {"should match"},
		"a-":                     {"should match"},
		"":                       {"should be at least 1 chars long"},
		strings.Repeat("k", 254): {"Too long"},
	}
	for key, want := range configMapKeyErrors {
		if want != nil {
			want = append([]string{"spec.server.tlsConfig.caBundle.configMapKeys[1]"}, want...)
		}
		cases[fmt.Sprintf("configMapKeys item %.20q (%d characters)", key, len(key))] = admissionCase{
			spec: validSpec + fmt.Sprintf(`
  tlsConfig:
    caBundle:
      configMapName: ca
      configMapKeys: [ca-bundle.crt, %q]`, key),
			want: want,
		}
	}

	labelErrors := map[string][]string{
		"team":                                   nil,
		"myproject/lls-allowed":                  nil,
		"team/authorized":                        nil,
		"example.com/x_y.z":                      nil,
		"kubernetes.io/metadata.name":            nil,
		"a" + strings.Repeat("b", 62):            nil,
		"example.com/" + strings.Repeat("n", 63): nil,
		"team=frontend":                          {"should match"},
		"-bad":                                   {"should match"},
		"bad-":                                   {"should match"},
		"a/b/c":                                  {"should match"},
		"Example.com/x":                          {"should match"},
		"/x":                                     {"should match"},
		"a" + strings.Repeat("b", 63):            {"should match"},
		"example.com/" + strings.Repeat("n", 64): {"should match"},
	}
	for label, want := range labelErrors {
		if want != nil {
			want = append([]string{"spec.network.allowedFrom.labels[0]"}, want...)
		}
		cases[fmt.Sprintf("allowedFrom label %.24q (%d characters)", label, len(label))] = admissionCase{
			spec: validSpec + fmt.Sprintf(`
network:
  allowedFrom:
    namespaces: ["*"]
    labels: [%q]`, label),
			want: want,
		}
	}

	serve(t).admitCases(t, cases, newLLSD)
}

// admissionCase is an object the schema and CEL rules must admit or reject.
type admissionCase struct {
	name string // metadata.name; "sample" when empty
	spec string
	// want are substrings of the errors; none means the object is admitted.
	want    []string
	notWant []string
}

// admitCases creates each case's object, made by newObj, and checks that it is
// admitted, or rejected with the wanted messages.
func (s *served) admitCases(t *testing.T, cases map[string]admissionCase, newObj func(t *testing.T, name, spec string) map[string]any) {
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objName := tc.name
			if objName == "" {
				objName = "sample"
			}
			a := s.create(t, newObj(t, objName, tc.spec))
			require.Empty(t, a.unknownFields)
			if len(tc.want) == 0 {
				assert.Empty(t, a.errs.ToAggregate())
				return
			}
			require.NotEmpty(t, a.errs, "the object was admitted")
			msg := a.errs.ToAggregate().Error()
			t.Logf("rejected: %s", msg)
			for _, want := range tc.want {
				assert.Contains(t, msg, want)
			}
			for _, notWant := range tc.notWant {
				assert.NotContains(t, msg, notWant)
			}
		})
	}
}

// TestDefaults checks the defaults the API server fills in on create.
func TestDefaults(t *testing.T) {
	s := serve(t)
	// containerSpec and network are present (the Go client always sends containerSpec),
	// so their fields' defaults apply.
	a := s.create(t, newLLSD(t, "defaults", validSpec+"  containerSpec: {}\nnetwork: {}\n"))
	require.Empty(t, a.errs.ToAggregate())

	replicas, found, err := unstructured.NestedInt64(a.obj.Object, "spec", "replicas")
	require.NoError(t, err)
	assert.True(t, found)
	assert.EqualValues(t, 1, replicas)

	container, found, err := unstructured.NestedString(a.obj.Object, "spec", "server", "containerSpec", "name")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "llama-stack", container)

	exposeRoute, found, err := unstructured.NestedBool(a.obj.Object, "spec", "network", "exposeRoute")
	require.NoError(t, err)
	assert.True(t, found)
	assert.False(t, exposeRoute)

	_, found, err = unstructured.NestedFieldNoCopy(a.obj.Object, "spec", "server", "containerSpec", "port")
	require.NoError(t, err)
	assert.False(t, found, "the port default (8321) is the controller's, not the schema's")

	// Without containerSpec there is nothing to default its name in: the controller
	// must fall back to "llama-stack" itself.
	a = s.create(t, newLLSD(t, "defaults", validSpec))
	require.Empty(t, a.errs.ToAggregate())
	_, found, err = unstructured.NestedFieldNoCopy(a.obj.Object, "spec", "server", "containerSpec")
	require.NoError(t, err)
	assert.False(t, found)
}

const validStatus = `
observedGeneration: 3
phase: Ready
availableReplicas: 1
serviceURL: http://sample-service.default.svc.cluster.local:8321
routeURL: ""
version:
  operatorVersion: v0.1.0
  llamaStackServerVersion: 0.2.0
  lastUpdated: "2026-01-02T03:04:05Z"
distributionConfig:
  activeDistribution: starter
  availableDistributions:
    starter: docker.io/llamastack/distribution-starter:0.7.1
  providers:
  - api: inference
    provider_id: ollama
    provider_type: remote::ollama
    config:
      url: http://ollama-server-service.ollama-dist.svc.cluster.local:11434
      timeout: 30
      tls: {verify: false, ca: null}
      models: [llama3.2:1b, {id: all-minilm, dims: 384}]
    health:
      status: OK
      message: ""
  - api: agents
    provider_id: meta-reference
    provider_type: inline::meta-reference
    config: {}
    health: {status: Not Implemented, message: Provider does not implement health check}
conditions:
- type: Ready
  status: "True"
  reason: DeploymentReady
  message: All replicas are ready
  lastTransitionTime: "2026-01-02T03:04:05Z"
  observedGeneration: 3
- type: DeploymentReady
  status: "True"
  reason: MinimumReplicasAvailable
  message: ""
  lastTransitionTime: "2026-01-02T03:04:05Z"
`

// withStatus returns a valid LlamaStackDistribution carrying status as given in YAML,
// after edit has changed it.
func withStatus(t *testing.T, status string, edit func(status map[string]any)) map[string]any {
	t.Helper()
	obj := newLLSD(t, "sample", validSpec)
	j, err := yaml.YAMLToJSON([]byte(status))
	require.NoError(t, err)
	st := decodeObject(t, j)
	if edit != nil {
		edit(st)
	}
	obj["status"] = st
	return obj
}

// TestStatus writes statuses through the status subresource as the controller does.
func TestStatus(t *testing.T) {
	s := serve(t)

	t.Run("valid status with free-form provider config", func(t *testing.T) {
		in := withStatus(t, validStatus, nil)
		a := s.updateStatus(t, in)
		assert.Empty(t, a.errs.ToAggregate())
		assert.Empty(t, a.unknownFields)

		want, _, err := unstructured.NestedSlice(in, "status", "distributionConfig", "providers")
		require.NoError(t, err)
		got, _, err := unstructured.NestedSlice(a.obj.Object, "status", "distributionConfig", "providers")
		require.NoError(t, err)
		assert.Equal(t, want, got, "provider config must be kept as the server reported it")
	})

	cases := map[string]struct {
		edit func(status map[string]any)
		want []string
	}{
		"unknown phase": {
			edit: func(st map[string]any) { st["phase"] = "Running" },
			want: []string{"status.phase", "Unsupported value"},
		},
		"two conditions of one type": {
			edit: func(st map[string]any) {
				conds := st["conditions"].([]any)
				st["conditions"] = append(conds, runtime.DeepCopyJSONValue(conds[0]))
			},
			want: []string{"status.conditions[2]", "Duplicate value"},
		},
		"condition without reason": {
			edit: func(st map[string]any) {
				delete(st["conditions"].([]any)[0].(map[string]any), "reason")
			},
			want: []string{"status.conditions[0].reason", "Required value"},
		},
		"provider without health": {
			edit: func(st map[string]any) {
				providers := st["distributionConfig"].(map[string]any)["providers"].([]any)
				delete(providers[0].(map[string]any), "health")
			},
			want: []string{"status.distributionConfig.providers[0].health", "Required value"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := s.updateStatus(t, withStatus(t, validStatus, tc.edit))
			require.NotEmpty(t, a.errs, "the status was admitted")
			msg := a.errs.ToAggregate().Error()
			t.Logf("rejected: %s", msg)
			for _, want := range tc.want {
				assert.Contains(t, msg, want)
			}
		})
	}
}
