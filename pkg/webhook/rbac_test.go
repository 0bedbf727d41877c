package webhook

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	core "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"
)

// webhookRoleFile holds the Role (the Secret) and the ClusterRole (the CRD) of the
// CertManager, as they will be deployed.
const webhookRoleFile = "../../artifacts/rbac/webhook_role.yaml"

// request is what the API server's authorizer sees of a request.
type request struct {
	verb, group, resource, namespace, name string
}

func (r request) String() string {
	return fmt.Sprintf("%s %s/%s ns=%q name=%q", r.verb, r.group, r.resource, r.namespace, r.name)
}

// authorizationRequest describes a fake action as the authorizer sees it: a list or
// watch is named by a metadata.name field selector, a create by nothing.
func authorizationRequest(t *testing.T, a core.Action) request {
	r := request{verb: a.GetVerb(), group: a.GetResource().Group, resource: a.GetResource().Resource, namespace: a.GetNamespace()}
	nameOf := func(sel fields.Selector) string {
		name, _ := sel.RequiresExactMatch("metadata.name")
		return name
	}
	switch a := a.(type) {
	case core.ListAction:
		r.name = nameOf(a.GetListRestrictions().Fields)
	case core.WatchAction:
		r.name = nameOf(a.GetWatchRestrictions().Fields)
	case core.GetAction:
		r.name = a.GetName()
	case core.PatchAction:
		r.name = a.GetName()
	case core.UpdateAction:
		m, err := meta.Accessor(a.GetObject())
		require.NoError(t, err)
		r.name = m.GetName()
	case core.CreateAction:
		// The name is not known when a create is authorized.
	default:
		t.Fatalf("unexpected action %v", a)
	}
	return r
}

// grant is one verb of one rule: "<kind> <rule index> <verb>".
type grant string

// roleRules reads the file's Role and ClusterRole.
func roleRules(t *testing.T) (role rbacv1.Role, clusterRole rbacv1.ClusterRole) {
	raw, err := os.ReadFile(webhookRoleFile)
	require.NoError(t, err)
	docs := strings.Split(string(raw), "\n---\n")
	require.Len(t, docs, 2)
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &role))
	require.Equal(t, "Role", role.Kind)
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &clusterRole))
	require.Equal(t, "ClusterRole", clusterRole.Kind)
	return role, clusterRole
}

// grantsFor returns the grants that allow r, as RBAC would decide.
func grantsFor(kind string, rules []rbacv1.PolicyRule, r request) []grant {
	var out []grant
	for i, rule := range rules {
		if slices.Contains(rule.Verbs, r.verb) && slices.Contains(rule.APIGroups, r.group) && slices.Contains(rule.Resources, r.resource) &&
			(len(rule.ResourceNames) == 0 || (r.name != "" && slices.Contains(rule.ResourceNames, r.name))) {
			out = append(out, grant(fmt.Sprintf("%s %d %s", kind, i, r.verb)))
		}
	}
	return out
}

// TestRBACMatchesWhatTheCertManagerDoes runs CertManagers with the names they will be
// deployed with through a life (the first start, a replica that loses the create, a
// renewal), and checks every request they sent against webhook_role.yaml: each must be
// granted, the Secret's only in the Role's namespace, and each verb of each rule must
// be used by some request.
func TestRBACMatchesWhatTheCertManagerDoes(t *testing.T) {
	role, clusterRole := roleRules(t)
	for _, r := range append(slices.Clone(role.Rules), clusterRole.Rules...) {
		require.NotContains(t, r.Verbs, "*")
		require.NotContains(t, r.Resources, "*")
	}

	f := newFixture(t, webhookCRD(apiextensionsv1.WebhookConverter))
	f.namespace, f.secretName = role.Namespace, DefaultSecretName
	first := f.replica(true)
	f.sync(first)
	late := f.replica(false)
	_, err := late.sync(f.ctx)
	require.NoError(t, err)
	f.clock.SetTime(renewAt(first.Certificate().Leaf))
	f.sync(first)

	used := sets.New[grant]()
	var denied []string
	for _, a := range append(f.kube.Actions(), f.ext.Actions()...) {
		r := authorizationRequest(t, a)
		var g []grant
		switch {
		case r.namespace == "":
			g = grantsFor("ClusterRole", clusterRole.Rules, r)
		case r.namespace == role.Namespace:
			g = grantsFor("Role", role.Rules, r)
		}
		if len(g) == 0 {
			denied = append(denied, r.String())
		}
		used.Insert(g...)
	}
	require.Empty(t, denied, "requests %s does not grant", webhookRoleFile)

	var unused []string
	for kind, rules := range map[string][]rbacv1.PolicyRule{"Role": role.Rules, "ClusterRole": clusterRole.Rules} {
		for i, rule := range rules {
			for _, v := range rule.Verbs {
				if g := grant(fmt.Sprintf("%s %d %s", kind, i, v)); !used.Has(g) {
					unused = append(unused, fmt.Sprintf("%s %v", g, rule))
				}
			}
		}
	}
	require.Empty(t, unused, "%s grants what the CertManager never uses", webhookRoleFile)
}
