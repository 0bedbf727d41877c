//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// TestOperatorConfigMistakesKeepWhatRuns: a typo in featureFlags, one bad image-overrides
// entry, and a deleted operator ConfigMap are invalid input on the real API server: no
// NetworkPolicy is deleted and no pod rolls; a Warning Event on the ConfigMap names the
// key; new CRs get the built-in defaults. The one exception: once the ConfigMap is
// deleted, a Deployment on an earlier release's built-in image (:latest) moves to the
// pinned one, as it does with a ConfigMap that sets no override.
func TestOperatorConfigMistakesKeepWhatRuns(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	const pinned = "quay.io/test/llama-stack:pinned"
	const latest = "docker.io/llamastack/distribution-postgres-demo:latest"
	setOperatorConfig(t, map[string]string{
		"featureFlags":    "enableNetworkPolicy:\n  enabled: true\n",
		"image-overrides": "starter: " + pinned + "\nremote-vllm: " + pinned + "\npostgres-demo: " + latest + "\n",
	})
	create(t, llsd(ns, "app"))
	create(t, llsd(ns, "vllm", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = "remote-vllm" }))
	create(t, llsd(ns, "old", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = "postgres-demo" }))
	for _, name := range []string{"app", "vllm"} {
		waitDeployment(t, ns, name, "the overridden image", func(d *appsv1.Deployment) bool { return server(d).Image == pinned })
		waitReady(t, ns, name)
	}
	waitDeployment(t, ns, "old", "the image of an earlier release", func(d *appsv1.Deployment) bool { return server(d).Image == latest })
	waitReady(t, ns, "old")
	policy := func(name string) *metav1.ObjectMeta {
		np, err := env.kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, name+"-network-policy", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return &np.ObjectMeta
	}
	eventually(t, 30*time.Second, "the NetworkPolicies exist", func(context.Context) (bool, error) {
		return policy("app") != nil && policy("vllm") != nil, nil
	})
	before := map[string]string{"app": string(policy("app").UID), "vllm": string(policy("vllm").UID)}
	generations := map[string]int64{"app": deployment(t, ns, "app").Generation, "vllm": deployment(t, ns, "vllm").Generation}
	unchanged := func(what string) {
		t.Helper()
		for name, uid := range before {
			np := policy(name)
			if assert.NotNil(t, np, "%s: the NetworkPolicy of %s is gone", what, name) {
				assert.Equal(t, uid, string(np.UID), "%s: the NetworkPolicy of %s was replaced", what, name)
			}
			d := deployment(t, ns, name)
			assert.Equal(t, pinned, server(d).Image, "%s: %s rolled to another image", what, name)
			assert.Equal(t, generations[name], d.Generation, "%s: the Deployment of %s changed", what, name)
		}
	}

	// A typo in featureFlags and one bad entry: nothing changes; each is named in a Warning.
	setOperatorConfig(t, map[string]string{
		"featureFlags":    "enableNetworkPolicy:\n  enable: true\n",
		"image-overrides": "starter: " + pinned + "\nremote-vllm: 'Not An Image!'\npostgres-demo: " + latest + "\n",
	})
	warnings := waitOperatorConfigWarnings(t, "InvalidConfiguration", 2)
	assert.True(t, containsAll(warnings, `"enable"`, "featureFlags"), "warnings: %q", warnings)
	assert.True(t, containsAll(warnings, "Not An Image!", "remote-vllm"), "warnings: %q", warnings)
	settle(t)
	unchanged("after the typo")

	// A new CR of the distribution with the bad entry gets the built-in image, and
	// remote-vllm has none published: it is told what to use, and nothing is made;
	// no new NetworkPolicy is made while the flag cannot be read.
	create(t, llsd(ns, "fresh", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = "remote-vllm" }))
	waitCondition(t, ns, "fresh", v1alpha2.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha2.ReasonDistributionNotPublished)
	_, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "fresh", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no Deployment of an image that is not published: %v", err)
	assert.Nil(t, policy("fresh"))

	// The ConfigMap deleted: still nothing changes, and the deletion is reported.
	oldGeneration := deployment(t, ns, "old").Generation
	require.NoError(t, env.kube.CoreV1().ConfigMaps(operatorNamespace).Delete(ctx, "llama-stack-operator-config", metav1.DeleteOptions{}))
	missing := waitOperatorConfigWarnings(t, "OperatorConfigMissing", 1)
	assert.True(t, containsAll(missing, "kept as they are until it is recreated"), "warnings: %q", missing)
	settle(t)
	unchanged("after the ConfigMap was deleted")
	// But an earlier release's built-in image is not an override: it moves to the pin, once.
	waitDeployment(t, ns, "old", "the pinned image", func(d *appsv1.Deployment) bool {
		return server(d).Image == "docker.io/ogxai/distribution-postgres-demo:1.3.0"
	})
	settle(t)
	assert.Equal(t, oldGeneration+1, deployment(t, ns, "old").Generation, "one write of the Deployment")
	for _, name := range []string{"app", "vllm", "old"} {
		assert.True(t, isReady(get(t, ns, name)), "%s stays Ready", name)
	}
	assert.Equal(t, v1alpha2.ReasonDistributionNotPublished, findCondition(get(t, ns, "fresh"), v1alpha2.ConditionDeploymentReady).Reason,
		"fresh still names a distribution without a published image")
}

func isReady(l *v1alpha1.LlamaStackDistribution) bool {
	for _, c := range l.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// waitOperatorConfigWarnings waits for at least n Warning Events with reason on the
// operator ConfigMap, and returns their messages.
func waitOperatorConfigWarnings(t *testing.T, reason string, n int) []string {
	t.Helper()
	var msgs []string
	eventually(t, 30*time.Second, "Warning Events "+reason+" on the operator ConfigMap", func(ctx context.Context) (bool, error) {
		evs, err := env.kube.CoreV1().Events(operatorNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		msgs = msgs[:0]
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && e.InvolvedObject.Name == "llama-stack-operator-config" {
				msgs = append(msgs, e.Message)
			}
		}
		return len(msgs) >= n, nil
	})
	return msgs
}

// containsAll tells whether one of msgs contains every one of subs.
func containsAll(msgs []string, subs ...string) bool {
	for _, m := range msgs {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(m, s)
		}
		if all {
			return true
		}
	}
	return false
}
