//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// releaseImage is the image the release tests write into install.yaml: by digest, as a
// release names it; kwok's nodes pull nothing, so no registry needs to have it.
var releaseImage = "ghcr.io/llamastack/llama-stack-controller@sha256:" + strings.Repeat("e", 64)

// makeManifests runs make manifests, as make release runs it after the push, and
// returns the install.yaml it wrote.
func makeManifests(t *testing.T) string {
	t.Helper()
	dist := t.TempDir()
	cmd := exec.Command("make", "-C", env.root, "--no-print-directory", "manifests", "IMAGE="+releaseImage, "DIST_DIR="+dist, "VERSION=v0.0.0-e2e")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make manifests: %s", out)
	manifest, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
	require.NoError(t, err)
	return string(manifest)
}

// The install.yaml of a release (make manifests, what make release writes after it
// pushed the image) installs everything with kubectl apply --server-side, every object
// admitted, and the controller's own Deployment runs the image by digest in its
// namespace, which enforces Pod Security "restricted". kwok then reports its pods
// Running: its nodes pull no image and run nothing, so the controller in them never runs
// here (the in-process controller of the suite does the work). The CRD's conversion
// webhook stays where the suite points it (loopback, the in-process controller): through
// the Service every conversion of the suite would fail.
func TestReleaseManifestInstallsUnderRestricted(t *testing.T) {
	ctx := context.Background()
	rendered := makeManifests(t)
	var docs []string
	for _, doc := range strings.Split(rendered, "\n---\n") {
		obj := map[string]any{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		if obj["kind"] == "CustomResourceDefinition" {
			cc, found, err := unstructured.NestedMap(obj, "spec", "conversion", "webhook", "clientConfig", "service")
			require.NoError(t, err)
			require.True(t, found, "the artifacts' CRD converts through the webhook Service")
			assert.Equal(t, "llama-stack-controller-webhook", cc["name"])
			suite, err := env.dynamic.Resource(crdResource).Get(ctx, obj["metadata"].(map[string]any)["name"].(string), metav1.GetOptions{})
			require.NoError(t, err)
			url, _, _ := unstructured.NestedString(suite.Object, "spec", "conversion", "webhook", "clientConfig", "url")
			require.NotEmpty(t, url)
			require.NoError(t, unstructured.SetNestedMap(obj, map[string]any{"url": url}, "spec", "conversion", "webhook", "clientConfig"))
		}
		raw, err := yaml.Marshal(obj)
		require.NoError(t, err)
		docs = append(docs, string(raw))
	}
	manifest := filepath.Join(t.TempDir(), "artifacts.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(strings.Join(docs, "---\n")), 0o600))
	out := kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", manifest)
	t.Log(out)
	assert.Contains(t, out, "service/llama-stack-controller-webhook serverside-applied")
	assert.Equal(t, len(docs), strings.Count(out, " serverside-applied\n"), "every object of install.yaml admitted")
	t.Cleanup(func() {
		_ = env.kube.AppsV1().Deployments(operatorNamespace).Delete(context.Background(), "llama-stack-controller", metav1.DeleteOptions{})
		_ = env.kube.PolicyV1().PodDisruptionBudgets(operatorNamespace).Delete(context.Background(), "llama-stack-controller", metav1.DeleteOptions{})
		_ = env.kube.CoreV1().ConfigMaps(operatorNamespace).Delete(context.Background(), "llama-stack-operator-config", metav1.DeleteOptions{})
	})
	ns, err := env.kube.CoreV1().Namespaces().Get(ctx, operatorNamespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])
	// Two replicas (leader and standby), each with the health probes, on different nodes.
	d := waitDeployment(t, operatorNamespace, "llama-stack-controller", "the controller's Deployment is Available", func(d *appsv1.Deployment) bool {
		return d.Status.AvailableReplicas == 2
	})
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, releaseImage, c.Image, "the image by digest")
	assert.Contains(t, c.Args, "--leader-elect=true")
	require.NotNil(t, c.LivenessProbe)
	require.NotNil(t, c.ReadinessProbe)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	pods, err := env.kube.CoreV1().Pods(operatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=llama-stack-controller"})
	require.NoError(t, err)
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			nodes[p.Spec.NodeName] = true
		}
	}
	assert.Len(t, nodes, 2, "the pods are spread over nodes")
	pdb, err := env.kube.PolicyV1().PodDisruptionBudgets(operatorNamespace).Get(ctx, "llama-stack-controller", metav1.GetOptions{})
	if assert.NoError(t, err, "the controller's PodDisruptionBudget") {
		assert.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue())
	}
	for _, name := range []string{"llama-stack-controller", "llamastackdistribution-editor", "llamastackdistribution-viewer"} {
		_, err := env.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		assert.NoError(t, err, "ClusterRole %s", name)
	}
	_, err = env.kube.RbacV1().Roles(operatorNamespace).Get(ctx, "llama-stack-controller-leader-election", metav1.GetOptions{})
	assert.NoError(t, err, "the leader election Role")
	assert.Contains(t, c.Args, "--webhook-bind-address=:9443")
	svc, err := env.kube.CoreV1().Services(operatorNamespace).Get(ctx, "llama-stack-controller-webhook", metav1.GetOptions{})
	if assert.NoError(t, err, "the webhook Service") {
		assert.Equal(t, int32(443), svc.Spec.Ports[0].Port)
	}
	// The Service's endpoints are the ready controller pods.
	eventually(t, 30*time.Second, "the webhook Service has the two replicas as endpoints", func(ctx context.Context) (bool, error) {
		slices, err := env.kube.DiscoveryV1().EndpointSlices(operatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=llama-stack-controller-webhook"})
		if err != nil {
			return false, err
		}
		n := 0
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					n++
				}
			}
		}
		return n == 2, nil
	})
	// The conversion still goes to the suite's controller.
	_, err = env.client.LlamastackV1alpha1().LlamaStackDistributions("default").List(ctx, metav1.ListOptions{})
	assert.NoError(t, err)
}

