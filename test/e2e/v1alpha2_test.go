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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

var llsdV1alpha2 = schema.GroupVersionResource{Group: "llamastack.io", Version: "v1alpha2", Resource: "llamastackdistributions"}

// An example written in v1alpha2 converges to the same children as its v1alpha1 form,
// and reads back in both versions (v1alpha1 through the controller's webhook).
func TestV1alpha2ExamplesConvergeAsV1alpha1(t *testing.T) {
	ctx := context.Background()
	for _, example := range []string{"minimal", "pdb", "ingress", "env-and-resources", "security-context"} {
		t.Run(example, func(t *testing.T) {
			example := example + ".yaml"
			deployments := map[string]*appsv1.Deployment{}
			services := map[string]*corev1.Service{}
			var name string
			for _, version := range []string{"v1alpha1", "v1alpha2"} {
				path := filepath.Join(env.root, "artifacts", "examples", example)
				gvr := llsdResource
				if version == "v1alpha2" {
					path = filepath.Join(env.root, "artifacts", "examples", "v1alpha2", example)
					gvr = llsdV1alpha2
				}
				objs, err := readObjects(path)
				require.NoError(t, err)
				require.Len(t, objs, 1)
				obj := objs[0]
				require.Equal(t, "llamastack.io/"+version, obj.GetAPIVersion())
				ns := newNamespace(t)
				obj.SetNamespace(ns)
				name = obj.GetName()
				_, err = env.dynamic.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
				require.NoError(t, err)
				l := waitReady(t, ns, name)
				assert.Equal(t, l.Generation, l.Status.ObservedGeneration)
				hub, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
				require.NoError(t, err)
				assert.Equal(t, string(l.Status.Phase), string(hub.Status.Phase), "the status reads the same in v1alpha2")
				assert.True(t, meta.IsStatusConditionTrue(hub.Status.Conditions, v1alpha2.ConditionReady))
				d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				require.NoError(t, err)
				deployments[version] = d
				s, err := env.kube.CoreV1().Services(ns).Get(ctx, name+"-service", metav1.GetOptions{})
				require.NoError(t, err)
				services[version] = s
			}
			assert.Equal(t, deployments["v1alpha1"].Spec.Template, deployments["v1alpha2"].Spec.Template, "the same pod template from either version")
			assert.Equal(t, deployments["v1alpha1"].Spec.Replicas, deployments["v1alpha2"].Spec.Replicas)
			assert.Equal(t, services["v1alpha1"].Spec.Ports, services["v1alpha2"].Spec.Ports)
		})
	}
}
