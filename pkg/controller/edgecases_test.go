package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/testcert"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// The API server mirrors serviceAccountName into the deprecated serviceAccount field.
// The controller sets (so owns) both, and removing the override removes both.
func TestServiceAccountOverrideRemovedCompletely(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{ServiceAccountName: "custom-sa"}
	}))
	f.converge("app")
	pod := f.deployment("app").Spec.Template.Spec
	assert.Equal(t, "custom-sa", pod.ServiceAccountName)
	assert.Equal(t, "custom-sa", pod.DeprecatedServiceAccount)
	assert.Nil(t, pod.AutomountServiceAccountToken)

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.PodOverrides = nil })
	f.converge("app")
	pod = f.deployment("app").Spec.Template.Spec
	assert.Empty(t, pod.ServiceAccountName)
	assert.Empty(t, pod.DeprecatedServiceAccount)
	assert.Equal(t, false, *pod.AutomountServiceAccountToken)
}

// While image-overrides does not parse, a running image is kept only for the same
// distribution: switching the distribution still takes the new one's image.
func TestInvalidOverridesKeepImageOnlyForTheSameDistribution(t *testing.T) {
	f := newFixture(t, newLLSD("app"), operatorConfigMap(map[string]string{revision.KeyImageOverrides: "starter: quay.io/test/llama-stack:pinned"}))
	f.converge("app")
	require.Equal(t, "quay.io/test/llama-stack:pinned", f.image("app"))

	f.setOperatorConfig(map[string]string{revision.KeyImageOverrides: "starter: [unclosed"})
	f.converge("app")
	assert.Equal(t, "quay.io/test/llama-stack:pinned", f.image("app"), "the running image is kept")

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = "postgres-demo" })
	f.converge("app")
	assert.Equal(t, "docker.io/ogxai/distribution-postgres-demo:1.3.0", f.image("app"))
}

// A distribution whose images are not published (they went with docker.io/llamastack)
// is reported with what to use instead, and what runs is kept: the Deployment is never
// moved to an image that cannot be pulled. image-overrides can still run one.
func TestUnpublishedDistributionIsReportedAndKeepsWhatRuns(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	require.Equal(t, "docker.io/ogxai/distribution-starter:1.3.0", f.image("app"))
	f.events()

	for _, name := range []string{"meta-reference-gpu", "remote-vllm"} {
		f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = name })
		f.converge("app")
		assert.Equal(t, "docker.io/ogxai/distribution-starter:1.3.0", f.image("app"), "%s: the running image is kept", name)
		c := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady)
		assert.Equal(t, v1alpha2.ReasonDistributionNotPublished, c.Reason, name)
		assert.Contains(t, c.Message, "has no published image", name)
		assert.Contains(t, c.Message, "use distribution starter", name)
		assert.Contains(t, c.Message, "spec.distribution.image", name)
		assert.NotContains(t, f.llsd("app").Status.DistributionConfig.AvailableDistributions, name, "only published images are offered")
		var warnings []string
		for _, e := range f.events() {
			if strings.HasPrefix(e, "Warning "+v1alpha2.ReasonDistributionNotPublished) {
				warnings = append(warnings, e)
			}
		}
		assert.Len(t, warnings, 1, "%s: one Warning Event", name)
	}

	f.setOperatorConfig(map[string]string{revision.KeyImageOverrides: "remote-vllm: quay.io/me/vllm-stack:0.2.9"})
	f.converge("app")
	assert.Equal(t, "quay.io/me/vllm-stack:0.2.9", f.image("app"), "image-overrides still runs a name without a published image")
	assert.NotEqual(t, v1alpha2.ReasonDistributionNotPublished, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason)
}

