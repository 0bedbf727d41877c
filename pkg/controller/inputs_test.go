package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	coreac "k8s.io/client-go/applyconfigurations/core/v1"
	metaac "k8s.io/client-go/applyconfigurations/meta/v1"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/testcert"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// Tests of what the Deployment depends on: it never mounts an input that is not the
// CR's, and a managed ConfigMap outlives every pod template that mounts it.

// claimNames lists the claims d's pod template mounts.
func claimNames(d *appsv1.Deployment) []string {
	var out []string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// A claim named <n>-pvc that is someone else's is reported and never mounted: no
// Deployment is made that would share another application's data.
func TestForeignPVCIsNeverMounted(t *testing.T) {
	for variant, labelled := range foreignVariants {
		t.Run(variant, func(t *testing.T) {
			l := newLLSDv1("app", withStorage("10Gi"))
			f := newFixture(t, l, foreignObject(kindPVC, "app-pvc", labelled))
			actions := f.sync("app")
			assert.Empty(t, writesTo(actions, "deployments", "app"), "no Deployment may mount someone else's claim")
			assert.Nil(t, f.stored(kindDeployment, "app"))
			requireUserError(t, f.llsd("app"), v1alpha2.ReasonResourceNotOwned, "PersistentVolumeClaim demo/app-pvc")
			// The children that do not mount the claim are made.
			assert.NotNil(t, f.stored(kindService, "app-service"))
			assert.Empty(t, writesTo(f.sync("app"), "deployments", "app"))
		})
	}
}

// A running server without storage keeps its Deployment as it is when storage is asked
// for under a name someone else's claim holds: it is not rolled to mount that claim.
func TestStorageAddedOverForeignPVCKeepsWhatRuns(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	before := f.deployment("app").DeepCopy()

	require.NoError(t, f.kubeclient.Tracker().Add(foreignObject(kindPVC, "app-pvc", false)))
	f.refreshCaches()
	f.updateLLSD("app", withStorage("10Gi"))
	actions := f.sync("app")
	assert.Empty(t, writesTo(actions, "deployments", "app"))
	assert.Empty(t, claimNames(f.deployment("app")))
	assert.Equal(t, before.Spec, f.deployment("app").Spec)
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonResourceNotOwned, "PersistentVolumeClaim demo/app-pvc")

	// Once it is gone, the claim is made and mounted.
	require.NoError(t, f.kubeclient.Tracker().Delete(kindPVC.gvr, testNamespace, "app-pvc"))
	f.refreshCaches()
	f.converge("app")
	assert.Equal(t, []string{"app-pvc"}, claimNames(f.deployment("app")))
	assertControlledChild(t, f.stored(kindPVC, "app-pvc"), f.llsd("app"))
}

// An error writing the claim leaves the Deployment as it is: it is retried, not
// rolled on without its volume's owner known.
func TestPVCErrorHoldsTheDeployment(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withStorage("10Gi")))
	f.kubeclient.PrependReactor("patch", "persistentvolumeclaims", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd is having a bad day"))
	})
	f.client.ClearActions()
	f.kubeclient.ClearActions()
	err := f.c.syncHandler(f.ctx, key("app"))
	require.Error(t, err)
	assert.Empty(t, writesTo(filterInformerActions(f.kubeclient.Actions()), "deployments", "app"))
}

// A managed ConfigMap that is no longer needed is deleted only after the Deployment
// stopped mounting it; while the Deployment cannot be updated it stays.
func TestManagedConfigMapOutlivesItsMount(t *testing.T) {
	cases := map[string]struct {
		mods    []func(*v1alpha1.LlamaStackDistribution)
		objs    []runtime.Object
		name    string
		disable func(*v1alpha1.LlamaStackDistribution)
	}{
		"user-config copy": {
			mods: []func(*v1alpha1.LlamaStackDistribution){func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: sharedConfigName, ConfigMapNamespace: sharedNamespace}
			}},
			objs:    allChildrenObjects(),
			name:    sharedConfigCopyName(hub(newLLSDv1("app"))),
			disable: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.UserConfig = nil },
		},
		"CA bundle": {
			mods: []func(*v1alpha1.LlamaStackDistribution){withCABundle("my-ca", "")},
			objs: []runtime.Object{configMap(testNamespace, "my-ca",
				map[string]string{revision.CABundleKey: testcert.CertPEMs(t, 1)[0]}, nil)},
			name:    "app-ca-bundle",
			disable: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.TLSConfig = nil },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, append(tc.objs, newLLSDv1("app", tc.mods...))...)
			f.converge("app")
			require.True(t, mountsConfigMap(f.deployment("app"), tc.name))
			f.updateLLSD("app", tc.disable)

			// The Deployment cannot be updated: the ConfigMap stays.
			failing := true
			f.kubeclient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
				if failing {
					return true, nil, apierrors.NewServiceUnavailable("try later")
				}
				return false, nil, nil
			})
			f.kubeclient.ClearActions()
			require.Error(t, f.c.syncHandler(f.ctx, key("app")))
			assert.Empty(t, writesTo(filterInformerActions(f.kubeclient.Actions()), "configmaps", tc.name))
			_, err := f.kubeclient.CoreV1().ConfigMaps(testNamespace).Get(f.ctx, tc.name, metav1.GetOptions{})
			require.NoError(t, err, "a ConfigMap the pods still mount was deleted")

			// The Deployment no longer mounts it, but its old pods still do until the
			// rollout is complete: it stays.
			failing = false
			f.kubeclient.ClearActions()
			require.NoError(t, f.c.syncHandler(f.ctx, key("app")))
			assert.Equal(t, []string{"patch deployments app"}, writesTo(f.kubeclient.Actions(), "deployments", "app"))
			assert.Empty(t, writesTo(f.kubeclient.Actions(), "configmaps", tc.name), "deleted while the rollout runs")
			f.refreshCaches()
			assert.False(t, mountsConfigMap(f.deployment("app"), tc.name))

			// Rolled out: it goes.
			f.setDeploymentStatus("app", rolledOut)
			assert.Equal(t, []string{"delete configmaps " + tc.name}, writesTo(f.sync("app"), "configmaps", tc.name))
			f.converge("app")
		})
	}
}

