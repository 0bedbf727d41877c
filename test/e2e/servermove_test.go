//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
)

// The move across the rename: a CR with a generated config and a PVC that runs the
// previous release's pin (llama-stack 0.7.1) moves to this release's (OGX 1.3.0) in one
// rollout. The fake server of the new pod starts the OGX way (the image's entrypoint,
// the file at $RUN_CONFIG_PATH), refuses nothing (the config was regenerated for 1.3.0:
// no safety), and finds its sqlite stores at the paths on the volume where the 0.7.1
// server kept them; the claim is the same object.
func TestMoveFromThePreviousPinKeepsTheData(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	const previousPin = "docker.io/llamastack/distribution-starter:0.7.1"
	starter, ok := configgen.LookupDistribution("starter")
	require.True(t, ok)
	setOperatorConfig(t, map[string]string{"image-overrides": "starter: " + previousPin + "\n"})
	createPV(t, ns+"-pv", "10Gi")
	servers := env.servers.readConfig(t, ns, "moved")
	_, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, &v1alpha2.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: "moved"},
		Spec: v1alpha2.LlamaStackDistributionSpec{
			Distribution: v1alpha2.DistributionSpec{Name: "starter"},
			Providers: &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{
				Provider: "vllm", Endpoint: "http://vllm.models.svc:8000/v1",
			}}},
			Workload: v1alpha2.WorkloadSpec{Storage: &v1alpha2.PVCStorageSpec{}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitReady(t, ns, "moved")
	first := waitServed(t, servers, ns, "moved", "")
	assert.Equal(t, "0.7.1", first.server.version)
	assert.Contains(t, first.server.config["apis"], "safety", "the 0.7.1 base serves safety")
	oldPod := podNamed(t, ns, "moved", first.pod)
	_, hasOld := envValue(oldPod.Spec.Containers[0], "LLAMA_STACK_CONFIG")
	assert.True(t, hasOld, "the 0.7.1 server reads LLAMA_STACK_CONFIG")
	pvc, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "moved-pvc", metav1.GetOptions{})
	require.NoError(t, err)
	generation := deployment(t, ns, "moved").Generation

	// This release's pin: no override.
	setOperatorConfig(t, map[string]string{})
	waitDeployment(t, ns, "moved", "the new pin", func(d *appsv1.Deployment) bool { return server(d).Image == starter.Image })
	waitReady(t, ns, "moved")
	second := waitServed(t, servers, ns, "moved", first.configMap)
	srv := second.server
	assert.Equal(t, starter.ServerVersion, srv.version)
	assert.Equal(t, "/etc/llama-stack/config.yaml", srv.configPath, "the OGX server runs the mounted file")
	assert.NotContains(t, srv.config["apis"], "safety", "regenerated for 1.3.0")
	assert.Equal(t, generation+1, deployment(t, ns, "moved").Generation, "one rollout")
	d := deployment(t, ns, "moved")
	assert.Empty(t, server(d).Command, "the image's entrypoint")

	// Where each server keeps its stores: the 0.7.1 one under ~/.llama (the volume at
	// /.llama, home being / for the pod's user), the OGX one where SQLITE_STORE_DIR
	// points, on the same volume.
	dbPath := func(s *llamaServer) string {
		b := s.config["storage"].(map[string]any)["backends"].(map[string]any)["kv_default"].(map[string]any)
		p, _ := b["db_path"].(string)
		return strings.Replace(p, "~/", "/", 1)
	}
	assert.Equal(t, "/.llama/distributions/starter/kvstore.db", dbPath(first.server))
	assert.Equal(t, dbPath(first.server), dbPath(srv), "the OGX server finds the store the 0.7.1 server wrote")
	after, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "moved-pvc", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, pvc.UID, after.UID, "the same claim")
	assert.Nil(t, after.DeletionTimestamp)
	t.Logf("moved from pod %s (server %s, store %s) to pod %s (server %s, store %s, config %s)",
		first.pod, first.server.version, dbPath(first.server), second.pod, srv.version, dbPath(srv), srv.configPath)
}

// podNamed is the CR's running pod of that name.
func podNamed(t *testing.T, ns, name, pod string) *corev1.Pod {
	t.Helper()
	for _, p := range runningPods(t, ns, name) {
		if p.Name == pod {
			return &p
		}
	}
	t.Fatalf("no running pod %s of %s/%s", pod, ns, name)
	return nil
}
