//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
	"github.com/llamastack/llama-stack-controller/test/upstream"
)

// previousRelease is the commit of this repository that the upgrade test starts from:
// the last one whose CI passed before llamastack.io/v1alpha2, whose CRD serves and
// stores v1alpha1 alone and whose controller syncs v1alpha1.
const previousRelease = "1d14815"

// imageAnnotation is the Deployment annotation that records the controller's choice of
// image, added after the previous release.
const imageAnnotation = "llamastack.io/image"

// currentVersion is the version the controller of this tree reports in the upgrade
// tests, so that a CR's status tells which controller wrote it.
const currentVersion = "upgrade-e2e"

// previousReleaseCRs are CRs with every feature that makes a child: a plain one;
// storage with env, workers and pod overrides; a user config and a CA bundle; a user
// config from another namespace (copied); autoscaling with a PDB and two replicas; an
// Ingress with the NetworkPolicy's allowed namespaces and labels; a direct image
// instead of a distribution name. NetworkPolicies are on for all (the operator
// ConfigMap).
func previousReleaseCRs(ns, shared string) []*v1alpha1.LlamaStackDistribution {
	size := resource.MustParse("2Gi")
	return []*v1alpha1.LlamaStackDistribution{
		llsd(ns, "plain"),
		llsd(ns, "storage", func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.Storage = &v1alpha1.StorageSpec{Size: &size, MountPath: "/data"}
			l.Spec.Server.Workers = ptr.To[int32](2)
			l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "INFERENCE_MODEL", Value: "llama3.2:1b"}}
			l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{
				TerminationGracePeriodSeconds: ptr.To[int64](45),
				Volumes:                       []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				VolumeMounts:                  []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
			}
		}),
		llsd(ns, "config", func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "run-config"}
			l.Spec.Server.TLSConfig = &v1alpha1.TLSConfig{CABundle: &v1alpha1.CABundleConfig{ConfigMapName: "ca"}}
		}),
		llsd(ns, "shared-config", func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "run-config", ConfigMapNamespace: shared}
		}),
		llsd(ns, "scaled", func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Replicas = 2
			l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 4, TargetCPUUtilizationPercentage: ptr.To[int32](70)}
			l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}
		}),
		llsd(ns, "exposed", func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Network = &v1alpha1.NetworkSpec{
				ExposeRoute: true,
				Ingress:     &v1alpha1.IngressSpec{Host: "llama.example.com"},
				AllowedFrom: &v1alpha1.AllowedFromSpec{Namespaces: []string{shared}, Labels: []v1alpha1.LabelKey{"team"}},
			}
		}),
		llsd(ns, "direct", func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.Distribution = v1alpha1.DistributionType{Image: "docker.io/llamastack/distribution-starter:0.2.0"}
		}),
	}
}