// A claim made by the upstream operator (a plain create, then an apply by a manager named
// after the CR) is in sync when its class and modes are what the spec asks: no sync
// reports StorageFieldImmutable, which advises deleting the claim.
func TestUpstreamPVCIsInSync(t *testing.T) {
	l := newLLSDv1("app", withStorage("10Gi"))
	f := newFixture(t, l)
	upstream := coreac.PersistentVolumeClaim("app-pvc", testNamespace).
		WithLabels(llsd.ChildLabels(hub(l))).
		WithOwnerReferences(metaac.OwnerReference().WithAPIVersion("llamastack.io/v1alpha1").
			WithKind("LlamaStackDistribution").WithName("app").WithUID(l.UID).WithController(true).WithBlockOwnerDeletion(true)).
		WithSpec(coreac.PersistentVolumeClaimSpec().
			WithAccessModes(corev1.ReadWriteOnce).
			WithResources(coreac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")})))
	_, err := f.kubeclient.CoreV1().PersistentVolumeClaims(testNamespace).Apply(f.ctx, upstream, metav1.ApplyOptions{FieldManager: "app", Force: true})
	require.NoError(t, err)
	f.refreshCaches()

	for i := range 3 {
		f.sync("app")
		got := f.llsd("app")
		c := cond(t, got, v1alpha2.ConditionStorageInSync)
		assert.Equal(t, metav1.ConditionTrue, c.Status, "sync %d: %s", i, c.Message)
		assert.Equal(t, v1alpha2.ReasonStorageInSync, c.Reason)
		for _, e := range f.events() {
			assert.NotContains(t, e, "Warning", "sync %d", i)
		}
	}
	f.converge("app")
	assert.Equal(t, []string{"app-pvc"}, claimNames(f.deployment("app")))
	p := f.pvc("app-pvc")
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, p.Spec.AccessModes)
}

// A child left by an earlier CR of the same name, deleted since, is waited for rather
// than reported as someone else's to delete or rename.
func TestChildOfEarlierCROfTheSameName(t *testing.T) {
	l := newLLSD("app")
	f := newFixture(t, l, foreignObject(kindService, "app-service", true))
	f.sync("app")
	dr := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady)
	assert.Contains(t, dr.Message, "earlier LlamaStackDistribution of this name")
	assert.Contains(t, dr.Message, "garbage collector")
	assert.NotContains(t, dr.Message, "delete or rename")

	// Its deletion by the garbage collector wakes the new CR.
	gone := f.stored(kindService, "app-service").(*corev1.Service).DeepCopy()
	for f.c.queue.Len() > 0 {
		k, _ := f.c.queue.Get()
		f.c.queue.Forget(k)
		f.c.queue.Done(k)
	}
	f.c.handleOwnedDelete(gone)
	require.Equal(t, 1, f.c.queue.Len(), "the delete of the old child wakes the CR of that name")
	k, _ := f.c.queue.Get()
	assert.Equal(t, key("app"), k)
	f.c.queue.Done(k)

	require.NoError(t, f.kubeclient.Tracker().Delete(kindService.gvr, testNamespace, "app-service"))
	f.refreshCaches()
	f.converge("app")
	assertControlledChild(t, f.stored(kindService, "app-service"), f.llsd("app"))
	assert.NotEqual(t, v1alpha2.PhaseFailed, f.llsd("app").Status.Phase)
}

// A claim being deleted is not written, and StorageReady says why the server keeps it.
func TestTerminatingClaimIsNotWritten(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withStorage("10Gi")))
	f.converge("app")
	p := f.pvc("app-pvc").DeepCopy()
	p.DeletionTimestamp = ptr.To(metav1.Now())
	p.Finalizers = []string{"kubernetes.io/pvc-protection"}
	_, err := f.kubeclient.CoreV1().PersistentVolumeClaims(testNamespace).Update(f.ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.refreshCaches()
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage.Size = ptr.To(resource.MustParse("20Gi"))
	})
	assert.Empty(t, writesTo(f.sync("app"), "persistentvolumeclaims", "app-pvc"))
	c := cond(t, f.llsd("app"), v1alpha2.ConditionStorageReady)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Contains(t, c.Message, "being deleted")
}