// A cross-namespace reference gets one answer whether the ConfigMap is missing or has
// not opted in: a CR cannot learn which ConfigMaps exist in other namespaces.
func TestCrossNamespaceMissingAndNotAllowedLookAlike(t *testing.T) {
	f := newFixture(t,
		newLLSDv1("missing", withUserConfigMap("nope", "other")),
		newLLSDv1("closed", withUserConfigMap("cfg", "other")),
		configMap("other", "cfg", map[string]string{"config.yaml": userConfigNamed("x: 1")}, nil))
	f.sync("missing")
	f.sync("closed")
	missing := cond(t, f.llsd("missing"), v1alpha2.ConditionDeploymentReady)
	closed := cond(t, f.llsd("closed"), v1alpha2.ConditionDeploymentReady)
	assert.Equal(t, v1alpha2.ReasonConfigMapNotAllowed, missing.Reason)
	assert.Equal(t, missing.Reason, closed.Reason)
	assert.Equal(t, missing.Message, strings.ReplaceAll(closed.Message, "/cfg ", "/nope "))
}

// An edit of the managed copy's data is repaired from the source.
func TestEditedUserConfigCopyIsRepaired(t *testing.T) {
	src := configMap("other", "cfg", map[string]string{"config.yaml": userConfigNamed("x: 1")}, map[string]string{AllowedNamespacesAnnotation: testNamespace})
	f := newFixture(t, newLLSDv1("app", withUserConfigMap("cfg", "other")), src)
	f.converge("app")
	name := userConfigCopyName(f.llsd("app"), userConfigNamed("x: 1"))
	cp, err := f.kubeclient.CoreV1().ConfigMaps(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	cp.Data["config.yaml"] = "tampered: true"
	_, err = f.kubeclient.CoreV1().ConfigMaps(testNamespace).Update(f.ctx, cp, metav1.UpdateOptions{FieldManager: "kubectl"})
	require.NoError(t, err)
	f.refreshCaches()

	f.converge("app")
	cp, err = f.kubeclient.CoreV1().ConfigMaps(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, userConfigNamed("x: 1"), cp.Data["config.yaml"])
}

// An API error that is not the user's is retried; once it has persisted for 30 s the CR
// says what is wrong, and a success clears it.
func TestAPIErrorIsReportedAndRetried(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	require.Equal(t, v1alpha2.PhaseReady, f.llsd("app").Status.Phase)
	clk := testingclock.NewFakePassiveClock(time.Now())
	f.c.clock = clk
	failing := true
	f.kubeclient.PrependReactor("patch", "services", func(core.Action) (bool, runtime.Object, error) {
		if failing {
			return true, nil, errors.New("admission webhook denied the request")
		}
		return false, nil, nil
	})
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Port = 8080 })
	start := clk.Now()
	for _, after := range []time.Duration{0, 10 * time.Second, 29 * time.Second} {
		clk.SetTime(start.Add(after))
		err := f.c.syncHandler(f.ctx, key("app"))
		require.ErrorContains(t, err, "admission webhook denied the request")
		f.refreshCaches()
		assert.Equal(t, v1alpha2.PhaseReady, f.llsd("app").Status.Phase, "a failure of %s is retried quietly", after)
	}
	clk.SetTime(start.Add(31 * time.Second))
	err := f.c.syncHandler(f.ctx, key("app"))
	require.ErrorContains(t, err, "admission webhook denied the request")
	f.refreshCaches()
	l := f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseFailed, l.Status.Phase)
	c := cond(t, l, v1alpha2.ConditionDeploymentReady)
	assert.Equal(t, v1alpha2.ReasonDeploymentFailed, c.Reason)
	assert.Contains(t, c.Message, "Resource reconciliation failed:")
	assert.Contains(t, c.Message, "admission webhook denied the request")

	// Recovered: Ready again, and the clock starts afresh for the next failure.
	failing = false
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	assert.Equal(t, v1alpha2.PhaseReady, f.llsd("app").Status.Phase)
	failing = true
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Port = 8081 })
	clk.SetTime(clk.Now().Add(time.Hour))
	require.Error(t, f.c.syncHandler(f.ctx, key("app")))
	f.refreshCaches()
	assert.Equal(t, v1alpha2.PhaseReady, f.llsd("app").Status.Phase)
}

