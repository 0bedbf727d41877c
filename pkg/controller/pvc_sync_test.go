package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

func withStorage(size string, mods ...func(*v1alpha1.StorageSpec)) func(*v1alpha1.LlamaStackDistribution) {
	return func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse(size))}
		for _, m := range mods {
			m(l.Spec.Server.Storage)
		}
	}
}

func TestStorageClassAndAccessModes(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withStorage("10Gi", func(s *v1alpha1.StorageSpec) {
		s.StorageClassName = ptr.To("fast")
		s.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	})))
	f.converge("app")
	p := f.pvc("app-pvc")
	assert.Equal(t, ptr.To("fast"), p.Spec.StorageClassName)
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, p.Spec.AccessModes)
	assert.Equal(t, metav1.ConditionTrue, cond(t, f.llsd("app"), v1alpha2.ConditionStorageInSync).Status)

	// Class and modes are immutable: a change is reported, not applied, and nothing loops.
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage.StorageClassName = ptr.To("slow")
	})
	f.converge("app")
	assert.Equal(t, ptr.To("fast"), f.pvc("app-pvc").Spec.StorageClassName)
	c := cond(t, f.llsd("app"), v1alpha2.ConditionStorageInSync)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha2.ReasonStorageFieldImmutable, c.Reason)
	assert.Contains(t, c.Message, `class "fast"`)
	assert.True(t, hasEvent(f.events(), "Warning StorageFieldImmutable"))
	assert.NotEqual(t, v1alpha2.PhaseFailed, f.llsd("app").Status.Phase, "the server keeps running")
}

func TestStorageShrinkRefused(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withStorage("20Gi")))
	f.converge("app")
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage.Size = ptr.To(resource.MustParse("10Gi"))
	})
	f.converge("app")
	size := f.pvc("app-pvc").Spec.Resources.Requests[corev1.ResourceStorage]
	assert.Equal(t, "20Gi", size.String())
	c := cond(t, f.llsd("app"), v1alpha2.ConditionStorageInSync)
	assert.Equal(t, v1alpha2.ReasonShrinkRefused, c.Reason)
	assert.Contains(t, c.Message, "10Gi")
	assert.Contains(t, c.Message, "20Gi")

	// Back to the claim's size: in sync again.
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage.Size = ptr.To(resource.MustParse("20Gi"))
	})
	f.converge("app")
	assert.Equal(t, metav1.ConditionTrue, cond(t, f.llsd("app"), v1alpha2.ConditionStorageInSync).Status)
}

// An expansion the API server refuses (a StorageClass without allowVolumeExpansion) is
// reported once and not retried on every sync.
func TestStorageExpansionRefused(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withStorage("10Gi")))
	f.converge("app")
	f.kubeclient.PrependReactor("patch", "persistentvolumeclaims", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, "app-pvc",
			errors.New("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"))
	})
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage.Size = ptr.To(resource.MustParse("30Gi"))
	})
	f.sync("app")
	c := cond(t, f.llsd("app"), v1alpha2.ConditionStorageInSync)
	assert.Equal(t, v1alpha2.ReasonResizeRefused, c.Reason)
	assert.Contains(t, c.Message, "30Gi")
	assert.Contains(t, c.Message, "must support resize")
	assert.Empty(t, writesTo(f.sync("app"), "persistentvolumeclaims", "app-pvc"), "a refused expansion is not retried")
}

// ReadWriteOnce storage with several replicas or autoscaling is accepted, with a warning.
func TestReadWriteOnceSharedWarning(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withStorage("10Gi"), func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 2 }))
	f.converge("app")
	c := cond(t, f.llsd("app"), v1alpha2.ConditionStorageAccessWarning)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, v1alpha2.ReasonReadWriteOnceShared, c.Reason)
	assert.True(t, hasEvent(f.events(), "Warning ReadWriteOnceShared"))

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 1 })
	f.converge("app")
	assert.Nil(t, findCondition(f.llsd("app"), v1alpha2.ConditionStorageAccessWarning))

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 3}
	})
	f.converge("app")
	assert.NotNil(t, findCondition(f.llsd("app"), v1alpha2.ConditionStorageAccessWarning))
}

// A claim that cannot be created (a quota, say) is an error retried with backoff, not an
// expansion refused.
func TestPVCCreateRefusedIsRetried(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withStorage("10Gi")))
	f.kubeclient.PrependReactor("patch", "persistentvolumeclaims", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, "app-pvc",
			errors.New("exceeded quota: storage"))
	})
	err := f.c.syncHandler(f.ctx, key("app"))
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	l := f.llsd("app")
	assert.Nil(t, findCondition(l, v1alpha2.ConditionStorageInSync), "no ResizeRefused for a claim never made")
	assert.Nil(t, f.stored(kindDeployment, "app"), "no Deployment without its claim")
}