// TestUpgradeFromThePreviousRelease installs the previous release (its CRD, which
// stores v1alpha1, and its controller, built from git) on a control plane of its own,
// lets it make the children of CRs with every feature, stops it, and installs this
// tree's CRD (v1alpha2 stored, converted by the webhook) and controller. Then:
//   - until the new controller serves the webhook, the CRs read in v1alpha1, not in
//     v1alpha2;
//   - every child is the object it was, not written at all (same resourceVersion),
//     except each Deployment, which gets one patch adding the llamastack.io/image
//     annotation. For a CR with a direct image that is all (its pod template
//     unchanged, no new ReplicaSet, every pod the same); for a CR naming a
//     distribution the same patch moves the server from the previous release's
//     :latest to the pinned image, and nothing else: one new ReplicaSet;
//   - a restart of the controller then writes nothing: the pin applies once;
//   - every CR reads back in v1alpha1 exactly as created, and in v1alpha2 as its
//     conversion;
//   - a v1alpha1 client's read-edit-write of an upgraded CR keeps the v1alpha2-only
//     fields, and the edit rolls out;
//   - Kubernetes' storage version migration succeeds; every CR is then stored in
//     v1alpha2 (read from etcd), the CRD's storedVersions holds v1alpha2 alone, and
//     every CR still reads in both versions.
func TestUpgradeFromThePreviousRelease(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	requirePreviousRelease(t)
	buildDir := t.TempDir()
	built := make(chan struct{})
	var tree, binary string
	var buildErr error
	go func() {
		defer close(built)
		tree, binary, buildErr = previousReleaseTree(buildDir)
	}()
	u := startUpgradeCluster(t)
	<-built
	require.NoError(t, buildErr)
	t.Logf("control plane started and %s built in %s", previousRelease, time.Since(start).Round(time.Second))

	// The previous release, as its artifacts install it.
	args := []string{"apply", "--server-side", "-f", filepath.Join(tree, localcluster.CRDFile)}
	for _, f := range []string{"controller/namespace.yaml", "rbac/service_account.yaml", "rbac/cluster_role.yaml", "rbac/cluster_role_binding.yaml"} {
		args = append(args, "-f", filepath.Join(tree, "artifacts", f))
	}
	u.kubectl(t, nil, args...)
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, u.cfg, "llamastackdistributions.llamastack.io", 30*time.Second))
	crd, err := u.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "llamastackdistributions.llamastack.io", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, crd.Spec.Versions, 1, "the previous release's CRD has one version")
	require.Equal(t, "v1alpha1", crd.Spec.Versions[0].Name)
	u.operatorConfig(t)

	ns, shared := "upgrade", "upgrade-shared"
	u.namespace(t, ns, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	u.namespace(t, shared, nil)
	cms := u.kube.CoreV1().ConfigMaps
	config := map[string]string{"config.yaml": "version: 2\nimage_name: starter\napis: [inference]\nproviders: {}\n"}
	_, err = cms(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "run-config"}, Data: config}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cms(shared).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "run-config",
		Annotations: map[string]string{"llamastack.io/allowed-namespaces": ns}}, Data: config}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cms(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ca"},
		Data: map[string]string{"ca-bundle.crt": testCertificate(t, "upgrade test CA")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	u.boundPV(t, ns, "storage-pvc", "2Gi")

	crs := previousReleaseCRs(ns, shared)
	created := map[string]*v1alpha1.LlamaStackDistribution{}
	var names []string
	for _, l := range crs {
		out, err := u.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Create(ctx, l, metav1.CreateOptions{})
		require.NoError(t, err)
		created[l.Name] = out
		names = append(names, l.Name)
	}

	previous := u.startPrevious(t, binary)
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			l, err := u.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			p := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionProgressing)
			if l.Status.Version.OperatorVersion != previousRelease || l.Status.ObservedGeneration != l.Generation ||
				l.Status.Phase != v1alpha1.PhaseReady || p == nil || p.Reason != v1alpha1.ReasonRolloutComplete {
				last = name + ": " + string(l.Status.Phase)
				return false, nil
			}
			d, err := u.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || d.Status.ObservedGeneration != d.Generation {
				last = name + ": Deployment status not current"
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "the previous release makes every CR Ready (last: %s)", last)
	u.waitQuiet(t, "previous", 3*time.Second)
	t.Logf("the previous release converged after %s", time.Since(start).Round(time.Second))
	for _, name := range names {
		require.Equal(t, "llamastack.io/v1alpha1", u.storedAPIVersion(t, ns, name), "%s is stored in v1alpha1 before the upgrade", name)
	}
	before := u.snapshot(t, ns)
	for _, child := range []string{"deployments/storage", "services/plain-service", "persistentvolumeclaims/storage-pvc",
		"configmaps/config-ca-bundle", "configmaps/shared-config-user-config", "horizontalpodautoscalers/scaled-hpa",
		"poddisruptionbudgets/scaled-pdb", "ingresses/exposed-ingress", "networkpolicies/plain-network-policy"} {
		require.Contains(t, before, child, "the previous release made every kind of child")
	}

	// The upgrade: the previous release's controller stops, this tree's CRD and RBAC are
	// applied, its controller starts.
	previous.stop(t)
	upgraded := time.Now()
	webhookAddr, err := freeAddress()
	require.NoError(t, err)
	u.installCurrent(t, webhookAddr)
	// Until the new controller serves the conversion webhook, a CR stored in v1alpha1
	// reads in v1alpha1 (no conversion) and not in v1alpha2.
	_, err = u.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Get(ctx, "plain", metav1.GetOptions{})
	require.NoError(t, err, "a CR stored in v1alpha1 reads in v1alpha1 without the webhook")
	_, err = u.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, "plain", metav1.GetOptions{})
	require.ErrorContains(t, err, "conversion webhook", "a CR stored in v1alpha1 needs the webhook to read in v1alpha2")
	stop := u.startCurrent(t, webhookAddr, currentVersion)
	u.waitCurrent(t, ns, names, currentVersion)
	u.waitQuiet(t, "current", 5*time.Second)
	t.Logf("the controller of this tree synced every CR %s after the upgrade", time.Since(upgraded).Round(time.Second))

	pinned := map[string]string{}
	for name, c := range created {
		if dist := c.Spec.Server.Distribution.Name; dist != "" {
			d, ok := configgen.LookupDistribution(dist)
			require.True(t, ok, dist)
			pinned[name] = d.Image
		}
	}
	require.NotEmpty(t, pinned)
	require.Less(t, len(pinned), len(names), "a CR with a direct image too")
	after := u.snapshot(t, ns)
	// The pinned server serves metrics, but only with one worker: each worker would
	// start the endpoint on the same port.
	metricsOn := map[string]bool{}
	userConfigs := map[string]bool{}
	for name, c := range created {
		metricsOn[name] = pinServesMetrics(pinned[name]) && ptr.Deref(c.Spec.Server.Workers, 1) == 1
		userConfigs[name] = c.Spec.Server.UserConfig != nil
	}
	assertUpgradeChanges(t, before, after, pinned, metricsOn)
	assertChildWrites(t, u.writes(t, "current", upgraded), ns, names, metricsOn, userConfigs)

	// A restart of the controller writes nothing in the namespace: the pin was applied
	// once, and the Deployments are as the first sync left them.
	stop()
	restarted := time.Now()
	u.startCurrent(t, webhookAddr, currentVersion)
	u.waitCurrent(t, ns, names, currentVersion)
	u.waitQuiet(t, "current", 5*time.Second)
	for _, w := range u.writes(t, "current", restarted) {
		if w.ObjectRef != nil && w.ObjectRef.Namespace == ns {
			t.Errorf("a write after the restart: %s", w)
		}
	}
	for _, name := range names {
		d, err := u.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, after["deployments/"+name].GetGeneration(), d.Generation, "%s: the Deployment is not written again after a restart", name)
	}
	expected := map[string]readBack{}
	for name, c := range created {
		expected[name] = readBack{v1: c.Spec, v2: hubOf(t, c).Spec}
	}
	u.assertReadBack(t, ns, expected)

	// Kubernetes' storage version migration. Meanwhile a v1alpha1 client's
	// read-edit-write of a CR with v1alpha2-only fields keeps them. (On a quiet cluster
	// the migration waits up to a minute and a half for the garbage collector's cache of
	// the CRs to pass the migration's resourceVersion; a write of a CR, such as this
	// edit, moves it on.) Then every CR is in v1alpha2 in etcd, the CRD's storedVersions
	// holds v1alpha2 alone, and every CR still reads in both versions. (The controller's
	// status writes have already rewritten every CR it synced: any write stores the whole
	// object in the storage version.)
	migrated := time.Now()
	u.kubectl(t, []byte(storageMigration), "create", "-f", "-")
	expected["plain"] = u.assertReadEditWriteKeepsV1alpha2Fields(t, ns, "plain")
	u.waitStorageMigration(t)
	t.Logf("the storage version migration took %s", time.Since(migrated).Round(time.Second))
	for _, name := range names {
		assert.Equal(t, "llamastack.io/v1alpha2", u.storedAPIVersion(t, ns, name), "%s is stored in v1alpha2", name)
	}
	u.assertReadBack(t, ns, expected)
	t.Logf("the whole test took %s", time.Since(start).Round(time.Second))
}

