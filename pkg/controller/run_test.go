package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
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

	l := newLLSD("demo", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "cfg"}
	})
	// The CR exists before the informers start: the generated fake cannot create custom
	// resources through its field-managed tracker (there is no OpenAPI schema for them).
	client := fake.NewClientset(l)
	kubeclient := k8sfake.NewClientset(configMap(testNamespace, "cfg", map[string]string{"config.yaml": "a: 1"}, nil))
	llsdInformers := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(TransformStripManagedFields))
	childInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeclient, 0, kubeinformers.WithTransform(TransformStripManagedFields))
	cmInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeclient, 0, kubeinformers.WithTransform(TransformConfigMap))
	opInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeclient, 0, kubeinformers.WithNamespace(testOperatorNamespace))
	c, err := NewController(ctx, Config{
		KubeClient: kubeclient, Client: client,
		LLSDInformers: llsdInformers, ChildInformers: childInformers,
		ConfigMapInformers: cmInformers, OperatorInformers: opInformers,
		OperatorNamespace: testOperatorNamespace, OperatorVersion: "test",
		Recorder: record.NewFakeRecorder(1000),
	})
	require.NoError(t, err)
	for _, f := range []interface{ Start(<-chan struct{}) }{llsdInformers, childInformers, cmInformers, opInformers} {
		f.Start(ctx.Done())
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()

	hash := func() string {
		d, err := kubeclient.AppsV1().Deployments(testNamespace).Get(ctx, "demo", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		require.NoError(t, err)
		return d.Spec.Template.Annotations[annotationUserConfigHash]
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil }), what)
	}
	waitFor("the Deployment is created", func() bool { return hash() != "" })
	first := hash()
	_, err = kubeclient.CoreV1().Services(testNamespace).Get(ctx, "demo-service", metav1.GetOptions{})
	require.NoError(t, err)
	waitFor("the status is written", func() bool {
		got, err := client.LlamastackV1alpha1().LlamaStackDistributions(testNamespace).Get(ctx, "demo", metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == 1 && got.Status.Phase == v1alpha1.PhaseInitializing
	})

	cm := configMap(testNamespace, "cfg", map[string]string{"config.yaml": "a: 2"}, nil)
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
