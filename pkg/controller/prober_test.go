package controller

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/probe"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// fakeLlamaStack is a llama-stack server the test controls.
type fakeLlamaStack struct {
	*httptest.Server
	healthy atomic.Bool
	delay   atomic.Int64 // nanoseconds before answering /v1/health
	// hold, when set, keeps /v1/health from answering until it is closed or the
	// client gives up.
	hold     atomic.Pointer[chan struct{}]
	requests atomic.Int64
}

func newFakeLlamaStack(t *testing.T) *fakeLlamaStack {
	s := &fakeLlamaStack{}
	s.healthy.Store(true)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/health":
			s.requests.Add(1)
			time.Sleep(time.Duration(s.delay.Load()))
			if hold := s.hold.Load(); hold != nil {
				select {
				case <-*hold:
				case <-r.Context().Done():
					return
				}
			}
			if !s.healthy.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"status":"Error"}`)
				return
			}
			fmt.Fprint(w, `{"status":"OK"}`)
		case "/v1/version":
			fmt.Fprint(w, `{"version":"0.2.23"}`)
		case "/v1/providers":
			fmt.Fprint(w, `{"data":[{"api":"inference","provider_id":"ollama","provider_type":"remote::ollama","config":{"api_key":"secret"},"health":{"status":"OK"}}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// withProber gives the fixture's controller a prober aimed at srv; probed receives the
// CRs whose probe finished (instead of the queue).
func (f *fixture) withProber(srv *fakeLlamaStack, timeout time.Duration) chan cache.ObjectName {
	probed, _ := f.withProberClock(srv, timeout)
	return probed
}

// withProberClock is withProber, and the fake clock of the prober's timers.
func (f *fixture) withProberClock(srv *fakeLlamaStack, timeout time.Duration) (chan cache.ObjectName, *testingclock.FakeClock) {
	probed := make(chan cache.ObjectName, 10)
	clk := testingclock.NewFakeClock(time.Now())
	f.c.prober = probe.New(probe.Config{
		Endpoint: func(probe.Service, *probe.TLS) probe.Endpoint {
			return probe.NewHTTPEndpoint(srv.Client(), srv.URL)
		},
		Interval: time.Hour,
		Timeout:  timeout,
		// Timers of a fake clock: no probe starts unless a sync asks or the test steps it.
		Clock: clk,
	}, func(key cache.ObjectName) { probed <- key })
	t := f.t
	t.Cleanup(f.c.prober.Wait)
	return probed, clk
}

func waitProbed(t *testing.T, probed chan cache.ObjectName) {
	t.Helper()
	select {
	case <-probed:
	case <-time.After(5 * time.Second):
		t.Fatal("the probe never reported back")
	}
}

func TestHealthCheckFromTheServer(t *testing.T) {
	srv := newFakeLlamaStack(t)
	f := newFixture(t, newLLSD("app"))
	probed := f.withProber(srv, time.Second)
	f.converge("app")

	// Not ready: no probe, HealthCheck False as upstream.
	c := cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha2.ReasonServerNotAvailable, c.Reason)
	assert.Zero(t, srv.requests.Load())

	// Ready: the first sync starts a probe without waiting for it, and leaves the
	// status as it is: the answer brings the CR back, and Ready is written with it.
	f.setDeploymentStatus("app", rolledOut)
	assert.Empty(t, f.sync("app"), "Ready was written without the server's answer")
	assert.NotEqual(t, v1alpha2.PhaseReady, f.llsd("app").Status.Phase)
	waitProbed(t, probed)

	f.sync("app")
	l := f.llsd("app")
	c = cond(t, l, v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, v1alpha2.ReasonHealthCheckPassed, c.Reason)
	assert.Equal(t, "0.2.23", l.Status.Version.LlamaStackServerVersion)
	require.Len(t, l.Status.DistributionConfig.Providers, 1)
	p := l.Status.DistributionConfig.Providers[0]
	assert.Equal(t, "ollama", p.ProviderID)
	assert.Equal(t, "OK", p.Health.Status)
	assert.Empty(t, p.Config.Raw, "provider config may hold secrets and is not copied")
	assert.Equal(t, v1alpha2.PhaseReady, l.Status.Phase)

	// Nothing changed: the result is reused, no request, no write.
	before := srv.requests.Load()
	assert.Empty(t, f.sync("app"))
	assert.Equal(t, before, srv.requests.Load())
}

func TestHealthCheckUnhealthyServer(t *testing.T) {
	srv := newFakeLlamaStack(t)
	srv.healthy.Store(false)
	f := newFixture(t, newLLSD("app"))
	probed := f.withProber(srv, time.Second)
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.sync("app")
	waitProbed(t, probed)
	f.sync("app")
	l := f.llsd("app")
	c := cond(t, l, v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha2.ReasonHealthCheckFailed, c.Reason)
	assert.Contains(t, c.Message, "503")
	assert.Nil(t, l.Status.DistributionConfig.Providers)
}

// A slow server never blocks a worker, and one probe at a time runs per CR.
func TestHealthCheckSlowServerDoesNotBlock(t *testing.T) {
	srv := newFakeLlamaStack(t)
	release := make(chan struct{})
	srv.hold.Store(&release)
	f := newFixture(t, newLLSD("app"))
	// A timeout far longer than the test: the probe ends only when the server is
	// released, so syncs that return before that did not wait for it.
	probed := f.withProber(srv, time.Minute)
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sync("app")
		f.sync("app")
		f.sync("app")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("a sync waited for the server")
	}
	select {
	case <-probed:
		t.Fatal("the probe ended before the server answered")
	default:
	}
	require.Eventually(t, func() bool { return srv.requests.Load() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the probe reached the server")
	close(release)
	waitProbed(t, probed)
	assert.Equal(t, int64(1), srv.requests.Load(), "one probe in flight per CR")
	f.sync("app")
	c := cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionTrue, c.Status, "the held answer is reported once it comes")
}

// healthyAndProbed is a fixture whose CR "app" runs a server srv answered healthy, as
// its status reports; probed receives the CRs whose probe finished.
func healthyAndProbed(t *testing.T, srv *fakeLlamaStack) (*fixture, chan cache.ObjectName) {
	t.Helper()
	f := newFixture(t, newLLSD("app"))
	probed := f.withProber(srv, time.Second)
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.sync("app")
	waitProbed(t, probed)
	f.converge("app")
	require.Equal(t, metav1.ConditionTrue, cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck).Status)
	return f, probed
}

