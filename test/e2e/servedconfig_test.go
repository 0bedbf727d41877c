//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
)

// The whole path of a generated config, CR → ConfigMap → pod → status: the pods run the
// fake llama-stack server, which reads the config file the pod mounts and the API key
// the pod takes from the Secret, and the controller reports what that server lists.
// An edit rolls a new ConfigMap and pod, and the status follows; a pod whose Secret is
// missing never serves, which the CR reports without failing otherwise, until the
// Secret appears.
func TestGeneratedConfigServedByTheServer(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	servers := env.servers.readConfig(t, ns, "served")
	apiKey := fmt.Sprintf("vllm-key-%08x", rand.Uint32())
	const endpoint = "http://vllm.models.svc:8000/v1"
	cr := vllmCR(t, ns, "served", endpoint, apiKey)
	cr.Spec.Resources = &v1alpha2.ResourcesSpec{Models: []v1alpha2.ModelConfig{{Name: "llama3-8b", ProviderModelID: "meta-llama/Llama-3.1-8B-Instruct"}}}
	_, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, cr, metav1.CreateOptions{})
	require.NoError(t, err)

	starter, ok := configgen.LookupDistribution("starter")
	require.True(t, ok)
	waitReady(t, ns, "served")
	first := waitServed(t, servers, ns, "served", "")
	l := waitCondition(t, ns, "served", v1alpha1.ConditionHealthCheck, metav1.ConditionTrue, v1alpha1.ReasonHealthCheckPassed)
	assert.Equal(t, starter.ServerVersion, l.Status.Version.LlamaStackServerVersion, "the version the server reports: its image's")
	ids := providerIDs(l.Status.DistributionConfig.Providers)
	assert.Contains(t, ids, "inference/vllm=remote::vllm")
	assert.NotContains(t, ids, "inference/openai=remote::openai", "the CR's inference providers replace the base's")
	assert.Contains(t, ids, "vector_io/faiss=inline::faiss", "the base's providers of other APIs")
	assert.NotContains(t, ids, "vector_io/milvus=inline::milvus", "a provider switched on by an unset variable is not started")

	// The server resolved the API key from the Secret; the controller put it nowhere.
	srv := first.server
	inference := srv.config["providers"].(map[string]any)["inference"].([]any)
	require.Len(t, inference, 1)
	vllm := inference[0].(map[string]any)["config"].(map[string]any)
	assert.Equal(t, apiKey, vllm["api_token"], "the server's api_token is the Secret's value")
	assert.Equal(t, endpoint, vllm["base_url"])
	for _, p := range srv.providers {
		if p.ProviderID == "vllm" {
			assert.Equal(t, "********", p.Config["api_token"], "the server redacts it in /v1/providers")
		}
	}
	assertNowhere(t, ns, "served", apiKey)

	// A second inference provider and a provider switched on by a variable: a new
	// ConfigMap, a new pod, and the status lists what the new server lists.
	editHub(t, ns, "served", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Providers.Inference[0].ID = "vllm" // a list of two names each
		l.Spec.Providers.Inference = append(l.Spec.Providers.Inference, v1alpha2.ProviderConfig{
			ID: "vllm-small", Provider: "vllm", Endpoint: "http://vllm-small.models.svc:8000/v1"})
		l.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{Env: []corev1.EnvVar{{Name: "MILVUS_URL", Value: "milvus.db"}}}
	})
	waitReady(t, ns, "served")
	second := waitServed(t, servers, ns, "served", first.configMap)
	ids = providerIDs(second.status)
	assert.Contains(t, ids, "inference/vllm=remote::vllm")
	assert.Contains(t, ids, "inference/vllm-small=remote::vllm")
	assert.Contains(t, ids, "vector_io/milvus=inline::milvus", "MILVUS_URL is set now")
	assert.NotEqual(t, first.pod, second.pod)

	// A disabled API leaves the file, and so the server's list and the status.
	editHub(t, ns, "served", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Disabled = []v1alpha2.APIName{v1alpha2.APIBatches}
	})
	waitReady(t, ns, "served")
	third := waitServed(t, servers, ns, "served", second.configMap)
	ids = providerIDs(third.status)
	assert.Contains(t, providerIDs(second.status), "batches/reference=inline::reference")
	assert.NotContains(t, ids, "batches/reference=inline::reference")
	assert.Contains(t, ids, "inference/vllm-small=remote::vllm")
	assertNowhere(t, ns, "served", apiKey)

	// A CR whose Secret does not exist: kwok runs the pod, but the server in it would
	// never start. The CR is Ready (the Deployment is) and says the server does not
	// answer; once the Secret exists the server starts and the check passes.
	_, err = env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, &v1alpha2.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: "nokey"},
		Spec: v1alpha2.LlamaStackDistributionSpec{
			Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Providers: &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{
				Provider: "vllm", Endpoint: endpoint,
				APIKey: &v1alpha2.SecretValue{SecretKeyRef: v1alpha2.SecretKeyRef{Name: "absent", Key: "api-key"}},
			}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	nokey := env.servers.readConfig(t, ns, "nokey")
	waitReady(t, ns, "nokey")
	l = waitCondition(t, ns, "nokey", v1alpha1.ConditionHealthCheck, metav1.ConditionFalse, v1alpha1.ReasonHealthCheckFailed)
	t.Logf("HealthCheck of a server that cannot start: %s", findCondition(l, v1alpha1.ConditionHealthCheck).Message)
	assert.Empty(t, l.Status.Version.LlamaStackServerVersion)
	assert.Empty(t, l.Status.DistributionConfig.Providers)
	assert.Equal(t, v1alpha1.PhaseReady, l.Status.Phase, "a server that does not answer is no error of the CR")
	pods := runningPods(t, ns, "nokey")
	require.Len(t, pods, 1)
	require.Error(t, nokey.failure(pods[0].Name), "the fake server refused to start")
	assert.Contains(t, nokey.failure(pods[0].Name).Error(), `secret "absent" not found`)
	_, err = env.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "absent"},
		StringData: map[string]string{"api-key": "late-key"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitServed(t, nokey, ns, "nokey", "")
	// The controller itself still serves the first CR.
	l = waitCondition(t, ns, "served", v1alpha1.ConditionHealthCheck, metav1.ConditionTrue, v1alpha1.ReasonHealthCheckPassed)
	assert.Equal(t, providerIDs(third.status), providerIDs(l.Status.DistributionConfig.Providers))
}

