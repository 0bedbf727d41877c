//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// A 1.3 user config with a 0.x top-level safety key: 1.3 ignores the key, so the file
// is rolled out and the CR becomes Ready, with one ConfigKeyIgnored Warning naming the
// key, the version and what replaced it.
func TestUserConfigIgnoredKeyRollsOutWithAWarning(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	_, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "llama-stack-config"},
		Data:       map[string]string{"config.yaml": starterConfig + "safety: {default_shield_id: llama-guard}\n"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "llama-stack-config"}
	}))
	waitReady(t, ns, "app")
	assert.NotEmpty(t, deployment(t, ns, "app").Spec.Template.Annotations[hashAnnotation], "the file is mounted")
	msg := waitOneWarning(t, ns, "app", revision.ReasonConfigKeyIgnored)
	for _, want := range []string{"ConfigMap " + ns + "/llama-stack-config", "safety: server 1.3.0 ignores it", "moderation_endpoint"} {
		assert.Contains(t, msg, want)
	}
}

// disabled: [safety, eval], written for 0.7, on the 1.3 pin: both APIs are absent there,
// which is what the entries ask. The CR is generated and becomes Ready, with one
// ConfigKeyIgnored Warning saying so.
func TestDisabledAPIsTheVersionLacksRollOut(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	cr := vllmCR(t, ns, "app", "http://vllm.models.svc:8000/v1", "not-a-real-key")
	cr.Spec.Disabled = []v1alpha2.APIName{v1alpha2.APISafety, v1alpha2.APIEval}
	_, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, cr, metav1.CreateOptions{})
	require.NoError(t, err)
	waitReady(t, ns, "app")
	l, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, "app", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha2.ConditionConfigGenerated))
	checkGenerated(t, ns, "app")
	msg := waitOneWarning(t, ns, "app", revision.ReasonConfigKeyIgnored)
	for _, want := range []string{"spec.disabled[0]: server 1.3.0 has no safety API", "spec.disabled[1]: server 1.3.0 has no eval API", "nothing to disable"} {
		assert.Contains(t, msg, want)
	}
}

// waitOneWarning waits for a Warning Event of reason about the CR, checks that it is
// told once (also after the controller has settled) and returns its message.
func waitOneWarning(t *testing.T, ns, name, reason string) string {
	t.Helper()
	eventually(t, 30*time.Second, "one Warning Event "+reason, func(ctx context.Context) (bool, error) {
		return countCREvents(ctx, ns, name, corev1.EventTypeWarning, reason) == 1, nil
	})
	settle(t)
	ctx := context.Background()
	require.Equal(t, int32(1), countCREvents(ctx, ns, name, corev1.EventTypeWarning, reason), "told once")
	evs, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var msgs []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			msgs = append(msgs, e.Message)
		}
	}
	return strings.Join(msgs, "\n")
}
