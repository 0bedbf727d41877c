//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
)

// A v1alpha2 CR with a vLLM provider and its API key in a Secret gets the config
// configgen writes, in a ConfigMap the Deployment mounts, the key as a secretKeyRef
// variable; a provider change rolls a new ConfigMap, the old one going once no
// ReplicaSet mounts it; a change configgen refuses keeps what runs.
func TestGeneratedConfigRollsAndKeepsWhatRuns(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	crs := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns)
	_, err := crs.Create(ctx, vllmCR(t, ns, "gen", "http://vllm.models.svc:8000/v1", "not-a-real-key"), metav1.CreateOptions{})
	require.NoError(t, err)

	waitReady(t, ns, "gen")
	first := checkGenerated(t, ns, "gen")

	// A provider setting changes: a new ConfigMap, mounted in the same Deployment write.
	editHub(t, ns, "gen", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Providers.Inference[0].Endpoint = "http://vllm-2.models.svc:8000/v1"
	})
	waitReady(t, ns, "gen")
	second := checkGenerated(t, ns, "gen")
	require.NotEqual(t, first, second)

	// The old ReplicaSet (kept for rollout undo) still mounts the old ConfigMap: it stays.
	old := "gen-config-" + first
	rss := replicaSetsMounting(t, ns, old)
	require.NotEmpty(t, rss, "the first revision's ReplicaSet is kept by the Deployment")
	time.Sleep(2 * time.Second) // a sync after the rollout had its chance to delete it
	_, err = env.kube.CoreV1().ConfigMaps(ns).Get(ctx, old, metav1.GetOptions{})
	require.NoError(t, err, "a ConfigMap a ReplicaSet mounts is never deleted")

	// Once that revision is gone from the history, so is its ConfigMap.
	for _, rs := range rss {
		require.NoError(t, env.kube.AppsV1().ReplicaSets(ns).Delete(ctx, rs, metav1.DeleteOptions{}))
	}
	eventually(t, 30*time.Second, "the unused ConfigMap is deleted", func(ctx context.Context) (bool, error) {
		_, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, old, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	_, err = env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "gen-config-"+second, metav1.GetOptions{})
	require.NoError(t, err, "the mounted one stays")

	// ollama has no API key field: configgen refuses it (the CRD does not); what runs stays,
	// and serves: the CR stays Ready, the refused change in Progressing.
	before := deployment(t, ns, "gen")
	editHub(t, ns, "gen", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Providers.Inference[0].Provider = "ollama" })
	var cond *metav1.Condition
	var refused *v1alpha2.LlamaStackDistribution
	eventually(t, 30*time.Second, "ConfigGenerated=False", func(ctx context.Context) (bool, error) {
		l, err := crs.Get(ctx, "gen", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		refused = l
		cond = meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionConfigGenerated)
		return l.Status.ObservedGeneration == l.Generation && cond != nil && cond.Status == metav1.ConditionFalse, nil
	})
	assert.Equal(t, v1alpha2.ReasonConfigInvalid, cond.Reason)
	assert.Contains(t, cond.Message, "spec.providers.inference[0]")
	assert.Equal(t, v1alpha2.PhaseReady, refused.Status.Phase)
	assert.True(t, meta.IsStatusConditionTrue(refused.Status.Conditions, v1alpha2.ConditionReady))
	assert.True(t, meta.IsStatusConditionTrue(refused.Status.Conditions, v1alpha2.ConditionDeploymentReady))
	if p := meta.FindStatusCondition(refused.Status.Conditions, v1alpha2.ConditionProgressing); assert.NotNil(t, p) {
		assert.Equal(t, metav1.ConditionFalse, p.Status)
		assert.Equal(t, v1alpha2.ReasonConfigInvalid, p.Reason)
		assert.Equal(t, cond.Message+"; the Deployment keeps its template, its replica count follows the CR", p.Message,
			"Progressing says what is held")
	}
	// kubectl get llsd shows it; v1alpha1 keeps upstream's columns.
	printed := printedColumns(t, ns, "gen", "v1alpha2")
	assert.Equal(t, "Ready", printed["Phase"])
	assert.Equal(t, "True", printed["Ready"])
	assert.Equal(t, v1alpha2.ReasonConfigInvalid, printed["Progressing"])
	assert.NotContains(t, printedColumns(t, ns, "gen", "v1alpha1"), "Progressing")
	after := deployment(t, ns, "gen")
	assert.Equal(t, before.Generation, after.Generation, "the Deployment is not written")
	assert.Equal(t, before.Spec.Template, after.Spec.Template)
	_, err = env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "gen-config-"+second, metav1.GetOptions{})
	require.NoError(t, err, "the running ConfigMap stays")
	l, err := crs.Get(ctx, "gen", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, second, l.Status.ResolvedDistribution.ConfigHash, "resolvedDistribution still describes what runs")
	eventually(t, 10*time.Second, "a Warning Event", func(ctx context.Context) (bool, error) {
		ev, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range ev.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == v1alpha2.ReasonConfigInvalid && e.InvolvedObject.Name == "gen" {
				return true, nil
			}
		}
		return false, nil
	})
}

