package crdcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const policyFile = "../../../artifacts/policy/v1alpha1_writes.yaml"

// policyNodes are the nodes of v1alpha2's schema whose rules the policy judges: what
// it calls the rule's self, oldSelf.hasValue() and oldSelf.value() there (a rule may use
// oldSelf no other way), and what it puts before the rule so that a node equal to the
// stored one is not judged again, as the API server's ratcheting does for a v1alpha2
// write. (An optional made of oldObject in the policy, optional.of(oldObject.spec),
// finds none of its fields with .? on Kubernetes 1.37: hence oldObject itself.)
var policyNodes = map[string]struct{ self, oldSelfHasValue, oldSelfValue, unchanged string }{
	"spec": {
		self: "object.spec", oldSelfHasValue: "oldObject != null", oldSelfValue: "oldObject.spec",
		unchanged: "(oldObject != null && oldObject.spec == object.spec) ||",
	},
	"spec.networking.expose": {
		self: "object.spec.networking.expose",
		unchanged: "!has(object.spec.networking) || !has(object.spec.networking.expose) ||" +
			" (oldObject != null && oldObject.spec.?networking.?expose == object.spec.?networking.?expose) ||",
	},
}

// v1alpha2OnlyTrees are the fields only v1alpha2 has whose whole subtree is v1alpha2's
// (v1alpha2's package doc): a v1alpha1 write cannot set or change them, as the policy's
// first validation refuses one that would, so it cannot break a rule within them.
var v1alpha2OnlyTrees = []string{
	"spec.baseConfig", "spec.providers", "spec.resources", "spec.storage",
	"spec.networking.expose.httpRoute", "spec.networking.expose.route", "spec.workload.rollback",
}

// readsOnlyV1alpha2Fields are the rules, by node and message, of a node holding fields of
// both versions that read only fields v1alpha1 has none for (so, as v1alpha2OnlyTrees,
// a v1alpha1 write cannot break them).
var readsOnlyV1alpha2Fields = map[string][]string{
	"spec": {
		// disabled, providers and resources.
		"an API in disabled cannot also have providers",
		"resources need their API: models cannot be registered with inference disabled, shields with safety disabled, tools with toolRuntime disabled",
		"resources.models[].provider must be the id of one of providers.inference, which replace the base config's inference providers",
		"resources.shields[].provider must be the id of one of providers.safety, which replace the base config's safety providers",
		"resources.tools[].provider must be the id of one of providers.toolRuntime, which replace the base config's tool_runtime providers",
	},
	"spec.networking": {
		// expose.route.termination and tls.enabled.
		"expose.route.termination Edge forwards plain HTTP, so it needs tls.enabled false; Reencrypt and Passthrough reach a server that serves TLS, so they need tls.enabled true",
	},
	"spec.networking.tls": {
		// enabled and secretName.
		"tls.secretName is required when tls.enabled is true",
	},
	"spec.networking.expose": {
		// type, httpRoute and route.
		"httpRoute is set with type HTTPRoute, and only then: it names the Gateways the route attaches to",
		"route is set with type Route only",
	},
}

// rule is one x-kubernetes-validations rule and the node it is on.
type rule struct {
	path string
	apiextensionsv1.ValidationRule
}

// collectRules returns every rule of s, with the path of its node ("[]" for the items
// of a list, "{}" for the values of a map).
func collectRules(s *apiextensionsv1.JSONSchemaProps, path string) []rule {
	if s == nil {
		return nil
	}
	var out []rule
	for _, r := range s.XValidations {
		out = append(out, rule{path: path, ValidationRule: r})
	}
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	for name, p := range s.Properties {
		out = append(out, collectRules(&p, join(name))...)
	}
	if s.Items != nil {
		out = append(out, collectRules(s.Items.Schema, path+"[]")...)
	}
	if s.AdditionalProperties != nil {
		out = append(out, collectRules(s.AdditionalProperties.Schema, path+"{}")...)
	}
	return out
}

// readPolicy reads the ValidatingAdmissionPolicy of artifacts/policy/v1alpha1_writes.yaml.
func readPolicy(t *testing.T) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	raw, err := os.ReadFile(filepath.Clean(policyFile))
	require.NoError(t, err)
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &p))
		if p.Kind == "ValidatingAdmissionPolicy" {
			return &p
		}
	}
	t.Fatalf("%s has no ValidatingAdmissionPolicy", policyFile)
	return nil
}

