package children

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
)

// hub is l as the controller reads it: converted to v1alpha2.
func hub(l *v1alpha1.LlamaStackDistribution) *v1alpha2.LlamaStackDistribution {
	var out v1alpha2.LlamaStackDistribution
	if err := l.ConvertTo(&out); err != nil {
		panic(fmt.Sprintf("converting %s/%s to v1alpha2: %v", l.Namespace, l.Name, err))
	}
	return &out
}

// starterVersion is the server version of the starter distribution's pinned image.
func starterVersion() string {
	for _, d := range configgen.Distributions() {
		if d.Name == "starter" {
			return d.ServerVersion
		}
	}
	return ""
}

// newLLSD is testCR changed by mods.
func newLLSD(name string, mods ...func(*v1alpha2.LlamaStackDistribution)) *v1alpha2.LlamaStackDistribution {
	l := testCR(name)
	for _, m := range mods {
		m(l)
	}
	return l
}

// newLLSDv1 is a minimal CR written in v1alpha1 in testNamespace, as upstream's users
// wrote it; mods change it. The builders read its v1alpha2 form (hub).
func newLLSDv1(name string, mods ...func(*v1alpha1.LlamaStackDistribution)) *v1alpha1.LlamaStackDistribution {
	l := &v1alpha1.LlamaStackDistribution{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "LlamaStackDistribution"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name), Generation: 1,
		},
		Spec: v1alpha1.LlamaStackDistributionSpec{
			Replicas: 1,
			Server:   v1alpha1.ServerSpec{Distribution: v1alpha1.DistributionType{Name: "starter"}},
		},
	}
	for _, m := range mods {
		m(l)
	}
	return l
}

// hubMods lists changes of a v1alpha2 CR.
func hubMods(f ...func(*v1alpha2.LlamaStackDistribution)) []func(*v1alpha2.LlamaStackDistribution) {
	return f
}

// assertControlledChild checks the controller reference (Kind and UID) and the child labels.
func assertControlledChild(t *testing.T, obj metav1.Object, l *v1alpha2.LlamaStackDistribution) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if assert.NotNil(t, ref, "%s has no controller reference", obj.GetName()) {
		assert.Equal(t, "LlamaStackDistribution", ref.Kind)
		assert.Equal(t, "llamastack.io/v1alpha1", ref.APIVersion)
		assert.Equal(t, l.Name, ref.Name)
		assert.Equal(t, l.UID, ref.UID)
		assert.Equal(t, ptr.To(true), ref.BlockOwnerDeletion)
	}
	for k, v := range map[string]string{
		"app":                          "llama-stack",
		"app.kubernetes.io/instance":   l.Name,
		"app.kubernetes.io/managed-by": "llama-stack-operator",
		"app.kubernetes.io/part-of":    "llama-stack",
	} {
		assert.Equal(t, v, obj.GetLabels()[k], "%s label %s", obj.GetName(), k)
	}
}