// make deploy with an image loaded into the nodes (PUSH_IMAGE=false, as for kind or
// minikube) applies the install manifest to the kubectl context it is given, on a control
// plane of its own (the CRD's conversion webhook then points at the Service, as in a real
// cluster): the CRD established, the controller's Deployment available with the image as
// given (kwok runs its pods), under Pod Security "restricted"; run again, it changes
// nothing.
func TestMakeDeployWithALoadedImage(t *testing.T) {
	ctx := context.Background()
	cluster, kube := ownCluster(t)
	deploy := func() string {
		cmd := exec.Command("make", "-C", env.root, "--no-print-directory", "deploy", "IMAGE=llama-stack-controller:dev", "PUSH_IMAGE=false",
			"BIN_DIR="+t.TempDir(), "KUBECTL="+env.binDir+"/kubectl --kubeconfig "+cluster.Kubeconfig())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "make deploy: %s", out)
		return string(out)
	}
	out := deploy()
	t.Log(out)
	assert.NotContains(t, out, "image: wrote", "nothing built")
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, cluster.RESTConfig(), "llamastackdistributions.llamastack.io", 30*time.Second))
	var d *appsv1.Deployment
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := kube.AppsV1().Deployments(operatorNamespace).Get(ctx, "llama-stack-controller", metav1.GetOptions{})
		d = got
		return err == nil && got.Status.AvailableReplicas == 2, nil
	}), "the controller's Deployment is available")
	assert.Equal(t, "llama-stack-controller:dev", d.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, corev1.PullIfNotPresent, d.Spec.Template.Spec.Containers[0].ImagePullPolicy, "a tag other than latest: the loaded image is used")
	ns, err := kube.CoreV1().Namespaces().Get(ctx, operatorNamespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])

	deploy()
	assert.Equal(t, d.Generation, func() int64 {
		d2, err := kube.AppsV1().Deployments(operatorNamespace).Get(ctx, "llama-stack-controller", metav1.GetOptions{})
		require.NoError(t, err)
		return d2.Generation
	}(), "run again, the Deployment is unchanged")
}

// Server pods meet Pod Security "restricted" by default: a CR in a namespace that
// enforces it becomes Ready.
func TestServerPodsRestricted(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	n, err := env.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	n.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	_, err = env.kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)

	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = &v1alpha1.StorageSpec{} }))
	createPV(t, ns+"-pv", "10Gi")
	waitReady(t, ns, "app")

	// The control: a pod that is not restricted is refused in that namespace.
	_, err = env.kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "privileged"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1"}}},
	}, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "violates PodSecurity")
}
