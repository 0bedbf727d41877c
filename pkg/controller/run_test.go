package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	"github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned/fake"
	informers "github.com/llamastack/llama-stack-controller/pkg/generated/informers/externalversions"
)

// TestRun drives the whole loop on fake clientsets with real informers: a CR
// is seen by its informer, queued, synced, and its children appear; a
// user ConfigMap edit reaches the Deployment through the ConfigMap index; cancelling the
// context stops the workers and Run returns.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	l := newLLSDv1("demo", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "cfg"}
	})
	// The CR exists before the informers start: the generated fake cannot create custom
	// resources through its field-managed tracker (there is no OpenAPI schema for them).
	client := fake.NewClientset(hub(l))
	kubeclient := k8sfake.NewClientset(configMap(testNamespace, "cfg", map[string]string{"config.yaml": userConfigNamed("a: 1")}, nil))
	c, done := runController(ctx, t, client, kubeclient, record.NewFakeRecorder(1000))

	hash := func() string {
		d, err := kubeclient.AppsV1().Deployments(testNamespace).Get(ctx, "demo", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		require.NoError(t, err)
		return d.Spec.Template.Annotations[llsd.AnnotationUserConfigHash]
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil }), what)
	}
	waitFor("the Deployment is created", func() bool { return hash() != "" })
	first := hash()
	_, err := kubeclient.CoreV1().Services(testNamespace).Get(ctx, "demo-service", metav1.GetOptions{})
	require.NoError(t, err)
	waitFor("the status is written", func() bool {
		got, err := client.LlamastackV1alpha2().LlamaStackDistributions(testNamespace).Get(ctx, "demo", metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == 1 && got.Status.Phase == v1alpha2.PhaseInitializing
	})

	cm := configMap(testNamespace, "cfg", map[string]string{"config.yaml": userConfigNamed("a: 2")}, nil)
	cm.ResourceVersion = "2" // the fake tracker keeps none; informers tell updates from resyncs by it
	_, err = kubeclient.CoreV1().ConfigMaps(testNamespace).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitFor("the ConfigMap edit rolls the pods", func() bool { return hash() != first })

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the context was cancelled")
	}
	assert.True(t, c.queue.ShuttingDown())
}

// Stopping: Run returns only after the sync in progress has ended, and keys still queued
// are not synced with the cancelled context.
func TestRunStopWaitsForWorkers(t *testing.T) {
	f := newFixture(t)
	for _, s := range f.c.cachesSynced {
		require.False(t, s(), "the fixture's informers never run")
	}
	f.c.cachesSynced = []cache.InformerSynced{func() bool { return true }}
	assert.True(t, f.c.HasSynced())

	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var synced []string
	var finished bool
	f.c.syncHandler = func(ctx context.Context, key cache.ObjectName) error {
		mu.Lock()
		synced = append(synced, key.Name)
		mu.Unlock()
		if key.Name == "slow" {
			close(entered)
			<-release
			mu.Lock()
			finished = true
			mu.Unlock()
		}
		return nil
	}
	f.c.queue.Add(cache.ObjectName{Namespace: testNamespace, Name: "slow"})
	done := make(chan error, 1)
	go func() { done <- f.c.Run(ctx, 1) }()
	<-entered
	for i := range 5 {
		f.c.queue.Add(cache.ObjectName{Namespace: testNamespace, Name: fmt.Sprintf("queued-%d", i)})
	}
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while a sync was still running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the sync ended")
	}
	mu.Lock()
	defer mu.Unlock()
	assert.True(t, finished)
	assert.Equal(t, []string{"slow"}, synced, "nothing is synced after the context is cancelled")
}

// Cancelled before the caches synced (a controller told to stop as it starts): Run
// returns nil, as for any other graceful stop.
func TestRunStopBeforeCachesSynced(t *testing.T) {
	f := newFixture(t) // its informers are never started, so they never sync
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- f.c.Run(ctx, 1) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	assert.True(t, f.c.queue.ShuttingDown())
}