// assertUpgradeChanges compares the objects of a namespace before and after the
// upgrade: every object is still there, the same one (UID), and nothing else is there,
// but for the ReplicaSet and pods of a rollout. None was written at all (same
// resourceVersion; for the other children of a CR whose pods rolled, the same but for
// their status, which follows the rollout), except each Deployment, written once (its
// generation up by one):
//   - of a CR with a direct image, one change of its metadata: the annotation
//     llamastack.io/image naming the image it runs, which the Deployment controller
//     copied to the ReplicaSet. The pod template, the ReplicaSets and the pods are the
//     same;
//   - of a CR naming a distribution (pinned: Deployment name → pinned image), the same
//     annotation naming the pinned image, and the server's image moved to it from the
//     previous release's :latest, nothing else of its spec: one new ReplicaSet runs the
//     pinned image, and the old one is kept.
func assertUpgradeChanges(t *testing.T, before, after map[string]*unstructured.Unstructured, pinned map[string]string, metricsOn map[string]bool) {
	t.Helper()
	// owner is the Deployment a ReplicaSet or pod belongs to (a pod through its ReplicaSet).
	owner := func(o *unstructured.Unstructured) string {
		ref := metav1.GetControllerOf(o)
		if ref == nil {
			return ""
		}
		if ref.Kind == "ReplicaSet" {
			for _, objs := range []map[string]*unstructured.Unstructured{before, after} {
				if rs, ok := objs["replicasets/"+ref.Name]; ok {
					if d := metav1.GetControllerOf(rs); d != nil {
						return d.Name
					}
				}
			}
			return ""
		}
		return ref.Name
	}
	serverImage := func(o *unstructured.Unstructured, key string) string {
		containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		require.NoError(t, err)
		require.Len(t, containers, 1, key)
		image, _ := containers[0].(map[string]any)["image"].(string)
		return image
	}
	for key, b := range before {
		resource := strings.SplitN(key, "/", 2)[0]
		rolled := pinned[b.GetName()] != "" && resource == "deployments" ||
			pinned[owner(b)] != "" && (resource == "replicasets" || resource == "pods")
		a, ok := after[key]
		if resource == "pods" && rolled {
			continue // replaced by the rollout
		}
		if resource == "configmaps" && !ok && b.GetName() == owner(b)+"-user-config" {
			continue // the previous release's copy, deleted once no pod template mounts it
		}
		if !assert.True(t, ok, "%s is gone after the upgrade", key) {
			continue
		}
		assert.Equal(t, b.GetUID(), a.GetUID(), "%s is the same object", key)
		switch {
		case resource == "deployments" || resource == "replicasets":
		case pinned[owner(b)] != "":
			// A child of a CR whose pods rolled: its status may follow the rollout (a
			// PDB's counts, a PVC's conditions), written by Kubernetes' controllers; the
			// controller writes none but the Service and the NetworkPolicy, when the pin
			// serves metrics.
			strip := func(u *unstructured.Unstructured) map[string]any {
				o := withoutWriteMarks(u)
				delete(o, "status")
				return o
			}
			want, got := strip(b), strip(a)
			if resource == "services" && metricsOn[owner(b)] {
				// The pinned server serves metrics: the Service gains their port, after the
				// API's, in the one write of it.
				ports, _, _ := unstructured.NestedSlice(want, "spec", "ports")
				ports = append(ports, map[string]any{"name": "metrics", "port": int64(9464), "protocol": "TCP", "targetPort": "metrics"})
				require.NoError(t, unstructured.SetNestedSlice(want, ports, "spec", "ports"))
			}
			if resource == "networkpolicies" && metricsOn[owner(b)] {
				// And the NetworkPolicy a rule admitting scrapes of that port.
				rules, _, _ := unstructured.NestedSlice(want, "spec", "ingress")
				require.NoError(t, unstructured.SetNestedSlice(want, append(rules, metricsRule(t, rules)), "spec", "ingress"))
			}
			assert.Empty(t, diffJSON(want, got, ""), "%s changed beyond its status", key)
			continue
		default:
			assert.Equal(t, b.GetResourceVersion(), a.GetResourceVersion(), "%s was written; differences: %v", key, diffJSON(b.Object, a.Object, ""))
			continue
		}
		assert.NotContains(t, b.GetAnnotations(), imageAnnotation, key)
		if resource == "deployments" {
			assert.Equal(t, b.GetGeneration()+1, a.GetGeneration(), "%s: written once", key)
		}
		switch {
		case rolled && resource == "deployments":
			image := pinned[b.GetName()]
			dist, _ := configgen.LookupDistribution(a.GetAnnotations()["llamastack.io/distribution"])
			assert.Contains(t, dist.EarlierImages, serverImage(b, key), "%s: the previous release ran an earlier built-in image", key)
			assert.True(t, strings.HasSuffix(serverImage(b, key), ":latest"), "%s: the previous release ran :latest", key)
			assert.Equal(t, image, serverImage(a, key), "%s: the pinned image", key)
			assert.Equal(t, image, a.GetAnnotations()[imageAnnotation], "%s: the annotation names the image it runs", key)
			// Nothing else of the spec or the metadata changed (the rollout bumps the
			// Deployment's revision annotation; the status is the rollout's).
			// The pin is an OGX server (0.8 and later), which starts its own way: the
			// image's entrypoint (no command) and the OGX_* variables instead of the
			// llama-stack ones; the rest of the container is as it was.
			got := withoutWriteMarks(a)
			gotContainers, _, _ := unstructured.NestedSlice(got, "spec", "template", "spec", "containers")
			gotServer := gotContainers[0].(map[string]any)
			assert.NotContains(t, gotServer, "command", "%s: the OGX image's entrypoint", key)
			envNames := map[string]bool{}
			envList, _ := gotServer["env"].([]any)
			for _, e := range envList {
				envNames[e.(map[string]any)["name"].(string)] = true
			}
			assert.True(t, envNames["OGX_PORT"] && envNames["OGX_CONFIG_DIR"] && !envNames["LLAMA_STACK_CONFIG"] && !envNames["LLS_PORT"],
				"%s: the OGX variables: %v", key, envNames)
			want := withoutWriteMarks(b)
			containers, _, _ := unstructured.NestedSlice(want, "spec", "template", "spec", "containers")
			server := containers[0].(map[string]any)
			server["image"] = image
			server["env"] = gotServer["env"]
			delete(server, "command")
			assert.Equal(t, metricsOn[b.GetName()], envNames["OGX_METRICS_ENDPOINT_ENABLED"], "%s: the metrics endpoint is on for one worker", key)
			if metricsOn[b.GetName()] {
				ports, _ := server["ports"].([]any)
				server["ports"] = append(ports, map[string]any{"name": "metrics", "containerPort": int64(9464), "protocol": "TCP"})
			}
			require.NoError(t, unstructured.SetNestedSlice(want, containers, "spec", "template", "spec", "containers"))
			// A user config reaches the pods through an immutable copy named by its
			// content, made at the upgrade, in the same rollout.
			wantCopy(t, key, want, got, b.GetName())
			// The pods roll anyway: the default spreading, which this release puts in the
			// template at every replica count, comes with the same rollout.
			if _, had, _ := unstructured.NestedFieldNoCopy(want, "spec", "template", "spec", "affinity"); !had {
				spread, _, _ := unstructured.NestedSlice(got, "spec", "template", "spec", "topologySpreadConstraints")
				assert.Len(t, spread, 3, "%s: the default spreading comes with the rollout", key)
				for _, f := range []string{"affinity", "topologySpreadConstraints"} {
					if v, ok, _ := unstructured.NestedFieldCopy(got, "spec", "template", "spec", f); ok {
						require.NoError(t, unstructured.SetNestedField(want, v, "spec", "template", "spec", f))
					}
				}
			}
			for _, o := range []map[string]any{want, got} {
				unstructured.RemoveNestedField(o, "metadata", "annotations", "deployment.kubernetes.io/revision")
				delete(o, "status")
			}
			assert.Empty(t, diffJSON(want, got, ""), "%s changed beyond the image and its annotation", key)
		case rolled:
			// The ReplicaSet of the previous release's pod template: kept, scaled down.
			assert.Equal(t, b.Object["spec"].(map[string]any)["template"], a.Object["spec"].(map[string]any)["template"], "%s keeps its pod template", key)
		default:
			assert.Equal(t, serverImage(a, key), a.GetAnnotations()[imageAnnotation], "%s: the annotation names the image it runs", key)
			assert.Empty(t, diffJSON(withoutWriteMarks(b), withoutWriteMarks(a), ""), "%s changed beyond the annotation", key)
		}
	}
	newReplicaSets := map[string][]string{}
	for key, a := range after {
		if _, ok := before[key]; ok {
			continue
		}
		resource := strings.SplitN(key, "/", 2)[0]
		d := owner(a)
		switch {
		case pinned[d] != "" && resource == "replicasets":
			newReplicaSets[d] = append(newReplicaSets[d], a.GetName())
			assert.Equal(t, pinned[d], serverImage(a, key), "%s runs the pinned image", key)
		case pinned[d] != "" && resource == "pods":
		case pinned[d] != "" && resource == "configmaps" && userConfigCopyName.MatchString(strings.TrimPrefix(a.GetName(), d)):
			// The immutable copy of the CR's user config the pods now mount.
		default:
			t.Errorf("a new object after the upgrade: %s", key)
		}
	}
	for d := range pinned {
		assert.Len(t, newReplicaSets[d], 1, "%s: one new ReplicaSet", d)
	}
}

