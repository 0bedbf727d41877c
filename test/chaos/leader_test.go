//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// Two replicas with leader election, as artifacts/ runs them. The leader is killed
// (SIGKILL) in the middle of a rollout of 20 CRs: the standby takes over within 20 s
// (the 15 s lease), the rollout completes with the usual end checks, and at no time
// did two replicas write (told apart in the API server's audit log). Then the new
// leader is stopped gracefully (SIGTERM): it releases the Lease after its workers
// stop, and a third replica takes over within seconds.
func TestLeaderKilledMidRollout(t *testing.T) {
	s := newScenario(t, 2)
	nsOf := func(i int) string { return s.namespaces[i%len(s.namespaces)] }
	from := time.Now()
	replicas := map[string]*controllerProcess{
		"red":  startController(t, "red", "--leader-elect=true"),
		"blue": startController(t, "blue", "--leader-elect=true"),
	}
	for _, p := range replicas {
		waitHTTP(t, "http://"+p.health+"/readyz")
	}
	for i := range 20 {
		createCR(t, mixed(nsOf(i), i))
	}
	s.waitConverged(2 * time.Minute)
	leader := leaseWriter(t, from)
	require.NotEmpty(t, leader, "a replica renews the Lease")
	standby := map[string]string{"red": "blue", "blue": "red"}[leader]
	t.Logf("leader %s, standby %s", leader, standby)

	// A rollout of every CR, and the leader dies in the middle of it.
	var killed time.Time
	for i := range 20 {
		name := fmt.Sprintf("llsd-%d", i)
		editCR(t, nsOf(i), name, func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.ContainerSpec.Env = append(l.Spec.Server.ContainerSpec.Env, corev1.EnvVar{Name: "ROLLOUT", Value: "2"})
		})
		s.edits[nsOf(i)+"/"+name]++
		if i == 9 {
			replicas[leader].kill()
			killed = time.Now()
		}
	}
	var takeover time.Time
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 40*time.Second, true, func(ctx context.Context) (bool, error) {
		takeover = firstLeaseWrite(t, standby, killed)
		return !takeover.IsZero(), nil
	})
	require.NoError(t, err, "the standby never took the Lease")
	t.Logf("the standby took over %s after the leader was killed", takeover.Sub(killed).Round(100*time.Millisecond))
	// client-go's elector takes an expired Lease once it has seen no renewal for the
	// lease duration (15 s), timed from when it observed the last one; it looks every
	// retry period (2 s, jittered up to 2.4 s). So the worst case after the kill is about
	// 2.4 s (seeing the last renewal late) + 15 s + 2.4 s (the next look) = 19.8 s, plus
	// the API server's latency: 20 s was measured at 20.3 s once.
	assert.Less(t, takeover.Sub(killed), 23*time.Second, "takeover within the lease duration and two retry periods")
	s.waitConverged(2 * time.Minute)
	s.check(from)

	// Never two writers: every write other than to the Lease comes from the replica
	// holding it at the time, by the time the API server received it: the old leader's
	// (some sent just before it died reach the API server a moment later) before the
	// standby took the Lease, the standby's after.
	for _, e := range controllerRequests(t, from) {
		if !e.mutating() || e.resource() == "leases" || webhookCertificates(e) {
			continue
		}
		at := e.RequestReceivedTimestamp
		switch e.replica() {
		case leader:
			assert.True(t, at.Before(takeover), "the old leader wrote %s at %s, after the standby took over (%s)", e.resource(), at, takeover)
			assert.Less(t, at.Sub(killed), 2*time.Second, "the old leader wrote %s at %s, long after it was killed", e.resource(), at)
		case standby:
			assert.False(t, at.Before(takeover), "the standby wrote %s %s/%s at %s, before it held the Lease (%s)",
				e.Verb, e.resource(), e.ObjectRef.Name, at.Format(time.RFC3339Nano), takeover.Format(time.RFC3339Nano))
		}
	}

	// A graceful stop hands over at once: the Lease is released after the workers stop.
	replicas["green"] = startController(t, "green", "--leader-elect=true")
	waitHTTP(t, "http://"+replicas["green"].health+"/readyz")
	stopped := time.Now()
	require.NoError(t, replicas[standby].terminate(30*time.Second), "a graceful stop exits 0")
	var green time.Time
	err = wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		green = firstLeaseWrite(t, "green", stopped)
		return !green.IsZero(), nil
	})
	require.NoError(t, err, "the third replica never took the Lease")
	t.Logf("after SIGTERM the next replica took over in %s", green.Sub(stopped).Round(100*time.Millisecond))
	assert.Less(t, green.Sub(stopped), 10*time.Second, "a released Lease is taken at the next retry, not after the lease duration")
	for _, e := range controllerRequests(t, stopped) {
		if e.replica() == standby && e.mutating() && e.resource() != "leases" && !webhookCertificates(e) {
			assert.False(t, e.RequestReceivedTimestamp.After(green), "the stopped leader wrote after the next one took over")
		}
	}
}

// leaseWriter returns the replica that last wrote the Lease after from.
func leaseWriter(t *testing.T, from time.Time) string {
	t.Helper()
	var who string
	for _, e := range controllerRequests(t, from) {
		if e.resource() == "leases" && e.mutating() {
			who = e.replica()
		}
	}
	return who
}

// firstLeaseWrite is when the API server received replica's first successful write of
// the Lease after from (zero if none yet).
func firstLeaseWrite(t *testing.T, replica string, from time.Time) time.Time {
	t.Helper()
	for _, e := range controllerRequests(t, from) {
		if e.replica() == replica && e.resource() == "leases" && e.mutating() && e.ResponseStatus != nil && e.ResponseStatus.Code < 300 {
			return e.RequestReceivedTimestamp
		}
	}
	return time.Time{}
}

// waitHTTP waits until url answers 200.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	require.NoError(t, err, "waiting for %s", url)
}

// webhookCertificates tells whether a request keeps the conversion webhook's
// certificates (its Secret, the CRD's caBundle): every replica does that, leader or
// not, as every replica serves the webhook.
func webhookCertificates(e auditEvent) bool {
	return e.resource() == "secrets" || e.resource() == "customresourcedefinitions"
}
