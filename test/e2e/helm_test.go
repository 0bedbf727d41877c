//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

const chartDir = "charts/llama-stack-controller"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm is the helm command, built once from the version hack/tools pins
// (helm.sh/helm/v4), never downloaded.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		helmPath = filepath.Join(env.binDir, "..", "helm-from-hack-tools")
		cmd := exec.Command("go", "-C", filepath.Join(env.root, "hack", "tools"), "build", "-o", helmPath, "helm.sh/helm/v4/cmd/helm")
		if out, err := cmd.CombinedOutput(); err != nil {
			helmErr = fmt.Errorf("building helm: %v: %s", err, out)
		}
	})
	require.NoError(t, helmErr)
	return helmPath
}

// runHelm runs helm with args and returns its standard output.
func runHelm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	cmd.Dir = env.root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "helm %s: %s%s", strings.Join(args, " "), out, stderr.Bytes())
	return string(out)
}

// objectsOf parses a multi-document manifest into its objects by kind, namespace and name.
func objectsOf(t *testing.T, manifest string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split("\n"+manifest, "\n---") {
		obj := map[string]any{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		if len(obj) == 0 {
			continue
		}
		md, _ := obj["metadata"].(map[string]any)
		key := fmt.Sprintf("%s %v/%v", obj["kind"], md["namespace"], md["name"])
		require.NotContains(t, out, key, "an object twice")
		out[key] = obj
	}
	return out
}

// The chart renders exactly what kustomize renders: with the default values the
// objects of kubectl kustomize artifacts/, with webhook.certMode=cert-manager those of
// artifacts/overlays/cert-manager, with monitoring.enabled=true those of artifacts/ and
// artifacts/monitoring; and the values reach the objects.
func TestHelmChartRendersTheArtifacts(t *testing.T) {
	for _, tc := range []struct {
		name           string
		kustomizations []string
		set            []string
	}{
		{"defaults", []string{"artifacts"}, nil},
		{"cert-manager", []string{"artifacts/overlays/cert-manager"}, []string{"--set", "webhook.certMode=cert-manager"}},
		{"monitoring", []string{"artifacts", "artifacts/monitoring"}, []string{"--set", "monitoring.enabled=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var manifests []string
			for _, k := range tc.kustomizations {
				manifests = append(manifests, kubectl(t, "kustomize", filepath.Join(env.root, k)))
			}
			want := objectsOf(t, strings.Join(manifests, "\n---\n"))
			got := objectsOf(t, runHelm(t, append([]string{"template", "llsc", chartDir}, tc.set...)...))
			require.NotEmpty(t, want)
			assert.ElementsMatch(t, keysOf(want), keysOf(got), "the same objects")
			for key, obj := range want {
				assert.Equal(t, obj, got[key], key)
			}
		})
	}

	got := objectsOf(t, runHelm(t, "template", "llsc", chartDir, "--set", "image.repository=quay.io/example/llsc,image.tag=v1.2.3",
		"--set", "replicas=1,leaderElection.enabled=false,namespace=llsc,createNamespace=false,crds.install=false"))
	var d appsv1.Deployment
	raw, err := yaml.Marshal(got["Deployment llsc/llama-stack-controller"])
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &d))
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	assert.Equal(t, "quay.io/example/llsc:v1.2.3", d.Spec.Template.Spec.Containers[0].Image)
	assert.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--leader-elect=false")
	for key := range got {
		assert.NotContains(t, key, "llama-stack-controller-system", "every object in the namespace asked for")
		assert.False(t, strings.HasPrefix(key, "CustomResourceDefinition ") || strings.HasPrefix(key, "Namespace "), "%s: not asked for", key)
	}
	binding := got["ClusterRoleBinding <nil>/llama-stack-controller"]
	require.NotNil(t, binding)
	assert.Equal(t, "llsc", binding["subjects"].([]any)[0].(map[string]any)["namespace"])
	for key := range got {
		assert.NotContains(t, key, "Monitor", "monitoring is off by default")
	}
	got = objectsOf(t, runHelm(t, "template", "llsc", chartDir, "--set", "monitoring.enabled=true,monitoring.dashboard=false,monitoring.prometheusRule=false"))
	assert.Contains(t, got, "ServiceMonitor llama-stack-controller-system/llama-stack-controller")
	assert.NotContains(t, got, "PrometheusRule llama-stack-controller-system/llama-stack-controller")
	assert.NotContains(t, got, "ConfigMap llama-stack-controller-system/llama-stack-controller-dashboard")

	cmd := exec.Command(helm(t), "template", "llsc", chartDir, "--set", "webhook.certMode=other")
	cmd.Dir = env.root
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), `webhook.certMode must be self or cert-manager, got "other"`)
}

