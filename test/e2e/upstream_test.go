//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// Upstream's creation scenario: its main sample (workers 2, PDB, zone spread,
// autoscaling 1-5, storage 20Gi at a custom path) becomes Ready; the PVC has the CR's
// size; the Service exists.
func TestUpstreamSampleConverges(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	objs, err := readObjects(filepath.Join(env.root, "artifacts", "examples", "_v1alpha1_llamastackdistribution.yaml"))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	sample := objs[0]
	sample.SetName("llamastackdistribution-starter-sample")
	sample.SetNamespace(ns)
	createPV(t, ns+"-pv", "20Gi")
	_, err = env.dynamic.Resource(llsdResource).Namespace(ns).Create(ctx, sample, metav1.CreateOptions{})
	require.NoError(t, err)

	l := waitReady(t, ns, sample.GetName())
	assert.Equal(t, "starter", l.Status.DistributionConfig.ActiveDistribution)
	pvc, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, sample.GetName()+"-pvc", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, resource.MustParse("20Gi"), pvc.Spec.Resources.Requests[corev1.ResourceStorage])
	_, err = env.kube.CoreV1().Services(ns).Get(ctx, sample.GetName()+"-service", metav1.GetOptions{})
	require.NoError(t, err)
	d := deployment(t, ns, sample.GetName())
	hf, _ := envValue(server(d), "HF_HOME")
	assert.Equal(t, "/home/lls/.lls", hf)
	// starter's pin is an OGX server: the workers reach it as OGX_WORKERS.
	workers, _ := envValue(server(d), "OGX_WORKERS")
	assert.Equal(t, "2", workers)
	dataDir, _ := envValue(server(d), "OGX_CONFIG_DIR")
	assert.Equal(t, "/home/lls/.lls", dataDir, "the server keeps its data on the volume")
	assert.Equal(t, d.Status.AvailableReplicas, l.Status.AvailableReplicas)
}

// Upstream's scaling scenario: replicas 2 gives 2 available pods, spread by default.
// Unlike upstream the spreading is in the template at one replica too, so scaling
// 1 -> 3 -> 1, with and without storage (Recreate), keeps one ReplicaSet: no pod is
// restarted by a scale.
func TestScaleToTwo(t *testing.T) {
	for name, storage := range map[string]bool{"emptydir": false, "pvc": true} {
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t)
			create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
				if storage {
					l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
				}
			}))
			if storage {
				createPV(t, ns+"-pv", "10Gi")
			}
			waitReady(t, ns, "app")
			d := deployment(t, ns, "app")
			assert.Len(t, d.Spec.Template.Spec.TopologySpreadConstraints, 3, "spread at one replica too")
			assert.NotNil(t, d.Spec.Template.Spec.Affinity)
			replicaSets := func() []string {
				list, err := env.kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
				require.NoError(t, err)
				var names []string
				for _, rs := range list.Items {
					names = append(names, rs.Name)
				}
				return names
			}
			first := replicaSets()
			require.Len(t, first, 1)

			edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 3 })
			l := waitReady(t, ns, "app")
			assert.Equal(t, int32(3), l.Status.AvailableReplicas)
			_, err := env.kube.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), "app-pdb", metav1.GetOptions{})
			assert.NoError(t, err, "replicas > 1 creates the default PDB")
			assert.Equal(t, first, replicaSets(), "scaling up rolls nothing")

			edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 1 })
			waitDeployment(t, ns, "app", "one replica", func(d *appsv1.Deployment) bool {
				return d.Spec.Replicas != nil && *d.Spec.Replicas == 1
			})
			waitReady(t, ns, "app")
			assert.Equal(t, first, replicaSets(), "scaling down rolls nothing")
			assert.Equal(t, d.Spec.Template, deployment(t, ns, "app").Spec.Template)
		})
	}
}

// Upstream's ServiceAccount scenario: podOverrides.serviceAccountName reaches the pod
// template; removing it removes it.
func TestServiceAccountOverride(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	_, err := env.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "custom-sa"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{ServiceAccountName: "custom-sa"}
	}))
	waitDeployment(t, ns, "app", "the pod runs as custom-sa", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.ServiceAccountName == "custom-sa"
	})
	waitReady(t, ns, "app")
	edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.PodOverrides = nil })
	d := waitDeployment(t, ns, "app", "the override is gone", func(d *appsv1.Deployment) bool {
		s := d.Spec.Template.Spec
		return (s.ServiceAccountName == "" || s.ServiceAccountName == "default") && s.DeprecatedServiceAccount != "custom-sa"
	})
	assert.Equal(t, false, *d.Spec.Template.Spec.AutomountServiceAccountToken)
	waitReady(t, ns, "app")
}

// Upstream's image-override scenario: the operator ConfigMap's image-overrides reach the
// Deployment, and a second value too; YAML that does not parse changes nothing.
func TestImageOverrides(t *testing.T) {
	ns := newNamespace(t)
	create(t, llsd(ns, "app"))
	waitReady(t, ns, "app")
	for _, image := range []string{"quay.io/test/llama-stack:override-test", "quay.io/test/llama-stack:override-test-v2"} {
		setOperatorConfig(t, map[string]string{"image-overrides": "starter: " + image})
		waitDeployment(t, ns, "app", "image "+image, func(d *appsv1.Deployment) bool { return server(d).Image == image })
	}
	setOperatorConfig(t, map[string]string{"image-overrides": "starter: [not yaml"})
	settle(t)
	assert.Equal(t, "quay.io/test/llama-stack:override-test-v2", server(deployment(t, ns, "app")).Image)
	setOperatorConfig(t, map[string]string{})
	waitDeployment(t, ns, "app", "the default (pinned) image again", func(d *appsv1.Deployment) bool {
		return server(d).Image == "docker.io/ogxai/distribution-starter:1.3.0"
	})
	waitReady(t, ns, "app")
}