// Conflicts never become a DeploymentFailed, and a real error joined with a conflict
// is what gets logged.
func TestWithoutConflicts(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "x", errors.New("changed"))
	real := errors.New("etcdserver: request timed out")
	assert.Nil(t, fault.WithoutConflicts(conflict))
	assert.Nil(t, fault.WithoutConflicts(errors.Join(conflict, fmt.Errorf("applying: %w", conflict))))
	got := fault.WithoutConflicts(errors.Join(conflict, real))
	require.Error(t, got)
	assert.Equal(t, real.Error(), got.Error())
	assert.Equal(t, real, fault.WithoutConflicts(real))
	assert.Nil(t, fault.WithoutConflicts(nil))
}

func TestNamespaceTerminating(t *testing.T) {
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}},
	}}
	assert.True(t, fault.NamespaceTerminating(terminating))
	assert.True(t, fault.NamespaceTerminating(fmt.Errorf("applying Service: %w", terminating)))
	assert.True(t, fault.NamespaceTerminating(errors.Join(errors.New("other"), fmt.Errorf("applying: %w", terminating))))
	assert.False(t, fault.NamespaceTerminating(apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "x", errors.New("rbac"))))
	assert.False(t, fault.NamespaceTerminating(errors.New("plain")))
}

// Syncs for other reasons while a recheck is pending do not grow its backoff, and a
// rate-limited retry that consumes the pending entry does not lose the recheck.
func TestRecheckBackoffGrowsOnlyPerRecheck(t *testing.T) {
	f := newFixture(t)
	key := cache.ObjectName{Namespace: testNamespace, Name: "app"}
	f.c.recheck = workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](200*time.Millisecond, time.Second)
	f.c.scheduleRecheck(key)
	f.c.scheduleRecheck(key)
	assert.Equal(t, 1, f.c.recheck.NumRequeues(key))

	// A conflict retry moves the queue's single entry for the key to now...
	f.c.queue.AddAfter(key, time.Millisecond)
	got, _ := f.c.queue.Get()
	f.c.queue.Done(got)
	// ...and the sync it causes re-arms the recheck, which then still comes.
	f.c.scheduleRecheck(key)
	assert.Equal(t, 1, f.c.recheck.NumRequeues(key))
	start := time.Now()
	next := make(chan cache.ObjectName, 1)
	go func() {
		k, _ := f.c.queue.Get()
		f.c.queue.Done(k)
		next <- k
	}()
	select {
	case got = <-next:
	case <-time.After(3 * time.Second):
		t.Fatal("the recheck was lost")
	}
	assert.Equal(t, key, got)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "the recheck came at its time")

	f.c.forgetRecheck(key)
	assert.Equal(t, 0, f.c.recheck.NumRequeues(key))
}

// With --namespace, a ConfigMap in another namespace is reported as unsupported, for
// user config and CA bundles alike, even when it exists and opts in.
func TestReferenceOutsideTheWatchedNamespace(t *testing.T) {
	open := map[string]string{AllowedNamespacesAnnotation: "*"}
	for name, mod := range map[string]func(*v1alpha1.LlamaStackDistribution){
		"user config": withUserConfigMap("cfg", "other"),
		"CA bundle":   withCABundle("cfg", "other"),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, newLLSDv1("app", mod),
				configMap("other", "cfg", map[string]string{"config.yaml": userConfigNamed("x"), revision.CABundleKey: testcert.CertPEMs(t, 1)[0]}, open))
			f.c.watchNamespace = testNamespace
			f.c.resolver.WatchNamespace = testNamespace
			f.sync("app")
			requireUserError(t, f.llsd("app"), v1alpha2.ReasonConfigMapNotAllowed, "other/cfg", "--namespace="+testNamespace)
		})
	}
}