// userConfigCopyName matches the end of a user-config copy's name, after the CR's.
var userConfigCopyName = regexp.MustCompile(`^-user-config-[0-9a-f]{64}$`)

// wantCopy sets in want, a Deployment from before the upgrade, the user-config volume
// as got, the Deployment after it, has it, once it is checked to name an immutable copy
// of the CR's user config; a Deployment without a user config is left as it is.
func wantCopy(t *testing.T, key string, want, got map[string]any, cr string) {
	t.Helper()
	volumes := func(o map[string]any) []any {
		v, _, _ := unstructured.NestedSlice(o, "spec", "template", "spec", "volumes")
		return v
	}
	wantVolumes, gotVolumes := volumes(want), volumes(got)
	for i, v := range wantVolumes {
		if v.(map[string]any)["name"] != "user-config" {
			continue
		}
		require.Less(t, i, len(gotVolumes), key)
		name, _, _ := unstructured.NestedString(gotVolumes[i].(map[string]any), "configMap", "name")
		assert.Regexp(t, userConfigCopyName, strings.TrimPrefix(name, cr), "%s: the pods mount the copy", key)
		wantVolumes[i] = gotVolumes[i]
	}
	if wantVolumes != nil {
		require.NoError(t, unstructured.SetNestedSlice(want, wantVolumes, "spec", "template", "spec", "volumes"))
	}
}