// After a restart (an empty prober) the last reported HealthCheck is kept until the new
// answer comes: no status write when nothing changed.
func TestHealthCheckSurvivesARestart(t *testing.T) {
	srv := newFakeLlamaStack(t)
	f, probed := healthyAndProbed(t, srv)

	f.restartController()
	probed = f.withProber(srv, time.Second)
	assert.Empty(t, mutating(f.sync("app")), "the restart rewrote the status")
	waitProbed(t, probed)
	assert.Empty(t, mutating(f.sync("app")), "the same answer rewrote the status")
	assert.Equal(t, metav1.ConditionTrue, cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck).Status)
}

// A healthy server whose /v1/providers does not answer keeps the providers last reported.
func TestProvidersKeptWhenTheirEndpointFails(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.withProber(newFakeLlamaStack(t), time.Second)
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	l := f.llsd("app")
	l.Status.DistributionConfig.Providers = []v1alpha2.ProviderInfo{{API: "inference", ProviderID: "ollama"}}
	d := f.deployment("app")
	svc := f.stored(kindService, "app-service").(*corev1.Service)
	st := f.c.calculateStatus(l, status.Observed{Deployment: d, Service: svc, Probe: &probe.Result{Info: probe.Info{Healthy: true}}}, metav1.Now())
	assert.Equal(t, l.Status.DistributionConfig.Providers, st.DistributionConfig.Providers)
	st = f.c.calculateStatus(l, status.Observed{Deployment: d, Service: svc, Probe: &probe.Result{Info: probe.Info{Healthy: true, ProvidersKnown: true}}}, metav1.Now())
	assert.Empty(t, st.DistributionConfig.Providers, "an answer with no providers clears them")
}

// A server that stops serving is probed afresh when it comes back: no HealthCheck=True
// from before the outage.
func TestHealthCheckAfterAnOutageIsFresh(t *testing.T) {
	srv := newFakeLlamaStack(t)
	f, probed := healthyAndProbed(t, srv)

	// Outage: no replica available; the server comes back unhealthy.
	f.setDeploymentStatus("app", func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 0 })
	f.converge("app")
	assert.Equal(t, v1alpha2.ReasonServerNotAvailable, cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck).Reason)
	srv.healthy.Store(false)
	f.setDeploymentStatus("app", rolledOut)
	f.sync("app")
	c := cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck)
	assert.NotEqual(t, metav1.ConditionTrue, c.Status, "the answer from before the outage was reused")
	waitProbed(t, probed)
	f.sync("app")
	c = cond(t, f.llsd("app"), v1alpha2.ConditionHealthCheck)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha2.ReasonHealthCheckFailed, c.Reason)
}