// oneLine is s with every run of white space one space, as YAML folds the policy's
// expressions.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// The admission policy on v1alpha1 writes and v1alpha2's rules are in step: every rule
// of v1alpha2 a v1alpha1 write (create, update, patch or apply) could break is judged
// by the policy, exactly as the CRD has it (self and oldSelf made the converted object
// and the stored one) and with its message; each other rule either has the same rule
// and message in v1alpha1, which judges the write on the same field, or reads only
// fields v1alpha1 cannot set (v1alpha2OnlyTrees, readsOnlyV1alpha2Fields), which the
// policy keeps a v1alpha1 create from setting and an update from changing.
func TestV1alpha1WritesPolicyHasV1alpha2Rules(t *testing.T) {
	crd := twoVersionCRD(t)
	v2 := collectRules(version(t, crd, "v1alpha2").Schema.OpenAPIV3Schema, "")
	v1 := collectRules(version(t, crd, "v1alpha1").Schema.OpenAPIV3Schema, "")
	require.NotEmpty(t, v2)
	policy := readPolicy(t)

	require.Len(t, policy.Spec.MatchConstraints.ResourceRules, 1)
	ops := policy.Spec.MatchConstraints.ResourceRules[0].Operations
	assert.ElementsMatch(t, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, ops,
		"a v1alpha1 create can break a rule as an update can")
	require.NotEmpty(t, policy.Spec.Validations)
	assert.Equal(t, "size(variables.v1alpha2Only) == 0", policy.Spec.Validations[0].Expression, "the first validation keeps the fields only v1alpha2 has")
	byMessage := map[string]admissionregistrationv1.Validation{}
	for _, v := range policy.Spec.Validations[1:] {
		_, dup := byMessage[v.Message]
		require.False(t, dup, "two validations with the message %q", v.Message)
		byMessage[v.Message] = v
	}

	sameInV1alpha1 := func(r rule) bool {
		return slices.ContainsFunc(v1, func(o rule) bool { return o.Rule == r.Rule && o.Message == r.Message })
	}
	selfWord, oldSelfWord := regexp.MustCompile(`\bself\b`), regexp.MustCompile(`\boldSelf\b`)
	judged := map[string]bool{}
	usedReads := map[string]bool{}
	for _, r := range v2 {
		what := fmt.Sprintf("the rule at %s %q", r.path, r.Message)
		if v, ok := byMessage[r.Message]; ok {
			node, ok := policyNodes[r.path]
			if !assert.True(t, ok, "%s is judged by the policy, which has no self for its node", what) {
				continue
			}
			judged[r.Message] = true
			want := r.Rule
			if node.oldSelfValue != "" {
				want = strings.ReplaceAll(want, "oldSelf.hasValue()", node.oldSelfHasValue)
				want = strings.ReplaceAll(want, "oldSelf.value()", node.oldSelfValue)
			}
			assert.False(t, oldSelfWord.MatchString(want), "%s: the policy has no other oldSelf for its node", what)
			want = selfWord.ReplaceAllLiteralString(want, node.self)
			assert.Equal(t, oneLine(node.unchanged+" ("+want+")"), oneLine(v.Expression), "%s: the policy judges it as the CRD does", what)
			assert.Equal(t, "Invalid", string(ptrOr(v.Reason)), "%s: refused as invalid", what)
			continue
		}
		if sameInV1alpha1(r) {
			continue
		}
		if slices.ContainsFunc(v1alpha2OnlyTrees, func(tree string) bool {
			return r.path == tree || strings.HasPrefix(r.path, tree+".") || strings.HasPrefix(r.path, tree+"[]")
		}) {
			continue
		}
		if slices.Contains(readsOnlyV1alpha2Fields[r.path], r.Message) {
			usedReads[r.path+" "+r.Message] = true
			continue
		}
		t.Errorf("%s reads a field a v1alpha1 write can set, and v1alpha1 has no such rule: judge it in %s, or list it in readsOnlyV1alpha2Fields if it reads only fields v1alpha1 cannot set", what, policyFile)
	}
	for msg := range byMessage {
		assert.True(t, judged[msg], "the policy's validation %q is no rule of v1alpha2 on a node it judges", msg)
	}
	for path, msgs := range readsOnlyV1alpha2Fields {
		for _, msg := range msgs {
			assert.True(t, usedReads[path+" "+msg], "readsOnlyV1alpha2Fields names no rule of v1alpha2: %s %q", path, msg)
		}
	}
	assert.NotEmpty(t, judged, "the policy judges v1alpha2's rules")
}

// ptrOr is *p, or the zero value.
func ptrOr[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