// served is a generating CR's state once its status reports its running server.
type served struct {
	configMap string
	pod       string
	server    *llamaServer
	status    []v1alpha1.ProviderInfo
}

// waitServed waits until the CR's ConfigMap is not previous (a new one after an edit)
// and its status lists exactly the providers its config file starts on the pod running
// now: those with a literal provider_id, and those ${env.X:+id} whose X the server
// container sets. It checks the pod's fake server read that file.
func waitServed(t *testing.T, servers *llamaServers, ns, name, previous string) served {
	t.Helper()
	var out served
	var want []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		hub, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || hub.Status.ResolvedDistribution == nil {
			return false, err
		}
		out.configMap = name + "-config-" + hub.Status.ResolvedDistribution.ConfigHash
		if out.configMap == previous || !meta.IsStatusConditionTrue(hub.Status.Conditions, v1alpha2.ConditionHealthCheck) {
			return false, nil
		}
		pods := runningPods(t, ns, name)
		if len(pods) != 1 || !mountsConfigMapPod(&pods[0], out.configMap) {
			return false, nil // the rollout is not over
		}
		cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, out.configMap, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want = fileProviders(t, cm.Data["config.yaml"], setVariables(pods[0]))
		l, err := env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		out.pod, out.status = pods[0].Name, l.Status.DistributionConfig.Providers
		return strings.Join(providerIDs(out.status), " ") == strings.Join(want, " "), nil
	})
	assert.Equal(t, want, providerIDs(out.status), "the status lists what the config file starts")
	require.NoError(t, err, "waiting until %s/%s reports the providers of its new config (%s)", ns, name, out.configMap)
	for _, p := range out.status {
		assert.Empty(t, p.Config.Raw, "no provider config in the status")
		assert.Equal(t, "Not Implemented", p.Health.Status)
	}
	srv, ok := servers.server(out.pod)
	require.True(t, ok, "pod %s runs the fake server", out.pod)
	out.server = srv
	return out
}

// runningPods are the CR's pods that run and are not being deleted.
func runningPods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	list, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + name})
	require.NoError(t, err)
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out
}

func mountsConfigMapPod(p *corev1.Pod, name string) bool {
	for _, v := range p.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == name {
			return true
		}
	}
	return false
}

// setVariables are the names of the server container's variables.
func setVariables(p corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			out[e.Name] = true
		}
	}
	return out
}

var conditionalID = regexp.MustCompile(`^\$\{env\.([A-Z0-9_]+):\+([^}]+)\}$`)

// fileProviders lists "api/id=type" for every provider of config.yaml the server
// starts, sorted: a literal id, or ${env.X:+id} with X set.
func fileProviders(t *testing.T, config string, set map[string]bool) []string {
	t.Helper()
	var doc struct {
		Providers map[string][]struct {
			ID   string `json:"provider_id"`
			Type string `json:"provider_type"`
		} `json:"providers"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(config), &doc))
	var out []v1alpha1.ProviderInfo
	for api, list := range doc.Providers {
		for _, p := range list {
			id := p.ID
			if strings.Contains(id, "${") {
				m := conditionalID.FindStringSubmatch(id)
				require.NotNil(t, m, "a provider_id the test does not read: %s", id)
				if !set[m[1]] {
					continue
				}
				id = m[2]
			}
			out = append(out, v1alpha1.ProviderInfo{API: api, ProviderID: id, ProviderType: p.Type})
		}
	}
	return providerIDs(out)
}

// providerIDs are "api/id=type" of each provider, sorted as the controller sorts.
func providerIDs(ps []v1alpha1.ProviderInfo) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.API+"/"+p.ProviderID+"="+p.ProviderType)
	}
	slices.Sort(out)
	return out
}

// assertNowhere checks that value is in none of the namespace's ConfigMaps, the
// Deployment and the CR (spec and status).
func assertNowhere(t *testing.T, ns, name, value string) {
	t.Helper()
	ctx := context.Background()
	cms, err := env.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, cms.Items)
	for _, obj := range []any{cms, deployment(t, ns, name), get(t, ns, name)} {
		b, err := json.Marshal(obj)
		require.NoError(t, err)
		assert.NotContains(t, string(b), value, "the Secret's value is in a %T", obj)
	}
}
