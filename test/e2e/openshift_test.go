//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/cmd/controller/app"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// sccCRD makes the cluster serve the security.openshift.io API group, as OpenShift does:
// a CRD of SecurityContextConstraints (cluster-scoped, any content).
func sccCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "securitycontextconstraints.security.openshift.io"},
		"spec": map[string]any{
			"group": "security.openshift.io",
			"scope": "Cluster",
			"names": map[string]any{
				"kind": "SecurityContextConstraints", "listKind": "SecurityContextConstraintsList",
				"plural": "securitycontextconstraints", "singular": "securitycontextconstraints",
			},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
}

// servesGroup reports whether discovery lists the API group.
func servesGroup(kube kubernetes.Interface, group string) (bool, error) {
	groups, err := kube.Discovery().ServerGroups()
	if err != nil {
		return false, err
	}
	for _, g := range groups.Groups {
		if g.Name == group {
			return true, nil
		}
	}
	return false, nil
}

// On a cluster that serves security.openshift.io the controller leaves runAsUser and
// fsGroup out of the server pod, for the SCC to assign, and keeps the rest of the
// restricted defaults; the pods still pass Pod Security restricted; a user's
// securityContext still wins.
//
// The test runs on a control plane of its own: the suite's controller watches every
// namespace of the suite's cluster and decided at its start that it is not OpenShift, so
// on a CR there the two controllers would fight over the pod's security context; and the
// suite's controller must keep running undisturbed for the other tests.
func TestOpenShiftLeavesUserAndGroupToTheSCC(t *testing.T) {
	ctx := context.Background()
	cluster, err := localcluster.Start(ctx, localcluster.Options{BinDir: env.binDir, StagesFile: env.stagesFile, Nodes: 1})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Errorf("stopping the OpenShift test's control plane: %v", err)
		}
	})
	cfg := cluster.RESTConfig()
	kube := kubernetes.NewForConfigOrDie(cfg)
	client := clientset.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)

	// The controller's CRD, and the SCC CRD that makes the cluster look like OpenShift.
	// This cluster has no conversion webhook (its controller serves none), so the test
	// speaks v1alpha2, the storage version, which needs no conversion.
	crd, err := localcluster.LoopbackCRD(env.root, 0)
	require.NoError(t, err)
	_, err = dyn.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{})
	require.NoError(t, err)
	served, err := servesGroup(kube, "security.openshift.io")
	require.NoError(t, err)
	require.False(t, served, "a plain control plane does not serve security.openshift.io")
	_, err = dyn.Resource(crdResource).Create(ctx, sccCRD(), metav1.CreateOptions{})
	require.NoError(t, err)
	deleteSCC := func() {
		err := dyn.Resource(crdResource).Delete(context.Background(), "securitycontextconstraints.security.openshift.io", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the SCC CRD: %v", err)
		}
	}
	t.Cleanup(deleteSCC)
	eventually(t, 30*time.Second, "discovery lists security.openshift.io and the LlamaStackDistribution CRD is served", func(ctx context.Context) (bool, error) {
		if ok, err := servesGroup(kube, "security.openshift.io"); err != nil || !ok {
			return false, nil
		}
		_, err := client.LlamastackV1alpha2().LlamaStackDistributions("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})

	ns := "openshift-scc"
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The controller, started after the group is served, as cmd/controller runs it.
	ctrlCtx, cancel := context.WithCancel(klog.NewContext(ctx, klog.LoggerWithName(klog.NewKlogr(), "openshift")))
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctrlCtx, cfg, app.Options{
			Workers: 1, QPS: 50, Burst: 100, Namespace: ns, OperatorNamespace: operatorNamespace, Version: "e2e",
			ServerProbe: "off", MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "the OpenShift test's controller")
		case <-time.After(30 * time.Second):
			t.Error("the OpenShift test's controller did not stop within 30s")
		}
	})

	_, err = client.LlamastackV1alpha2().LlamaStackDistributions(ns).Create(ctx, hubOf(t, llsd(ns, "scc")), metav1.CreateOptions{})
	require.NoError(t, err)
	var d *appsv1.Deployment
	eventually(t, 60*time.Second, "the Deployment exists", func(ctx context.Context) (bool, error) {
		d, err = kube.AppsV1().Deployments(ns).Get(ctx, "scc", metav1.GetOptions{})
		return err == nil, nil
	})
	pod := d.Spec.Template.Spec
	require.NotNil(t, pod.SecurityContext)
	assert.Nil(t, pod.SecurityContext.RunAsUser, "runAsUser is the SCC's to assign")
	assert.Nil(t, pod.SecurityContext.FSGroup, "fsGroup is the SCC's to assign")
	assert.Equal(t, ptr.To(true), pod.SecurityContext.RunAsNonRoot)
	assert.Equal(t, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}, pod.SecurityContext.SeccompProfile)
	require.Len(t, pod.Containers, 1)
	assert.Equal(t, &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}, pod.Containers[0].SecurityContext)

	// Pod Security restricted admits the pods (kwok reports them Running and Ready).
	eventually(t, 90*time.Second, "the CR is Ready", func(ctx context.Context) (bool, error) {
		l, err := client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, "scc", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return l.Status.ObservedGeneration == l.Generation && meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha2.ConditionReady), nil
	})

	// A user's securityContext still replaces the default.
	user := &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(1000650000)), FSGroup: ptr.To(int64(1000650000)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	eventually(t, 10*time.Second, "the CR is edited", func(ctx context.Context) (bool, error) {
		l, err := client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, "scc", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		l.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{SecurityContext: user.DeepCopy()}
		_, err = client.LlamastackV1alpha2().LlamaStackDistributions(ns).Update(ctx, l, metav1.UpdateOptions{})
		return err == nil, nil
	})
	eventually(t, 30*time.Second, "the user's securityContext is applied", func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "scc", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		sc := d.Spec.Template.Spec.SecurityContext
		return sc != nil && ptr.Deref(sc.RunAsUser, 0) == 1000650000 && ptr.Deref(sc.FSGroup, 0) == 1000650000, nil
	})

	// The SCC CRD goes; the group with it.
	deleteSCC()
	eventually(t, 30*time.Second, "discovery no longer lists security.openshift.io", func(ctx context.Context) (bool, error) {
		ok, err := servesGroup(kube, "security.openshift.io")
		return err == nil && !ok, nil
	})
}