// A CR's delete clears everything kept for it: the prober's answers (also one still in
// flight), the CA bundle failure memory, the recheck backoff, the failure clock and the
// ready gauge series.
func TestDeletedCRLeavesNoState(t *testing.T) {
	RegisterMetrics()
	for _, probing := range []bool{true, false} {
		t.Run(fmt.Sprintf("probing=%t", probing), func(t *testing.T) {
			srv := newFakeLlamaStack(t)
			f := newFixture(t, newLLSD("app"))
			var probed chan cache.ObjectName
			var clk *testingclock.FakeClock
			if probing {
				probed, clk = f.withProberClock(srv, time.Second)
			}
			f.converge("app")
			f.setDeploymentStatus("app", rolledOut)
			f.converge("app")
			if probing {
				waitProbed(t, probed) // Ready comes with the server's first answer
				f.converge("app")
			}
			k := key("app")
			labels := map[string]string{"namespace": testNamespace, "name": "app"}
			require.Equal(t, 1.0, gauge(t, "llama_stack_controller_llamastackdistribution_ready", labels))
			f.c.caFailures.Store(k, caFailure{})
			f.c.failing.Store(k, failure{})
			f.c.scheduleRecheck(k)
			if probing {
				srv.delay.Store(int64(300 * time.Millisecond))
				// The next probe is due: it answers after the delete.
				before := srv.requests.Load()
				clk.Step(2 * time.Hour)
				require.Eventually(t, func() bool { return srv.requests.Load() > before }, 5*time.Second, time.Millisecond)
			}

			require.NoError(t, f.client.LlamastackV1alpha2().LlamaStackDistributions(testNamespace).Delete(f.ctx, "app", metav1.DeleteOptions{}))
			gone := f.c.llsdLister.LlamaStackDistributions(testNamespace)
			l, err := gone.Get("app")
			require.NoError(t, err)
			f.refreshCaches()
			f.queued()
			f.c.enqueueDeleted(cache.DeletedFinalStateUnknown{Key: "demo/app", Obj: l})
			require.Equal(t, []cache.ObjectName{k}, f.queued(), "the delete is synced")
			f.sync("app")
			if probing {
				f.c.prober.Wait()
				assert.Empty(t, probed, "the answer of a deleted CR's server enqueued it")
				assert.Zero(t, f.c.prober.Kept(), "prober results kept")
				assert.Zero(t, clk.Waiters(), "a probe timer left")
			}
			_, ok := f.c.caFailures.Load(k)
			assert.False(t, ok, "CA failure memory kept")
			_, ok = f.c.failing.Load(k)
			assert.False(t, ok, "failure clock kept")
			f.c.recheckMu.Lock()
			assert.Empty(t, f.c.recheckAt, "recheck kept")
			f.c.recheckMu.Unlock()
			assert.Equal(t, -1.0, gauge(t, "llama_stack_controller_llamastackdistribution_ready", labels), "ready gauge series kept")
		})
	}
}

// statusWrites counts the CR status writes among actions.
func statusWrites(actions []core.Action) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" && a.GetResource().Resource == "llamastackdistributions" {
			n++
		}
	}
	return n
}

