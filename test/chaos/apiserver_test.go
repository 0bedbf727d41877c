//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// kube-apiserver crashes (SIGKILL) while 20 CRs are being synced; later, while the
// controller's watches are quiet, etcd compacts past the resourceVersions they hold and
// the API server crashes again, so the watches cannot resume (410 Gone) and the
// informers list again. The controller rides through both and converges on edits made
// afterwards.
func TestAPIServerRestartAndCompaction(t *testing.T) {
	s := newScenario(t, 2)
	ctx := context.Background()
	nsOf := func(i int) string { return s.namespaces[i%len(s.namespaces)] }
	from := time.Now()
	startController(t, "b")

	for i := range 10 {
		createCR(t, mixed(nsOf(i), i))
	}
	// The crash comes while the controller works on the first ten; the other ten are
	// created as soon as the API server answers again.
	crashed := make(chan error, 1)
	go func() { crashed <- env.cluster.Restart(ctx, localcluster.KubeAPIServer, true) }()
	for i := 10; i < 20; i++ {
		l := mixed(nsOf(i), i)
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			if l.Spec.Server.Storage != nil {
				if _, err := env.kube.CoreV1().PersistentVolumes().Create(ctx, pvFor(l), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					return false, nil
				}
			}
			_, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(l.Namespace).Create(ctx, toHub(t, l), metav1.CreateOptions{})
			return err == nil || apierrors.IsAlreadyExists(err), nil
		})
		require.NoError(t, err)
		if l.Spec.Server.Storage != nil {
			t.Cleanup(func() {
				_ = env.kube.CoreV1().PersistentVolumes().Delete(context.Background(), pvFor(l).Name, metav1.DeleteOptions{})
			})
		}
	}
	require.NoError(t, <-crashed)
	// After the crash every component of the cluster lists and watches again at once
	// on two cores (the scheduler, kwok and the volume binder too, which the CRs wait
	// on): the bound leaves room for that.
	s.waitConverged(4 * time.Minute)

	// Writes the controller does not watch move etcd's revision on; the API server
	// compacts every 10 s, each time up to the revision of the compaction before.
	churn := s.namespaces[0]
	deadline := time.Now().Add(25 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		_, err := env.kube.CoreV1().Secrets(churn).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("churn-%d", i)},
			StringData: map[string]string{"n": fmt.Sprint(i)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		time.Sleep(250 * time.Millisecond)
	}
	restarted := time.Now()
	require.NoError(t, env.cluster.Restart(ctx, localcluster.KubeAPIServer, true))

	for i := range 20 {
		editCR(t, nsOf(i), fmt.Sprintf("llsd-%d", i), func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.ContainerSpec.Env = append(l.Spec.Server.ContainerSpec.Env, corev1.EnvVar{Name: "AFTER_RESTART", Value: "1"})
		})
		s.edits[nsOf(i)+"/"+fmt.Sprintf("llsd-%d", i)]++
	}
	s.waitConverged(2 * time.Minute)
	s.recordPVCs()
	s.check(from)

	// The informers listed again after the second crash: a list, or (client-go's
	// streaming list) a watch that asks for the initial events.
	var relists, resumed []string
	for _, e := range controllerRequests(t, restarted) {
		switch {
		case e.Verb == "list" || strings.Contains(e.RequestURI, "sendInitialEvents=true"):
			relists = append(relists, e.resource())
		case e.Verb == "watch":
			resumed = append(resumed, e.resource())
		}
	}
	t.Logf("after the compaction and crash: informers that listed again: %v; watches resumed: %v", relists, resumed)
	assert.NotEmpty(t, relists, "no informer listed again, so the expired watches were not exercised")
}