// withoutWriteMarks is an object without what any write changes (resourceVersion,
// generation, managedFields, status.observedGeneration) and without the image
// annotation.
func withoutWriteMarks(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(c.Object, "metadata", "generation")
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(c.Object, "status", "observedGeneration")
	unstructured.RemoveNestedField(c.Object, "metadata", "annotations", imageAnnotation)
	return c.Object
}

// pinServesMetrics reports whether the server of a pinned image serves metrics (OGX
// 1.2 and later), so that the upgrade turns them on.
func pinServesMetrics(image string) bool {
	_, tag, ok := strings.Cut(image, ":")
	if !ok {
		return false
	}
	v, err := configgen.ParseVersion(tag)
	return err == nil && v.AtLeast(1, 2)
}

// metricsRule is the NetworkPolicy rule that admits scrapes of the metrics port, given
// the rules before it (the API port's): the same sources but the OpenShift routers,
// and OpenShift's monitoring namespaces.
func metricsRule(t *testing.T, rules []any) map[string]any {
	t.Helper()
	require.NotEmpty(t, rules)
	from, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "from")
	var peers []any
	for _, p := range from {
		if labels, _, _ := unstructured.NestedStringMap(p.(map[string]any), "namespaceSelector", "matchLabels"); labels["network.openshift.io/policy-group"] == "ingress" {
			continue
		}
		peers = append(peers, p)
	}
	peers = append(peers, map[string]any{"namespaceSelector": map[string]any{
		"matchLabels": map[string]any{"network.openshift.io/policy-group": "monitoring"}}})
	return map[string]any{"ports": []any{map[string]any{"port": int64(9464), "protocol": "TCP"}}, "from": peers}
}