// With probes on, a CR goes from created to Ready in two status writes, as without
// them: the first (Initializing), and the one that makes it Ready, which carries the
// server's first answer (not one more for the answer).
func TestReadyWithTheFirstAnswerInTwoStatusWrites(t *testing.T) {
	for name, tc := range map[string]struct{ slow, storage, replicaSet bool }{
		"answered": {}, "timed out": {slow: true},
		// The claim is bound and the Deployment available by the next sync: StorageReady
		// turns with Ready, in the same write.
		"with storage": {storage: true},
		// As on a cluster, the Deployment's ReplicaSet exists: the rollout complete, it is
		// the one that served (status.rollback), recorded in the same write.
		"with its ReplicaSet": {replicaSet: true},
	} {
		slow := tc.slow
		t.Run(name, func(t *testing.T) {
			srv := newFakeLlamaStack(t)
			f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
				if tc.storage {
					l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
				}
			}))
			timeout := time.Second
			if slow {
				srv.delay.Store(int64(time.Second))
				timeout = 100 * time.Millisecond
			}
			probed := f.withProber(srv, timeout)
			writes := 0
			syncUntilIdle := func() {
				for range 5 {
					actions := f.sync("app")
					writes += statusWrites(actions)
					if len(actions) == 0 {
						return
					}
				}
				t.Fatal("no steady state after five syncs")
			}
			syncUntilIdle()
			require.Equal(t, 1, writes, "creation")
			if tc.storage {
				require.Equal(t, metav1.ConditionFalse, cond(t, f.llsd("app"), v1alpha2.ConditionStorageReady).Status)
				f.setPVCPhase("app-pvc", corev1.ClaimBound)
			}
			var served string
			if tc.replicaSet {
				f.updateDeployment("app", "kube-controller-manager", func(d *appsv1.Deployment) { d.UID = "dep-uid" })
				served = (&rollbackFixture{fixture: f}).rollOut()
			}
			f.setDeploymentStatus("app", rolledOut)
			syncUntilIdle()
			assert.Equal(t, 1, writes, "Ready written before the server's first answer")
			waitProbed(t, probed)
			syncUntilIdle()
			l := f.llsd("app")
			assert.Equal(t, v1alpha2.PhaseReady, l.Status.Phase)
			hc := cond(t, l, v1alpha2.ConditionHealthCheck)
			if slow {
				// A server that does not answer in time does not hold Ready back longer.
				assert.Equal(t, metav1.ConditionFalse, hc.Status)
				assert.Contains(t, hc.Message, "timed out")
			} else {
				assert.Equal(t, metav1.ConditionTrue, hc.Status)
				assert.Equal(t, "0.2.23", l.Status.Version.LlamaStackServerVersion)
			}
			if tc.storage {
				assert.Equal(t, metav1.ConditionTrue, cond(t, l, v1alpha2.ConditionStorageReady).Status)
			}
			if tc.replicaSet {
				require.NotNil(t, l.Status.Rollback)
				assert.Equal(t, served, l.Status.Rollback.ServedReplicaSet)
			}
			assert.Equal(t, 2, writes, "status writes from creation to Ready with the first answer")
		})
	}
}

