package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned/fake"
)

// eventActions counts the requests of a fake clientset that touch Events.
func eventActions(c *k8sfake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetResource().Resource == "events" {
			n++
		}
	}
	return n
}

// With an EventClient, the recorder NewController makes writes every Event through it and
// none through KubeClient, whose requests (and rate limit) stay the workers'.
func TestEventsGoThroughTheEventClient(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	l := newLLSD("demo")
	broken := newLLSDv1("broken", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = "no-such-distribution" })
	client := fake.NewClientset(l, hub(broken))
	work := k8sfake.NewClientset()
	events := k8sfake.NewClientset()
	_, done := runControllerWith(ctx, t, client, work, func(cfg *Config) { cfg.EventClient = events })

	// Created children and a user error each record an Event.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true,
		func(ctx context.Context) (bool, error) {
			list, err := events.CoreV1().Events(testNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			seen := map[string]bool{}
			for _, e := range list.Items {
				seen[e.InvolvedObject.Name+" "+e.Reason+" "+e.Message] = true
				seen[e.InvolvedObject.Name+" "+e.Reason] = true
			}
			return seen["demo Created Created Service demo-service, Deployment demo"] &&
				seen["broken "+v1alpha2.ReasonDistributionNotSupported], nil
		}), "the Events are written through the event client")
	_, err := work.AppsV1().Deployments(testNamespace).Get(ctx, "demo", metav1.GetOptions{})
	require.NoError(t, err, "the work client made the Deployment")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	assert.Zero(t, eventActions(work), "no Event went through the work client")
	assert.NotZero(t, eventActions(events))
	for _, a := range events.Actions() {
		assert.Equal(t, "events", a.GetResource().Resource, "the event client sends nothing else: %v", a)
		_, isCreate := a.(core.CreateAction)
		_, isPatch := a.(core.PatchAction)
		_, isList := a.(core.ListAction)
		assert.True(t, isCreate || isPatch || isList, "%v", a)
	}
}

// Without an EventClient the Events go through KubeClient, as before.
func TestEventsWithoutAnEventClientUseTheKubeClient(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	client := fake.NewClientset(newLLSD("demo"))
	work := k8sfake.NewClientset()
	_, done := runControllerWith(ctx, t, client, work, func(*Config) {})
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return eventActions(work) > 0, nil }), "an Event is written through KubeClient")
	cancel()
	<-done
}