// assertChildWrites checks what the controller wrote into ns after the upgrade: one
// patch of each Deployment (the image annotation, or the pin) and of the Service and
// NetworkPolicy of each CR whose pinned server serves metrics (their port, and a rule
// for it), nothing else of any child, only status writes of the CRs and Events besides.
func assertChildWrites(t *testing.T, writes []auditEvent, ns string, names []string, metricsOn, userConfigs map[string]bool) {
	t.Helper()
	patched := map[string]int{}
	var all []string
	for _, w := range writes {
		all = append(all, w.String())
		if w.ObjectRef == nil || w.ObjectRef.Namespace != ns {
			continue
		}
		switch {
		case w.ObjectRef.Resource == "llamastackdistributions" && w.ObjectRef.Subresource == "status" && w.Verb == "update",
			w.ObjectRef.Resource == "events":
		case w.ObjectRef.Resource == "deployments" && w.ObjectRef.Subresource == "" && w.Verb == "patch":
			patched[w.ObjectRef.Name]++
		case (w.ObjectRef.Resource == "services" || w.ObjectRef.Resource == "networkpolicies") && w.ObjectRef.Subresource == "" && w.Verb == "patch":
			patched[w.ObjectRef.Resource+"/"+w.ObjectRef.Name]++
		case w.ObjectRef.Resource == "configmaps" && w.Verb == "patch" && strings.Contains(w.ObjectRef.Name, "-user-config-"):
			// The immutable copy of a user config, made once.
			patched["configmaps/"+w.ObjectRef.Name]++
		case w.ObjectRef.Resource == "configmaps" && w.Verb == "delete" && strings.HasSuffix(w.ObjectRef.Name, "-user-config"):
			// The previous release's copy, once no pod template mounts it.
		default:
			t.Errorf("a write of a child after the upgrade: %s", w)
		}
	}
	want := map[string]int{}
	for _, name := range names {
		want[name] = 1
		if userConfigs[name] {
			// One copy of the CR's user config, whatever its hash.
			for key := range patched {
				if strings.HasPrefix(key, "configmaps/") && userConfigCopyName.MatchString(strings.TrimPrefix(key, "configmaps/"+name)) {
					want[key] = 1
				}
			}
			want["copies/"+name] = 1
			for key := range patched {
				if strings.HasPrefix(key, "configmaps/") && userConfigCopyName.MatchString(strings.TrimPrefix(key, "configmaps/"+name)) {
					patched["copies/"+name]++
				}
			}
		}
		if metricsOn[name] {
			want["services/"+name+"-service"] = 1
			want["networkpolicies/"+name+"-network-policy"] = 1
		}
	}
	assert.Equal(t, want, patched, "one patch of each Deployment, of each Service and NetworkPolicy that gain the metrics port, and of one copy of each user config")
	t.Logf("writes of the controller of this tree after the upgrade:\n%s", strings.Join(all, "\n"))
}

// readBack is what a CR reads as in each version.
type readBack struct {
	v1 v1alpha1.LlamaStackDistributionSpec
	v2 v1alpha2.LlamaStackDistributionSpec
	// kept is set when v2 has fields v1alpha1 has no place for: read in v1alpha1, the
	// CR then carries them in its conversion-data annotation.
	kept bool
}

// assertReadBack reads every CR in both versions: each spec as expected, and in
// v1alpha1 no annotation but the conversion data of what v1alpha1 cannot hold.
func (u *upgradeCluster) assertReadBack(t *testing.T, ns string, expected map[string]readBack) {
	t.Helper()
	ctx := context.Background()
	for name, want := range expected {
		// Right after a restart the API server may not reach the new process's
		// conversion webhook yet (its listener comes up beside the informers): a read
		// that fails for that is tried again, for a bounded time.
		var v1 *v1alpha1.LlamaStackDistribution
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			v1, err = u.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil && strings.Contains(err.Error(), "conversion webhook") {
				t.Logf("reading %s in v1alpha1: %v (trying again)", name, err)
				return false, nil
			}
			return err == nil, err
		}), "reading %s in v1alpha1", name)
		assert.Equal(t, want.v1, v1.Spec, "%s in v1alpha1", name)
		v2, err := u.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		annotations := maps.Clone(v1.Annotations)
		_, kept := annotations[v1alpha1.ConversionDataAnnotation]
		// status.rollback (what automatic rollback knows) has no place in v1alpha1 either.
		assert.Equal(t, want.kept || v2.Status.Rollback != nil, kept, "%s in v1alpha1 keeps the fields it has no place for in %s", name, v1alpha1.ConversionDataAnnotation)
		delete(annotations, v1alpha1.ConversionDataAnnotation)
		assert.Empty(t, annotations, "%s in v1alpha1", name)
		assert.Equal(t, want.v2, v2.Spec, "%s in v1alpha2", name)
		assert.Empty(t, v2.Annotations, "%s in v1alpha2", name)
	}
}

// storageMigration is the StorageVersionMigration the upgrade notes (docs/install.md) create.
const storageMigration = `apiVersion: storagemigration.k8s.io/v1
kind: StorageVersionMigration
metadata:
  name: llamastackdistributions-v1alpha2
spec:
  resource:
    group: llamastack.io
    resource: llamastackdistributions
`

// waitStorageMigration waits, as docs/install.md says, until the StorageVersionMigration
// succeeded and the CRD's storedVersions holds v1alpha2 alone.
func (u *upgradeCluster) waitStorageMigration(t *testing.T) {
	t.Helper()
	var status string
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		status = string(u.kubectl(t, nil, "get", "storageversionmigration", "llamastackdistributions-v1alpha2",
			"-o", `jsonpath={.status.conditions[?(@.type=="Succeeded")].status}{.status.conditions[?(@.type=="Failed")].message}`))
		return status == "True", nil
	})
	require.NoError(t, err, "the storage version migration succeeds (last: %q)", status)
	var stored string
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		stored = string(u.kubectl(t, nil, "get", "crd", "llamastackdistributions.llamastack.io", "-o", "jsonpath={.status.storedVersions}"))
		return stored == `["v1alpha2"]`, nil
	})
	require.NoError(t, err, "the CRD's storedVersions holds v1alpha2 alone after the migration (last: %s)", stored)
}

