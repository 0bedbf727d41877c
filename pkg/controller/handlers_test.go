package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

func key(name string) cache.ObjectName { return cache.ObjectName{Namespace: testNamespace, Name: name} }

// childDeployment is a Deployment in the CR namespace whose controller reference names
// the CR "app" with the given Kind and UID.
func childDeployment(kind string, uid types.UID, rv string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
		Name: "app", Namespace: testNamespace, ResourceVersion: rv,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "llama-stack-operator"},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "llamastack.io/v1alpha1", Kind: kind, Name: "app", UID: uid, Controller: ptr.To(true),
		}},
	}}
}

func TestOwnedHandlerResolvesTheOwnerByKindAndUID(t *testing.T) {
	f := newFixture(t, newLLSDv1("app"))
	h := f.c.ownedHandler()
	require.Zero(t, f.c.queue.Len())

	h.OnAdd(childDeployment("LlamaStackDistribution", "uid-of-an-earlier-app", "1"), false)
	assert.Zero(t, f.c.queue.Len(), "a CR that merely reuses the name is not the owner")

	h.OnAdd(childDeployment("SomethingElse", "uid-app", "1"), false)
	assert.Zero(t, f.c.queue.Len(), "another kind is not the owner")

	noOwner := childDeployment("LlamaStackDistribution", "uid-app", "1")
	noOwner.OwnerReferences[0].Controller = nil
	h.OnAdd(noOwner, false)
	assert.Zero(t, f.c.queue.Len(), "only the controller reference counts")

	h.OnAdd(childDeployment("LlamaStackDistribution", "uid-app", "1"), false)
	require.Equal(t, 1, f.c.queue.Len())
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued())

	// Updates: a resync (same resourceVersion) is skipped, a change enqueues.
	h.OnUpdate(childDeployment("LlamaStackDistribution", "uid-app", "1"), childDeployment("LlamaStackDistribution", "uid-app", "1"))
	assert.Zero(t, f.c.queue.Len())
	h.OnUpdate(childDeployment("LlamaStackDistribution", "uid-app", "1"), childDeployment("LlamaStackDistribution", "uid-app", "2"))
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued())
	h.OnUpdate(childDeployment("LlamaStackDistribution", "uid-x", "1"), childDeployment("LlamaStackDistribution", "uid-x", "2"))
	assert.Zero(t, f.c.queue.Len())

	// Deletes, also as tombstones.
	h.OnDelete(childDeployment("LlamaStackDistribution", "uid-app", "2"))
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued())
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "demo/app", Obj: childDeployment("LlamaStackDistribution", "uid-app", "2")})
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued())
	// A child of an earlier CR of the same name going away wakes the CR that now bears
	// the name: it waits for the garbage collector to delete it.
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "demo/app", Obj: childDeployment("LlamaStackDistribution", "uid-x", "2")})
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued())
	gone := childDeployment("LlamaStackDistribution", "uid-x", "2")
	gone.OwnerReferences[0].Name = "no-such-cr"
	h.OnDelete(gone)
	assert.Zero(t, f.c.queue.Len())
}

func TestConfigMapEventEnqueuesTheCRsThatReferenceIt(t *testing.T) {
	f := newFixture(t,
		newLLSDv1("same", withUserConfigMap("cfg", "")),
		newLLSDv1("same-explicit", withUserConfigMap("cfg", testNamespace)),
		newLLSDv1("cross", withUserConfigMap("cfg", "shared")),
		newLLSDv1("other-name", withUserConfigMap("cfg2", "")),
		newLLSDv1("none"),
	)
	h := f.c.configMapHandler()

	h.OnAdd(configMap(testNamespace, "cfg", nil, nil), false)
	assert.ElementsMatch(t, []cache.ObjectName{key("same"), key("same-explicit")}, f.queued())

	h.OnAdd(configMap("shared", "cfg", nil, nil), false)
	assert.Equal(t, []cache.ObjectName{key("cross")}, f.queued(), "a cross-namespace reference")

	h.OnAdd(configMap(testNamespace, "unrelated", nil, nil), false)
	assert.Zero(t, f.c.queue.Len())

	old := configMap(testNamespace, "cfg2", nil, nil)
	old.ResourceVersion = "5"
	h.OnUpdate(old, old.DeepCopy())
	assert.Zero(t, f.c.queue.Len(), "a resync enqueues nothing")
	changed := old.DeepCopy()
	changed.ResourceVersion = "6"
	h.OnUpdate(old, changed)
	assert.Equal(t, []cache.ObjectName{key("other-name")}, f.queued())

	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "shared/cfg", Obj: configMap("shared", "cfg", nil, nil)})
	assert.Equal(t, []cache.ObjectName{key("cross")}, f.queued(), "a deleted ConfigMap")

	// The managed copy enqueues its owner.
	cp := configMap(testNamespace, "none-user-config", nil, nil)
	cp.OwnerReferences = []metav1.OwnerReference{{APIVersion: "llamastack.io/v1alpha1", Kind: "LlamaStackDistribution",
		Name: "none", UID: "uid-none", Controller: ptr.To(true)}}
	h.OnAdd(cp, false)
	assert.Equal(t, []cache.ObjectName{key("none")}, f.queued())
}