// checkGenerated checks a Ready generating CR: its status, its ConfigMap's content
// against configgen's own output for the stored spec, the Deployment's mount and
// variable. It returns the config hash.
func checkGenerated(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	l, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha2.ConditionReady))
	assert.True(t, meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha2.ConditionConfigGenerated))
	rd := l.Status.ResolvedDistribution
	require.NotNil(t, rd)
	d, ok := configgen.LookupDistribution("starter")
	require.True(t, ok)
	assert.Equal(t, d.Image, rd.Image)
	assert.Equal(t, d.ServerVersion, rd.ServerVersion)
	base, err := d.Base()
	require.NoError(t, err)
	want, err := configgen.Generate(configgen.Input{Name: name, Spec: l.Spec, ServerVersion: d.ServerVersion, Base: base})
	require.NoError(t, err)
	require.Equal(t, want.Hash, rd.ConfigHash)

	cmName := name + "-config-" + want.Hash
	cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
	require.NoError(t, err)
	var got, expected any
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &got))
	require.NoError(t, yaml.Unmarshal(want.Config, &expected))
	assert.Equal(t, expected, got, "the ConfigMap holds configgen's config")
	assert.True(t, cm.Immutable != nil && *cm.Immutable)

	dep := deployment(t, ns, name)
	mounted := false
	for _, v := range dep.Spec.Template.Spec.Volumes {
		mounted = mounted || v.ConfigMap != nil && v.ConfigMap.Name == cmName
	}
	assert.True(t, mounted, "the Deployment mounts %s", cmName)
	ctr := dep.Spec.Template.Spec.Containers[0]
	assert.Equal(t, d.Image, ctr.Image)
	assert.Contains(t, ctr.VolumeMounts, corev1.VolumeMount{Name: "user-config", MountPath: "/etc/llama-stack/", ReadOnly: true})
	var key *corev1.EnvVar
	for i := range ctr.Env {
		if ctr.Env[i].Name == "LLSD_VLLM_API_KEY" {
			key = &ctr.Env[i]
		}
	}
	require.NotNil(t, key, "the API key variable")
	assert.Empty(t, key.Value)
	require.NotNil(t, key.ValueFrom)
	assert.Equal(t, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "vllm-creds"}, Key: "api-key"}, key.ValueFrom.SecretKeyRef)
	return want.Hash
}

// vllmCR is a CR of name in ns whose config is generated for one vLLM provider at
// endpoint; its API key, key, is in the Secret vllm-creds, which it creates.
func vllmCR(t *testing.T, ns, name, endpoint, key string) *v1alpha2.LlamaStackDistribution {
	t.Helper()
	_, err := env.kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "vllm-creds"},
		StringData: map[string]string{"api-key": key},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return &v1alpha2.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha2.LlamaStackDistributionSpec{
			Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Providers: &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{
				Provider: "vllm", Endpoint: endpoint,
				APIKey: &v1alpha2.SecretValue{SecretKeyRef: v1alpha2.SecretKeyRef{Name: "vllm-creds", Key: "api-key"}},
			}}},
		},
	}
}

// editHub changes a CR in v1alpha2, retrying on conflicts.
func editHub(t *testing.T, ns, name string, mod func(*v1alpha2.LlamaStackDistribution)) {
	t.Helper()
	crs := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns)
	eventually(t, 10*time.Second, "the CR is updated", func(ctx context.Context) (bool, error) {
		l, err := crs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mod(l)
		_, err = crs.Update(ctx, l, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// replicaSetsMounting lists the ReplicaSets of the namespace whose pod template mounts the ConfigMap.
func replicaSetsMounting(t *testing.T, ns, configMap string) []string {
	t.Helper()
	list, err := env.kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, rs := range list.Items {
		if mountsConfigMap(&rs, configMap) {
			out = append(out, rs.Name)
		}
	}
	return out
}

func mountsConfigMap(rs *appsv1.ReplicaSet, name string) bool {
	for _, v := range rs.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == name {
			return true
		}
	}
	return false
}

// Every example whose config the controller generates applies and converges, with its
// config generated into the ConfigMap the status names.
func TestGeneratedConfigExamplesConverge(t *testing.T) {
	ctx := context.Background()
	resources := map[string]schema.GroupVersionResource{
		"Secret":                 {Version: "v1", Resource: "secrets"},
		"ConfigMap":              {Version: "v1", Resource: "configmaps"},
		"LlamaStackDistribution": llsdV1alpha2,
	}
	for _, example := range []string{"vllm-api-key", "providers", "state-storage", "base-config", "disabled-apis"} {
		t.Run(example, func(t *testing.T) {
			objs, err := readObjects(filepath.Join(env.root, "artifacts", "examples", "v1alpha2", example+".yaml"))
			require.NoError(t, err)
			ns := newNamespace(t)
			var name string
			for _, obj := range objs {
				gvr, ok := resources[obj.GetKind()]
				require.True(t, ok, "a %s in the example", obj.GetKind())
				if obj.GetKind() == "LlamaStackDistribution" {
					require.Empty(t, name, "one CR per example")
					name = obj.GetName()
				}
				obj.SetNamespace(ns)
				_, err := env.dynamic.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			require.NotEmpty(t, name)
			waitReady(t, ns, name)
			l, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			c := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionConfigGenerated)
			require.NotNil(t, c, "ConfigGenerated is reported")
			assert.Equal(t, metav1.ConditionTrue, c.Status, "%s: %s", c.Reason, c.Message)
			require.NotNil(t, l.Status.ResolvedDistribution)
			_, err = env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name+"-config-"+l.Status.ResolvedDistribution.ConfigHash, metav1.GetOptions{})
			require.NoError(t, err)
		})
	}
}