// assertReadEditWriteKeepsV1alpha2Fields sets fields v1alpha1 has no place for on an
// upgraded CR through v1alpha2, then a v1alpha1 client reads it, adds an env var and
// writes it back: the v1alpha2 fields are still there, and the env var rolls out.
func (u *upgradeCluster) assertReadEditWriteKeepsV1alpha2Fields(t *testing.T, ns, name string) readBack {
	t.Helper()
	ctx := context.Background()
	v2s := u.client.LlamastackV1alpha2().LlamaStackDistributions(ns)
	var want *v1alpha2.LlamaStackDistributionSpec
	var edited v1alpha1.LlamaStackDistributionSpec
	// Each write retries on a conflict: the controller writes the status meanwhile.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := v2s.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		// Fields the controller generates the server's config from (starter's pinned
		// server, 1.3.0, has batches and a vLLM provider type), so the CR stays Ready.
		l.Spec.Disabled = []v1alpha2.APIName{v1alpha2.APIBatches}
		l.Spec.Providers = &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{Provider: "vllm", Endpoint: "http://vllm:8000/v1"}}}
		want = l.Spec.DeepCopy()
		_, err = v2s.Update(ctx, l, metav1.UpdateOptions{})
		return err
	}))

	v1s := u.client.LlamastackV1alpha1().LlamaStackDistributions(ns)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		old, err := v1s.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if old.Annotations[v1alpha1.ConversionDataAnnotation] == "" {
			return fmt.Errorf("%s read in v1alpha1 has no %s annotation: v1alpha1 does not keep what it cannot hold", name, v1alpha1.ConversionDataAnnotation)
		}
		old.Spec.Server.ContainerSpec.Env = append(old.Spec.Server.ContainerSpec.Env, corev1.EnvVar{Name: "GREETING", Value: "hello"})
		edited = *old.Spec.DeepCopy()
		_, err = v1s.Update(ctx, old, metav1.UpdateOptions{})
		return err
	}))

	got, err := v2s.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, want.Disabled, got.Spec.Disabled, "disabled survives a v1alpha1 client's write")
	assert.Equal(t, want.Providers, got.Spec.Providers, "providers survive a v1alpha1 client's write")
	require.NotNil(t, got.Spec.Workload.Overrides)
	assert.Equal(t, []corev1.EnvVar{{Name: "GREETING", Value: "hello"}}, got.Spec.Workload.Overrides.Env, "the v1alpha1 edit applies")
	assert.NotContains(t, got.Annotations, v1alpha1.ConversionDataAnnotation, "no conversion data on the hub")
	u.waitCurrent(t, ns, []string{name}, currentVersion)
	d, err := u.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	value, ok := envValue(server(d), "GREETING")
	assert.True(t, ok && value == "hello", "the env var rolls out: %v", server(d).Env)
	return readBack{v1: edited, v2: got.Spec, kept: true}
}

// upstreamSamples are upstream's samples, kept unchanged in artifacts/examples.
var upstreamSamples = []string{
	"_v1alpha1_llamastackdistribution.yaml", "example-with-ca-bundle.yaml", "example-with-configmap.yaml",
	"example-with-network-config.yaml", "example-withoutconfigmap.yaml",
}

