//go:build e2e

package chaos

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// The controller is killed (SIGKILL) at random points while 50 CRs are created and
// edited, and restarted each time; meanwhile a user deletes and edits children by hand,
// and someone else's Service already bears the name of one CR's Service. In the end
// everything converges with no duplicate, no orphan, the foreign Service untouched, no
// PVC lost and one rollout per spec change.
func TestKillControllerAtRandom(t *testing.T) {
	const crs = 50
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	s := newScenario(t, 5)
	from := time.Now()
	ctx := context.Background()
	nsOf := func(i int) string { return s.namespaces[i%len(s.namespaces)] }

	// Someone else's Service, created before the CR whose Service would take its name.
	foreign, err := env.kube.CoreV1().Services(nsOf(7)).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "llsd-7-service", Labels: map[string]string{"team": "other"}},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "other"}, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	s.foreign["Service "+nsOf(7)+"/llsd-7-service"] = foreign.ResourceVersion
	s.blocked[nsOf(7)+"/llsd-7"] = v1alpha1.ReasonResourceNotOwned

	// The killer: SIGKILL every 0.5–3 s, restart after up to 0.5 s.
	var mu sync.Mutex
	var current *controllerProcess
	var kills int
	stopKiller := make(chan struct{})
	killerDone := make(chan error, 1)
	first, err := launch("a")
	require.NoError(t, err)
	current = first
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		current.kill()
		if t.Failed() {
			t.Logf("controller log (end):\n%s", tail(current.log, 80))
		}
	})
	go func() {
		for {
			select {
			case <-stopKiller:
				killerDone <- nil
				return
			case <-time.After(time.Duration(500+rng.IntN(2500)) * time.Millisecond):
			}
			mu.Lock()
			current.kill()
			kills++
			mu.Unlock()
			time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
			p, err := launch("a")
			mu.Lock()
			if err == nil {
				current = p
			}
			mu.Unlock()
			if err != nil {
				killerDone <- err
				return
			}
		}
	}()

	// The load: create every CR in random order, then edit them, while a user deletes
	// one Service and hand-edits one Deployment.
	order := rng.Perm(crs)
	for _, i := range order {
		createCR(t, mixed(nsOf(i), i))
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
	}
	waitExists(t, "Service llsd-3-service", func(ctx context.Context) error {
		_, err := env.kube.CoreV1().Services(nsOf(3)).Get(ctx, "llsd-3-service", metav1.GetOptions{})
		return err
	})
	require.NoError(t, env.kube.CoreV1().Services(nsOf(3)).Delete(ctx, "llsd-3-service", metav1.DeleteOptions{}))
	for _, i := range rng.Perm(crs) {
		name := mixed(nsOf(i), i).Name
		switch {
		case i%2 == 0:
			// A pod template change: one rollout.
			editCR(t, nsOf(i), name, func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.Env = append(l.Spec.Server.ContainerSpec.Env, corev1.EnvVar{Name: "CHAOS", Value: "edited"})
			})
			s.edits[nsOf(i)+"/"+name]++
		case i%5 != 0 && i%4 != 0:
			// A replica change; above one replica the pods also get spread over nodes
			// (topology spread constraints, as upstream), so it may roll the pods once.
			editCR(t, nsOf(i), name, func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 2 })
			s.edits[nsOf(i)+"/"+name]++
		}
		time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
	}
	var image string
	waitExists(t, "Deployment llsd-9", func(ctx context.Context) error {
		d, err := env.kube.AppsV1().Deployments(nsOf(9)).Get(ctx, "llsd-9", metav1.GetOptions{})
		if err != nil {
			return err
		}
		image = d.Spec.Template.Spec.Containers[0].Image
		d.Labels["team"] = "mine"
		d.Spec.Template.Spec.Containers[0].Image = "example.com/hand-edited:1"
		_, err = env.kube.AppsV1().Deployments(nsOf(9)).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	// The user's own template change may roll the pods once, and its repair back to the
	// original template reuses the first ReplicaSet.
	s.edits[nsOf(9)+"/llsd-9"]++

	time.Sleep(3 * time.Second)
	close(stopKiller)
	require.NoError(t, <-killerDone)
	mu.Lock()
	t.Logf("the controller was killed %d times", kills)
	mu.Unlock()

	s.waitConverged(3 * time.Minute)
	s.recordPVCs()
	// One more kill and restart once converged: nothing may change.
	mu.Lock()
	current.kill()
	// No replica runs: v1alpha2, the storage version, reads as ever; v1alpha1 fails with
	// the API server's conversion webhook error (nothing serves it).
	_, err = env.client.LlamastackV1alpha2().LlamaStackDistributions(nsOf(7)).Get(ctx, "llsd-7", metav1.GetOptions{})
	assert.NoError(t, err, "a v1alpha2 read with no controller up")
	_, err = env.client.LlamastackV1alpha1().LlamaStackDistributions(nsOf(7)).Get(ctx, "llsd-7", metav1.GetOptions{})
	if assert.Error(t, err, "a v1alpha1 read with no controller up") {
		assert.Contains(t, err.Error(), "conversion webhook")
	}
	current, err = launch("a")
	mu.Unlock()
	require.NoError(t, err)
	s.waitConverged(time.Minute)
	s.check(from)
	// With a replica up again, v1alpha1 reads convert through its webhook.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := env.client.LlamastackV1alpha1().LlamaStackDistributions(nsOf(7)).Get(ctx, "llsd-7", metav1.GetOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "a v1alpha1 read through the restarted controller's webhook")

	d, err := env.kube.AppsV1().Deployments(nsOf(9)).Get(ctx, "llsd-9", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, image, d.Spec.Template.Spec.Containers[0].Image, "the hand-edited image is repaired")
	assert.Equal(t, "mine", d.Labels["team"], "a label the controller does not set survives")
	l, err := getCR(ctx, t, nsOf(7), "llsd-7")
	require.NoError(t, err)
	t.Logf("the CR whose Service name is taken reports: %s", describe(l))
	t.Logf("requests by the controller:\n%s", summarize(controllerRequests(t, from)))
}

// waitExists polls get (which may also act on what it got) until it succeeds.
func waitExists(t *testing.T, what string, get func(ctx context.Context) error) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	require.NoError(t, err, "waiting for %s", what)
}