func TestConfigMapIndexFollowsTheSpec(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withUserConfigMap("cfg", "")))
	h := f.c.configMapHandler()
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "cfg", ConfigMapNamespace: "shared"}
	})
	h.OnAdd(configMap(testNamespace, "cfg", nil, nil), false)
	assert.Zero(t, f.c.queue.Len(), "no longer referenced")
	h.OnAdd(configMap("shared", "cfg", nil, nil), false)
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued())
}

func TestLLSDUpdatesThatEnqueue(t *testing.T) {
	f := newFixture(t)
	base := newLLSDv1("app")
	base.ResourceVersion = "10"
	with := func(edit func(*v1alpha1.LlamaStackDistribution)) *v1alpha2.LlamaStackDistribution {
		l := base.DeepCopy()
		l.ResourceVersion = "11"
		edit(l)
		return hub(l)
	}

	f.c.updateLLSD(hub(base), hub(base))
	assert.Zero(t, f.c.queue.Len(), "a resync (same resourceVersion)")

	f.c.updateLLSD(hub(base), with(func(l *v1alpha1.LlamaStackDistribution) {
		l.Status.Phase = v1alpha1.PhaseReady
		l.Status.ObservedGeneration = 1
	}))
	assert.Zero(t, f.c.queue.Len(), "a status-only update (same generation), such as our own")

	f.c.updateLLSD(hub(base), with(func(l *v1alpha1.LlamaStackDistribution) { l.Labels = map[string]string{"x": "y"} }))
	assert.Zero(t, f.c.queue.Len(), "a metadata-only update the sync does not read")

	f.c.updateLLSD(hub(base), with(func(l *v1alpha1.LlamaStackDistribution) {
		l.Generation = 2
		l.Spec.Replicas = 2
	}))
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued(), "a spec change")

	f.c.updateLLSD(hub(base), with(func(l *v1alpha1.LlamaStackDistribution) {
		l.DeletionTimestamp = ptr.To(metav1.Now())
	}))
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued(), "a deletion")

	f.c.updateLLSD(hub(base), with(func(l *v1alpha1.LlamaStackDistribution) { l.UID = "uid-recreated" }))
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued(), "a CR recreated under the same name")
}

func TestHandlersAreWiredToTheInformers(t *testing.T) {
	// The fixture's caches are filled without events; this checks the handlers
	// NewController registers, through the informers' own dispatch.
	f := newFixture(t, newLLSDv1("app"))
	d := childDeployment("LlamaStackDistribution", "uid-app", "")
	stop := make(chan struct{})
	defer close(stop)
	f.childInformers.Start(stop)
	f.childInformers.WaitForCacheSync(stop)
	_, err := f.kubeclient.AppsV1().Deployments(testNamespace).Create(f.ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.c.queue.Len() > 0 }, 5*time.Second, 10*time.Millisecond)
	k, _ := f.c.queue.Get()
	f.c.queue.Done(k)
	assert.Equal(t, key("app"), k)
}

// A managed ConfigMap left by an earlier CR of the same name wakes the new CR when the
// garbage collector deletes it; a change of it does not.
func TestDeletedConfigMapOfAnEarlierCRWakesTheNewOne(t *testing.T) {
	f := newFixture(t, newLLSDv1("app"))
	h := f.c.configMapHandler()
	left := configMap(testNamespace, "app-user-config", nil, nil)
	left.OwnerReferences = childDeployment("LlamaStackDistribution", "uid-of-an-earlier-app", "1").OwnerReferences
	h.OnUpdate(left, func() *corev1.ConfigMap { c := left.DeepCopy(); c.ResourceVersion = "2"; return c }())
	assert.Empty(t, f.queued())
	h.OnDelete(left)
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued())
}

// A new ReplicaSet of a CR's Deployment queues the CR: a pod's event may have come
// before it reached the cache. Not one of another Deployment, nor a ReplicaSet's update.
func TestReplicaSetHandler(t *testing.T) {
	f := newPodFixture(t)
	h := f.c.replicaSetHandler()
	f.queued()
	rs := func(deployment string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: deployment + "-2222", Namespace: testNamespace, ResourceVersion: "1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment, UID: "dep-uid", Controller: ptr.To(true)}}}}
	}
	h.OnAdd(rs("app"), false)
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued(), "a new ReplicaSet of the CR's Deployment")
	h.OnAdd(rs("other"), false)
	assert.Empty(t, f.queued(), "no CR of that name")
	updated := rs("app")
	updated.ResourceVersion = "2"
	h.OnUpdate(rs("app"), updated)
	assert.Empty(t, f.queued(), "an update")
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "demo/app-2222", Obj: rs("app")})
	assert.Equal(t, []cache.ObjectName{key("app")}, f.queued(), "deleted (tombstone)")

	// A Deployment of the CR's name that the CR does not control.
	f.updateDeployment("app", "someone", func(d *appsv1.Deployment) { d.OwnerReferences = nil })
	h.OnAdd(rs("app"), false)
	assert.Empty(t, f.queued(), "not the CR's Deployment")
}