// TestUpgradeFromUpstream starts from a CRD shaped as the upstream operator's (v1alpha1
// alone, stored as v1alpha1, no conversion: upstreamShapedCRD) and
// upstream's samples, with the children upstream's operator makes of them (made here
// as it makes them: test/upstream), on a control plane of its own; then installs this
// tree's CRD and controller, with the operator ConfigMap carried over, as docs/install.md's
// migration steps say. Every child upstream made is the same object afterwards (UID;
// the Service keeps its address, the PVC its spec), each Deployment rolls out at most
// once (one new ReplicaSet), and nothing is made twice (new are only the immutable
// copies of the user configs, which the pods mount from then on). Then docs/install.md's manual storage
// migration step (read and replace every CR, then set the CRD's storedVersions) leaves
// every CR stored in v1alpha2, readable in both versions.
func TestUpgradeFromUpstream(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	u := startUpgradeCluster(t)
	u.kubectl(t, upstreamShapedCRD(t), "apply", "--server-side", "-f", "-")
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, u.cfg, "llamastackdistributions.llamastack.io", 30*time.Second))

	ns := "upstream"
	u.namespace(t, ns, nil)
	_, err := u.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "custom-ca-bundle"},
		Data: map[string]string{"ca-bundle.crt": testCertificate(t, "upstream test CA")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	created := map[string]*v1alpha1.LlamaStackDistribution{}
	var names []string
	for _, file := range upstreamSamples {
		objs, err := readObjects(filepath.Join(env.root, "artifacts", "examples", file))
		require.NoError(t, err)
		for _, o := range objs {
			o.SetNamespace(ns)
			switch o.GetKind() {
			case "ConfigMap":
				var cm corev1.ConfigMap
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cm))
				_, err := u.kube.CoreV1().ConfigMaps(ns).Create(ctx, &cm, metav1.CreateOptions{})
				if !apierrors.IsAlreadyExists(err) {
					require.NoError(t, err)
				}
			case "LlamaStackDistribution":
				var l v1alpha1.LlamaStackDistribution
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &l))
				if s := l.Spec.Server.Storage; s != nil {
					size := "10Gi"
					if s.Size != nil {
						size = s.Size.String()
					}
					u.boundPV(t, ns, l.Name+"-pvc", size)
				}
				out, err := u.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Create(ctx, &l, metav1.CreateOptions{})
				require.NoError(t, err)
				created[l.Name] = out
				names = append(names, l.Name)
			}
		}
	}
	for _, name := range names {
		require.NoError(t, upstream.Make(ctx, u.kube, created[name], upstream.Options{NetworkPolicy: true}), name)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			d, err := u.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || d.Status.ObservedGeneration != d.Generation || d.Status.AvailableReplicas < 1 {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "upstream's Deployments become available")
	before := u.snapshot(t, ns)
	for _, name := range names {
		require.Equal(t, "llamastack.io/v1alpha1", u.storedAPIVersion(t, ns, name), "%s is stored in v1alpha1 before the upgrade", name)
	}
	t.Logf("upstream's objects are in place after %s", time.Since(start).Round(time.Second))

	// The migration: the operator ConfigMap carried over (NetworkPolicies on), this
	// tree's CRD, RBAC and controller.
	upgraded := time.Now()
	u.namespace(t, operatorNamespace, nil)
	u.operatorConfig(t)
	webhookAddr, err := freeAddress()
	require.NoError(t, err)
	u.installCurrent(t, webhookAddr)
	u.startCurrent(t, webhookAddr, currentVersion)
	u.waitCurrent(t, ns, names, currentVersion)
	u.waitQuiet(t, "current", 5*time.Second)
	t.Logf("the controller of this tree took over every CR %s after the upgrade", time.Since(upgraded).Round(time.Second))
	after := u.snapshot(t, ns)

	replicaSets := func(objs map[string]*unstructured.Unstructured, deployment string) map[string]bool {
		out := map[string]bool{}
		for key, o := range objs {
			if owner := metav1.GetControllerOf(o); strings.HasPrefix(key, "replicasets/") && owner != nil && owner.Name == deployment {
				out[o.GetName()] = true
			}
		}
		return out
	}
	for key, b := range before {
		resource := strings.SplitN(key, "/", 2)[0]
		if resource == "pods" || resource == "replicasets" {
			continue
		}
		a, ok := after[key]
		if !assert.True(t, ok, "%s is gone after the upgrade", key) {
			continue
		}
		assert.Equal(t, b.GetUID(), a.GetUID(), "%s is the same object", key)
		switch resource {
		case "services":
			ip, _, _ := unstructured.NestedString(a.Object, "spec", "clusterIP")
			wantIP, _, _ := unstructured.NestedString(b.Object, "spec", "clusterIP")
			assert.Equal(t, wantIP, ip, "%s keeps its address", key)
		case "persistentvolumeclaims":
			assert.Equal(t, b.Object["spec"], a.Object["spec"], "%s keeps its spec", key)
		}
	}
	for key, a := range after {
		resource := strings.SplitN(key, "/", 2)[0]
		if ref := metav1.GetControllerOf(a); resource == "configmaps" && ref != nil && ref.Kind == "LlamaStackDistribution" &&
			created[ref.Name] != nil && created[ref.Name].Spec.Server.UserConfig != nil &&
			userConfigCopyName.MatchString(strings.TrimPrefix(a.GetName(), ref.Name)) {
			continue // the immutable copy of the CR's user config, which its pods now mount
		}
		if resource != "pods" && resource != "replicasets" {
			assert.Contains(t, before, key, "a new object after the upgrade")
		}
	}
	for _, name := range names {
		old, now := replicaSets(before, name), replicaSets(after, name)
		for rs := range old {
			assert.True(t, now[rs], "%s: ReplicaSet %s is kept", name, rs)
		}
		assert.LessOrEqual(t, len(now), len(old)+1, "%s rolls out at most once: ReplicaSets before %v, after %v", name, old, now)
		d, err := u.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Empty(t, d.Spec.Template.Spec.ServiceAccountName, "%s: upstream's per-CR ServiceAccount is no longer used", name)
		for _, mf := range d.ManagedFields {
			assert.NotEqual(t, name, mf.Manager, "%s: upstream's field manager owns nothing any more", name)
		}
	}

	// docs/install.md's manual storage migration: every CR read and written back, then the
	// CRD's storedVersions set to v1alpha2 alone.
	for _, name := range names {
		require.Equal(t, "llamastack.io/v1alpha2", u.storedAPIVersion(t, ns, name), "%s: the controller's status write stored it in v1alpha2", name)
	}
	list := u.kubectl(t, nil, "get", "llamastackdistributions", "--all-namespaces", "-o", "json")
	u.kubectl(t, list, "replace", "-f", "-")
	u.kubectl(t, nil, "patch", "customresourcedefinition", "llamastackdistributions.llamastack.io", "--subresource=status",
		"--type=merge", "-p", `{"status":{"storedVersions":["v1alpha2"]}}`)
	assert.Equal(t, []string{"v1alpha2"}, u.storedVersions(t))
	expected := map[string]readBack{}
	for name, c := range created {
		expected[name] = readBack{v1: c.Spec, v2: hubOf(t, c).Spec}
		assert.Equal(t, "llamastack.io/v1alpha2", u.storedAPIVersion(t, ns, name), "%s is stored in v1alpha2", name)
	}
	u.assertReadBack(t, ns, expected)
	t.Logf("the whole test took %s", time.Since(start).Round(time.Second))
}