// runController builds the controller on fake clients, with informer factories made as
// cmd/controller/app makes them (selectors and namespaces aside), starts the informers
// and runs it with two workers until ctx ends. The channel receives Run's result. A nil
// recorder records Events through the API, as in a cluster.
func runController(ctx context.Context, t *testing.T, client clientset.Interface, kubeclient kubernetes.Interface, recorder record.EventRecorder) (*Controller, <-chan error) {
	t.Helper()
	return runControllerWith(ctx, t, client, kubeclient, func(cfg *Config) { cfg.Recorder = recorder })
}

// runControllerWith is runController with the Config edited by edit first.
func runControllerWith(ctx context.Context, t *testing.T, client clientset.Interface, kubeclient kubernetes.Interface, edit func(*Config)) (*Controller, <-chan error) {
	t.Helper()
	llsdInformers := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(children.TransformStripManagedFields))
	childInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeclient, 0, kubeinformers.WithTransform(children.TransformStripManagedFields))
	cmInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeclient, 0, kubeinformers.WithTransform(TransformConfigMap))
	opInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeclient, 0, kubeinformers.WithNamespace(testOperatorNamespace))
	rsInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeclient, 0, kubeinformers.WithTransform(rollout.TransformReplicaSet))
	podInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeclient, 0, kubeinformers.WithTransform(rollout.TransformPod))
	cfg := Config{
		KubeClient: kubeclient, Client: client,
		LLSDInformers: llsdInformers, ChildInformers: childInformers,
		ConfigMapInformers: cmInformers, OperatorInformers: opInformers, ReplicaSetInformers: rsInformers,
		PodInformers: podInformers, MetadataClient: kubeMetadata{kubeclient},
		OperatorNamespace: testOperatorNamespace, OperatorVersion: "test",
	}
	edit(&cfg)
	c, err := NewController(ctx, cfg)
	require.NoError(t, err)
	for _, f := range []interface{ Start(<-chan struct{}) }{llsdInformers, childInformers, cmInformers, opInformers, rsInformers, podInformers} {
		f.Start(ctx.Done())
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()
	return c, done
}

// Config.OpenShift reaches the Deployment the controller applies.
func TestRunOnOpenShift(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset(newLLSD("demo"))
	kubeclient := k8sfake.NewClientset()
	_, done := runControllerWith(ctx, t, client, kubeclient, func(cfg *Config) {
		cfg.OpenShift = true
		cfg.Recorder = record.NewFakeRecorder(1000)
	})
	var d *appsv1.Deployment
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true,
		func(ctx context.Context) (bool, error) {
			var err error
			d, err = kubeclient.AppsV1().Deployments(testNamespace).Get(ctx, "demo", metav1.GetOptions{})
			return err == nil, nil
		}), "the Deployment is created")
	sc := d.Spec.Template.Spec.SecurityContext
	require.NotNil(t, sc)
	assert.Nil(t, sc.RunAsUser)
	assert.Nil(t, sc.FSGroup)
	assert.Equal(t, ptr.To(true), sc.RunAsNonRoot)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)
	cancel()
	require.NoError(t, <-done)
}

// The ConfigMap cache of a running controller holds the ConfigMaps of WatchNamespace as
// entries, indexed by controller UID alone.
func TestRunConfigMapCache(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kubeclient := k8sfake.NewClientset(
		configMap(testNamespace, "mine", map[string]string{"k": "v"}, nil),
		configMap("elsewhere", "other", map[string]string{"k": "v"}, nil))
	c, done := runControllerWith(ctx, t, fake.NewClientset(), kubeclient, func(cfg *Config) {
		cfg.WatchNamespace = testNamespace
		cfg.Recorder = record.NewFakeRecorder(1000)
	})
	require.True(t, cache.WaitForCacheSync(ctx.Done(), c.cachesSynced...))
	assert.Equal(t, []string{controllerUIDIndex}, slices.Collect(maps.Keys(c.configMapCache.GetIndexers())))
	assert.Equal(t, []string{testNamespace + "/mine"}, c.configMapCache.ListKeys())
	obj, exists, err := c.configMapCache.GetByKey(testNamespace + "/mine")
	require.NoError(t, err)
	require.True(t, exists)
	assert.IsType(t, &configMapEntry{}, obj)
	cancel()
	require.NoError(t, <-done)
}