// The chart a release packages (hack/tools/release -chart, what make release runs after
// the push) renders, with its own values, the objects of the install.yaml written with
// it: the same image by digest, the same everything else.
func TestHelmChartPackageMatchesInstallManifest(t *testing.T) {
	dist := t.TempDir()
	cmd := exec.Command("go", "-C", filepath.Join(env.root, "hack", "tools"), "run", "./release", "-root", env.root,
		"-image", releaseImage, "-version", "v0.0.0-e2e", "-chart", "-out", dist)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/tools/release: %s", out)
	manifest, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
	require.NoError(t, err)
	want := objectsOf(t, string(manifest))
	got := objectsOf(t, runHelm(t, "template", "llsc", filepath.Join(dist, "llama-stack-controller-0.0.0-e2e.tgz"), "--namespace", "default"))
	require.NotEmpty(t, want)
	assert.ElementsMatch(t, keysOf(want), keysOf(got), "the same objects")
	for key, obj := range want {
		assert.Equal(t, obj, got[key], key)
	}
	d := got["Deployment llama-stack-controller-system/llama-stack-controller"]
	require.NotNil(t, d)
	containers, _, err := unstructured.NestedSlice(d, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	assert.Equal(t, releaseImage, containers[0].(map[string]any)["image"], "the image by digest")
}

func keysOf(m map[string]map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// helm install on a control plane of its own installs the controller as the artifacts
// do: the CRD established, the controller's Deployment available (kwok runs its pods),
// under Pod Security "restricted"; helm uninstall removes the release but keeps the
// CRD, and with it every CR and its claims.
func TestHelmInstall(t *testing.T) {
	ctx := context.Background()
	cluster, kube := ownCluster(t)

	out := runHelm(t, "install", "llsc", chartDir, "--kubeconfig", cluster.Kubeconfig(), "--namespace", "default", "--wait", "--timeout", "2m")
	t.Log(out)
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, cluster.RESTConfig(), "llamastackdistributions.llamastack.io", 30*time.Second))
	d, err := kube.AppsV1().Deployments(operatorNamespace).Get(ctx, "llama-stack-controller", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(2), d.Status.AvailableReplicas, "helm --wait returned with the Deployment available")
	ns, err := kube.CoreV1().Namespaces().Get(ctx, operatorNamespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])
	assert.Contains(t, runHelm(t, "list", "--kubeconfig", cluster.Kubeconfig(), "--namespace", "default"), "deployed")

	t.Log(runHelm(t, "uninstall", "llsc", "--kubeconfig", cluster.Kubeconfig(), "--namespace", "default", "--wait"))
	_, err = kube.AppsV1().Deployments(operatorNamespace).Get(ctx, "llama-stack-controller", metav1.GetOptions{})
	assert.Error(t, err, "the Deployment goes with the release")
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, cluster.RESTConfig(), "llamastackdistributions.llamastack.io", 5*time.Second),
		"the CRD stays: helm.sh/resource-policy keep")
}

// ownCluster starts a local control plane of two kwok nodes for one test, apart from the
// suite's, stopped when the test ends.
func ownCluster(t *testing.T) (*localcluster.Cluster, kubernetes.Interface) {
	t.Helper()
	cluster, err := localcluster.Start(context.Background(), localcluster.Options{BinDir: env.binDir, StagesFile: env.stagesFile, Nodes: 2})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cluster.Stop()) })
	return cluster, kubernetes.NewForConfigOrDie(cluster.RESTConfig())
}