// Only a write that does nothing but make the CR Ready waits for the first answer.
func TestOnlyTurnsReady(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	later := metav1.NewTime(at.Add(time.Minute))
	c := func(typ string, status metav1.ConditionStatus, reason string, when metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason, ObservedGeneration: 1, LastTransitionTime: when}
	}
	initializing := v1alpha2.LlamaStackDistributionStatus{
		Phase: v1alpha2.PhaseInitializing, ObservedGeneration: 1, ServiceURL: "http://app-service.demo.svc.cluster.local:8321",
		Conditions: []metav1.Condition{
			c(v1alpha2.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha2.ReasonDeploymentScaling, at),
			c(v1alpha2.ConditionProgressing, metav1.ConditionTrue, v1alpha2.ReasonRollingOut, at),
			c(v1alpha2.ConditionHealthCheck, metav1.ConditionFalse, v1alpha2.ReasonServerNotAvailable, at),
			c(v1alpha2.ConditionServiceReady, metav1.ConditionTrue, v1alpha2.ReasonServiceReady, at),
			c(v1alpha2.ConditionReady, metav1.ConditionFalse, v1alpha2.ReasonNotReady, at),
		},
	}
	ready := *initializing.DeepCopy()
	ready.Phase, ready.Replicas, ready.AvailableReplicas = v1alpha2.PhaseReady, 1, 1
	ready.Conditions = []metav1.Condition{
		c(v1alpha2.ConditionDeploymentReady, metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady, later),
		c(v1alpha2.ConditionProgressing, metav1.ConditionTrue, v1alpha2.ReasonRolloutComplete, at),
		c(v1alpha2.ConditionHealthCheck, metav1.ConditionUnknown, v1alpha2.ReasonHealthCheckPending, later),
		c(v1alpha2.ConditionServiceReady, metav1.ConditionTrue, v1alpha2.ReasonServiceReady, at),
		c(v1alpha2.ConditionReady, metav1.ConditionTrue, v1alpha2.ReasonReady, later),
	}
	for name, tc := range map[string]struct {
		old  v1alpha2.LlamaStackDistributionStatus
		edit func(*v1alpha2.LlamaStackDistributionStatus)
		want bool
	}{
		"turns Ready":          {old: initializing, want: true},
		"already Ready":        {old: ready, want: false},
		"not Ready":            {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) { *st = *initializing.DeepCopy() }, want: false},
		"and a new generation": {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) { st.ObservedGeneration = 2 }, want: false},
		"and a warning": {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) {
			st.Conditions = append(st.Conditions, c(v1alpha2.ConditionVolumeMountWarning, metav1.ConditionTrue, v1alpha2.ReasonNestedMountPaths, later))
		}, want: false},
		"and a Service condition": {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) { st.Conditions[3].Message = "changed" }, want: false},
		"and a route":             {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) { st.RouteURL = ptr.To("http://x") }, want: false},
		"first status":            {old: v1alpha2.LlamaStackDistributionStatus{}, want: false},
		"and a problem": {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) {
			st.Conditions[1] = c(v1alpha2.ConditionProgressing, metav1.ConditionFalse, v1alpha2.ReasonTLSSecretNotFound, later)
		}, want: false},
		"with the problem it reported": {old: problem(initializing, v1alpha2.ReasonTLSSecretNotFound), edit: func(st *v1alpha2.LlamaStackDistributionStatus) {
			st.Conditions[1] = c(v1alpha2.ConditionProgressing, metav1.ConditionFalse, v1alpha2.ReasonTLSSecretNotFound, later)
		}, want: true},
		// The rollout complete, the ReplicaSet that served is recorded with Ready.
		"and the ReplicaSet that served": {old: initializing, edit: func(st *v1alpha2.LlamaStackDistributionStatus) {
			st.Rollback = &v1alpha2.RollbackStatus{ServedReplicaSet: "app-7d9f"}
		}, want: true},
		"and a new ReplicaSet that served": {old: servedBy(initializing, "app-5c4b"), edit: func(st *v1alpha2.LlamaStackDistributionStatus) {
			st.Rollback = &v1alpha2.RollbackStatus{ServedReplicaSet: "app-7d9f"}
		}, want: true},
		"and a rollback": {old: servedBy(initializing, "app-5c4b"), edit: func(st *v1alpha2.LlamaStackDistributionStatus) {
			st.Rollback = &v1alpha2.RollbackStatus{ServedReplicaSet: "app-5c4b", FailedInputs: "3f2a", Reason: "CrashLoopBackOff"}
		}, want: false},
		"and its storage bound": {old: storageCondition(initializing, metav1.ConditionFalse, v1alpha2.ReasonStorageFailed, at), edit: func(st *v1alpha2.LlamaStackDistributionStatus) {
			*st = storageCondition(*st, metav1.ConditionTrue, v1alpha2.ReasonStorageReady, later)
		}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			st := *ready.DeepCopy()
			if tc.edit != nil {
				tc.edit(&st)
			}
			old := *tc.old.DeepCopy()
			assert.Equal(t, tc.want, onlyTurnsReady(old, st))
			assert.Equal(t, tc.old, old, "onlyTurnsReady changed its argument")
		})
	}
}

// servedBy is st recording rs as the ReplicaSet that served.
func servedBy(st v1alpha2.LlamaStackDistributionStatus, rs string) v1alpha2.LlamaStackDistributionStatus {
	st = *st.DeepCopy()
	st.Rollback = &v1alpha2.RollbackStatus{ServedReplicaSet: rs}
	return st
}

// storageCondition is st with a StorageReady condition of that status.
func storageCondition(st v1alpha2.LlamaStackDistributionStatus, status metav1.ConditionStatus, reason string, at metav1.Time) v1alpha2.LlamaStackDistributionStatus {
	out := *st.DeepCopy()
	out.Conditions = append(slices.DeleteFunc(out.Conditions, func(c metav1.Condition) bool { return c.Type == v1alpha2.ConditionStorageReady }),
		metav1.Condition{Type: v1alpha2.ConditionStorageReady, Status: status, Reason: reason, Message: reason, ObservedGeneration: 1, LastTransitionTime: at})
	return out
}

// problem is st with a user error of that reason reported as nothing serves: the CR
// Failed, DeploymentReady and Ready False with the reason (as their message).
func problem(st v1alpha2.LlamaStackDistributionStatus, reason string) v1alpha2.LlamaStackDistributionStatus {
	out := *st.DeepCopy()
	out.Phase = v1alpha2.PhaseFailed
	for i, c := range out.Conditions {
		if c.Type == v1alpha2.ConditionDeploymentReady || c.Type == v1alpha2.ConditionReady {
			out.Conditions[i].Status, out.Conditions[i].Reason, out.Conditions[i].Message = metav1.ConditionFalse, reason, reason
		}
	}
	return out
}
