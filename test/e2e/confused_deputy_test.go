//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// Confused deputy: the controller can read every ConfigMap in the cluster, a CR author
// only those of their namespace. A CR in namespace A that names ConfigMaps of namespace B,
// as user config and as CA bundle, gets nothing of B's into A while B has not opted in
// for A: no copy, no mount, no data in the status, in an Event or in any object of A.
// The CR says why (condition and Warning Event), with the same answer as for a ConfigMap
// that does not exist, so it cannot even learn which ConfigMaps B has. An opt-in for
// another namespace (with A's name inside longer entries) changes nothing.
func TestConfusedDeputy(t *testing.T) {
	victim := newNamespace(t)   // B
	attacker := newNamespace(t) // A
	ctx := context.Background()

	token := make([]byte, 16)
	_, err := rand.Read(token)
	require.NoError(t, err)
	secret := "sk-live-" + hex.EncodeToString(token) // a value that must never reach A
	const secretKey = "aws_secret_access_key"        // a secret-looking key of B's
	victimConfigMaps := map[string]map[string]string{
		"run-config": {"config.yaml": "version: '2'\napi_key: " + secret + "\n", secretKey: secret},
		"ca":         {"ca-bundle.crt": testCertificate(t, "victim-ca"), secretKey: secret},
	}
	for name, data := range victimConfigMaps {
		_, err := env.kube.CoreV1().ConfigMaps(victim).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data,
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	create(t, llsd(attacker, "user", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "run-config", ConfigMapNamespace: victim}
	}))
	create(t, llsd(attacker, "ca", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.TLSConfig = &v1alpha1.TLSConfig{CABundle: &v1alpha1.CABundleConfig{
			ConfigMapName: "ca", ConfigMapNamespace: victim, ConfigMapKeys: []v1alpha1.ConfigMapKey{"ca-bundle.crt", secretKey},
		}}
	}))
	// A probe for a ConfigMap of B that does not exist, for comparison.
	create(t, llsd(attacker, "probe", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "no-such-config", ConfigMapNamespace: victim}
	}))

	refused := func() {
		t.Helper()
		messages := map[string]string{}
		for _, name := range []string{"user", "ca", "probe"} {
			l := waitCondition(t, attacker, name, v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonConfigMapNotAllowed)
			assert.Equal(t, v1alpha1.PhaseFailed, l.Status.Phase, name)
			ready := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionReady)
			require.NotNil(t, ready, name)
			assert.Equal(t, metav1.ConditionFalse, ready.Status, name)
			messages[name] = meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionDeploymentReady).Message
		}
		// An existing ConfigMap that has not opted in looks like a missing one.
		assert.Equal(t, messages["probe"], strings.ReplaceAll(messages["user"], "run-config", "no-such-config"))
		settle(t)
		assertNothingLeaked(t, attacker, secret, secretKey)
		warnings := map[string]bool{}
		events, err := env.kube.CoreV1().Events(attacker).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == v1alpha1.ReasonConfigMapNotAllowed {
				warnings[e.InvolvedObject.Name] = true
			}
		}
		assert.Equal(t, map[string]bool{"user": true, "ca": true, "probe": true}, warnings, "a Warning Event for each CR")
	}
	refused()

	// B opts in, but for other namespaces only, some with A's name inside.
	for name := range victimConfigMaps {
		cm, err := env.kube.CoreV1().ConfigMaps(victim).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		cm.Annotations = map[string]string{"llamastack.io/allowed-namespaces": "default, " + attacker + "-other,x" + attacker + ", " + strings.ToUpper(attacker)}
		_, err = env.kube.CoreV1().ConfigMaps(victim).Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	refused()
}

// assertNothingLeaked checks that no object of ns that the controller writes or that
// reports about it holds the secret, the secret key, or a reference to another
// namespace's ConfigMap: the managed copies do not exist, the Deployments mount nothing
// of another namespace, and neither the ConfigMaps, the Deployments, the CRs' status nor
// the Events contain the secret; nor does the controller's log.
func assertNothingLeaked(t *testing.T, ns, secret, secretKey string) {
	t.Helper()
	ctx := context.Background()
	_, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "ca-ca-bundle", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "ConfigMap %s/ca-ca-bundle exists (%v)", ns, err)
	copies, err := env.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, cm := range copies.Items {
		for _, copyOf := range []string{"user-user-config", "probe-user-config"} {
			assert.False(t, strings.HasPrefix(cm.Name, copyOf), "ConfigMap %s/%s, a copy, exists", ns, cm.Name)
		}
	}
	noSecret := func(what string, obj any) {
		t.Helper()
		raw, err := json.Marshal(obj)
		require.NoError(t, err)
		assert.NotContains(t, string(raw), secret, "%s holds the other namespace's secret", what)
		assert.NotContains(t, string(raw), secretKey, "%s holds the other namespace's secret key", what)
	}
	cms, err := env.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	noSecret("the ConfigMaps of "+ns, cms)
	deps, err := env.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	noSecret("the Deployments of "+ns, deps)
	for _, d := range deps.Items {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil {
				assert.NotContains(t, []string{"run-config", "ca"}, v.ConfigMap.Name, "Deployment %s mounts another namespace's ConfigMap", d.Name)
			}
		}
	}
	llsds, err := env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, l := range llsds.Items {
		noSecret("the status of "+l.Name, l.Status)
	}
	events, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	noSecret("the Events of "+ns, events)
	assert.NotContains(t, env.controllerLog.String(), secret, "the controller's log holds the secret")
}
