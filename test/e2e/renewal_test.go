//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/cmd/controller/app"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	"github.com/llamastack/llama-stack-controller/pkg/webhook"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// The renewal test's certificate timing, in seconds from the first CA: the serving
// certificate is renewed at 12.7 and then about every 12 (two thirds of its life,
// which starts 2 s early, less the fraction of a second X.509 drops): 24.7, 36.7, 48.7;
// the CA is replaced at 44.3 (two thirds of its life, which starts 7 s early), so the
// renewal due at 48.7 waits for the new CA to have been in the caBundle for the
// propagation delay, until 50.3; the first CA leaves the caBundle when it expires, at
// 70. (The requeue's latency can shift the serving renewals by a little.)
const (
	renewalCAValidity      = 70 * time.Second
	renewalServingValidity = 20 * time.Second
	renewalCAPropagation   = 6 * time.Second
)

// TestCertificateRenewalUnderLoad: the webhook's serving certificate is renewed and its
// CA rotated, on a real API server, while clients keep converting, and not one
// conversion fails.
//
// Two replicas of the controller, in-process, as the artifacts' ServiceAccount with the
// artifacts' RBAC, share the Secret and serve the webhook behind one loopback address
// (a TCP front, as the webhook Service is in a cluster), with certificates that live
// for seconds (--webhook-ca-validity=70s, --webhook-serving-validity=20s,
// --webhook-ca-propagation=6s). Storage is v1alpha2, so every v1alpha1 request goes
// through the webhook. Clients run back to back from the first CA's early life until
// the serving certificate has changed at least twice, the CA has been rotated, both
// replicas serve a certificate of the new CA, and the first CA has expired and left
// the caBundle: two read v1alpha1 (gets and lists), two write v1alpha1 (updates and
// patches), two write v1alpha2 (updates and patches, each followed by a v1alpha1 read
// of the value written); and once a second 40 v1alpha1 gets at once, more than the
// API server keeps connections to a webhook, so that it keeps opening new ones and
// shakes hands with each new certificate (it would otherwise reuse its connections
// until the caBundle changes).
//
// Asserted: every request answered 2xx (counted per operation and again on the wire,
// so that client-go's own retries hide nothing but 429s, which the API server answers
// while it rebuilds the CRD's storage after a caBundle change, counted apart), each write read back with its value;
// the API server's own count of failed conversion webhook calls did not move (it also
// counts the conversions its field manager makes for managedFields, whose failure no
// client sees), and its successful calls cover every v1alpha1 request; the API server
// connected to each replica while each serving certificate was current; every serving
// certificate the Secret held was signed by a CA the CRD's caBundle already held, and
// one of a new CA was made no sooner than the propagation delay after it; every
// certificate either replica served verified against the caBundle of that moment;
// the Secret's serving certificate changed at least twice and the CA at least once,
// the caBundle held both CAs and then the new one alone; and at the end both replicas
// serve the Secret's certificate.
//
// On a control plane of its own: the suite's cluster has the suite's controller, whose
// certificates are the defaults.
func TestCertificateRenewalUnderLoad(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	cluster, err := localcluster.Start(ctx, localcluster.Options{BinDir: env.binDir, StagesFile: env.stagesFile, Nodes: 1})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Errorf("stopping the renewal test's control plane: %v", err)
		}
	})
	admin := cluster.RESTConfig()
	admin.QPS, admin.Burst = 1000, 1000
	kube := kubernetes.NewForConfigOrDie(admin)
	crds := apiextensionsclient.NewForConfigOrDie(admin).ApiextensionsV1().CustomResourceDefinitions()

	front, err := startTCPFront()
	require.NoError(t, err)
	t.Cleanup(front.close)
	crd, err := localcluster.LoopbackCRD(env.root, front.port())
	require.NoError(t, err)
	_, err = dynamic.NewForConfigOrDie(admin).Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, localcluster.WaitCRDEstablished(ctx, admin, crd.GetName(), 60*time.Second))
	args := []string{"--kubeconfig", cluster.Kubeconfig(), "apply", "--server-side"}
	for _, f := range []string{"controller/namespace.yaml", "rbac/service_account.yaml", "rbac/cluster_role.yaml", "rbac/cluster_role_binding.yaml",
		"rbac/leader_election_role.yaml", "rbac/leader_election_role_binding.yaml", "rbac/webhook_role.yaml", "rbac/webhook_role_binding.yaml"} {
		args = append(args, "-f", filepath.Join(env.root, "artifacts", f))
	}
	out, err := exec.Command(filepath.Join(env.binDir, "kubectl"), args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// The controllers watch a namespace of their own: the load's objects are the
	// clients' alone, so that an update conflicts with nobody's status write.
	const idleNS, loadNS = "renewal-idle", "renewal-load"
	for _, ns := range []string{idleNS, loadNS} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// Two replicas, each serving the webhook on a port of its own behind the front.
	sa := rest.CopyConfig(admin)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + operatorNamespace + ":llama-stack-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"},
	}
	type replica struct {
		name, webhookAddr, healthAddr string
		// stopped is closed when app.Run has returned err.
		stopped chan struct{}
		err     error
	}
	var replicas []*replica
	for _, name := range []string{"renewal-a", "renewal-b"} {
		r := &replica{name: name, stopped: make(chan struct{})}
		r.webhookAddr, err = freeAddress()
		require.NoError(t, err)
		r.healthAddr, err = freeAddress()
		require.NoError(t, err)
		rctx, cancel := context.WithCancel(klog.NewContext(ctx, klog.LoggerWithName(klog.NewKlogr(), name)))
		go func() {
			defer close(r.stopped)
			r.err = app.Run(rctx, sa, app.Options{
				Workers: 1, QPS: 50, Burst: 100, Namespace: idleNS, OperatorNamespace: operatorNamespace, Version: "e2e",
				ServerProbe: "off", MetricsBindAddress: "0", HealthProbeBindAddress: r.healthAddr, LeaderElect: true,
				WebhookBindAddress: r.webhookAddr, WebhookCertMode: app.WebhookCertModeSelf, WebhookCertHosts: "localhost,127.0.0.1",
				WebhookCAValidity: renewalCAValidity, WebhookServingValidity: renewalServingValidity, WebhookCAPropagation: renewalCAPropagation,
			})
		}()
		t.Cleanup(func() {
			cancel()
			select {
			case <-r.stopped:
				assert.NoError(t, r.err, "replica %s", name)
			case <-time.After(30 * time.Second):
				t.Errorf("replica %s did not stop within 30s", name)
			}
		})
		front.add(r.webhookAddr)
		replicas = append(replicas, r)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the replicas' log, without each conversion and watch:\n%s", linesWith(env.controllerLog.String(), "renewal-", 300))
		}
	})

	// Both replicas ready (which needs a valid certificate), the CRD's caBundle set,
	// and the API server converting through the front.
	v1 := clientset.NewForConfigOrDie(admin)
	eventually(t, 60*time.Second, "both replicas are ready and a v1alpha1 object converts", func(ctx context.Context) (bool, error) {
		for _, r := range replicas {
			select {
			case <-r.stopped:
				return false, fmt.Errorf("replica %s stopped: %v", r.name, r.err)
			default:
			}
			resp, err := http.Get("http://" + r.healthAddr + "/readyz")
			if err != nil {
				return false, nil
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return false, nil
			}
		}
		_, err := v1.LlamastackV1alpha1().LlamaStackDistributions(loadNS).Create(ctx, llsd(loadNS, "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	})
	t.Logf("control plane and both replicas ready after %s", time.Since(start).Round(100*time.Millisecond))

	// The load's clients: admin, not rate limited, with every response counted on the
	// wire.
	wire := &wireCounter{codes: map[int]int{}}
	loadCfg := rest.CopyConfig(admin)
	loadCfg.Wrap(wire.wrap)
	load := clientset.NewForConfigOrDie(loadCfg)
	const perKind = 2
	const burstSize = 40
	for i := range perKind {
		_, err := load.LlamastackV1alpha1().LlamaStackDistributions(loadNS).Create(ctx, llsd(loadNS, fmt.Sprintf("v1-%d", i)), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = load.LlamastackV1alpha2().LlamaStackDistributions(loadNS).Create(ctx, hubOf(t, llsd(loadNS, fmt.Sprintf("v2-%d", i))), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	names := []string{"v1-0", "v1-1", "v2-0", "v2-1"}

	// The API server's conversion webhook calls counted from here. When the caBundle was
	// set, the API server made the CRD's storage anew; the storage of before, without a
	// caBundle, lives on a second or so until its requests drain, and its watch cache
	// fails to convert what is written meanwhile (the creates above). Those failures,
	// which no client sees, are left out: the count starts once it has been still for
	// three seconds.
	var before webhookCalls
	quiet := time.Now()
	eventually(t, 30*time.Second, "the API server's failed conversion webhook calls stop growing", func(ctx context.Context) (bool, error) {
		calls, err := conversionWebhookCalls(ctx, kube)
		if err != nil {
			return false, err
		}
		if calls.failure != before.failure {
			before, quiet = calls, time.Now()
		}
		return time.Since(quiet) >= 3*time.Second, nil
	})
	before, err = conversionWebhookCalls(ctx, kube)
	require.NoError(t, err)
	t.Logf("conversion webhook calls before the load: %d succeeded, %d failed (before the caBundle)", before.success, before.failure)
	wireBefore, throttledBefore := wire.total(), wire.snapshot()[http.StatusTooManyRequests]
	stats := &loadStats{sent: map[string]*atomic.Int64{}, ok: map[string]*atomic.Int64{}}
	for _, op := range []string{"v1alpha1 get", "v1alpha1 get in a burst", "v1alpha1 list", "v1alpha1 update", "v1alpha1 patch", "v1alpha2 get", "v1alpha2 update",
		"v1alpha2 patch", "v1alpha1 get after a v1alpha2 write"} {
		stats.sent[op], stats.ok[op] = &atomic.Int64{}, &atomic.Int64{}
	}
	stop := make(chan struct{})
	var clients sync.WaitGroup
	stopLoad := sync.OnceFunc(func() {
		close(stop)
		clients.Wait()
	})
	t.Cleanup(stopLoad)
	loop := func(body func(n int)) {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				body(n)
			}
		}()
	}
	v1Client := load.LlamastackV1alpha1().LlamaStackDistributions(loadNS)
	v2Client := load.LlamastackV1alpha2().LlamaStackDistributions(loadNS)
	for i := range perKind {
		// Readers, in v1alpha1.
		loop(func(n int) {
			name := names[(n+i)%len(names)]
			stats.do("v1alpha1 get", func(ctx context.Context) error {
				l, err := v1Client.Get(ctx, name, metav1.GetOptions{})
				if err == nil && l.Name != name {
					err = fmt.Errorf("asked for %s, got %s", name, l.Name)
				}
				return err
			})
			stats.do("v1alpha1 list", func(ctx context.Context) error {
				l, err := v1Client.List(ctx, metav1.ListOptions{})
				if err == nil && len(l.Items) != len(names) {
					err = fmt.Errorf("listed %d objects, not %d", len(l.Items), len(names))
				}
				return err
			})
		})
		// A v1alpha1 writer of its own object: read-edit-write, then a merge patch, each
		// answered with the value written.
		name := fmt.Sprintf("v1-%d", i)
		loop(func(n int) {
			want := int32(n%5 + 1)
			var l *v1alpha1.LlamaStackDistribution
			if !stats.do("v1alpha1 get", func(ctx context.Context) (err error) {
				l, err = v1Client.Get(ctx, name, metav1.GetOptions{})
				return err
			}) {
				return
			}
			l.Spec.Replicas = want
			stats.do("v1alpha1 update", func(ctx context.Context) error {
				return replicasAre(v1Client.Update(ctx, l, metav1.UpdateOptions{}))(want)
			})
			want = want%5 + 1
			stats.do("v1alpha1 patch", func(ctx context.Context) error {
				patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, want)
				return replicasAre(v1Client.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}))(want)
			})
		})
		// A v1alpha2 writer of its own object, each write read back in v1alpha1.
		hubName := fmt.Sprintf("v2-%d", i)
		loop(func(n int) {
			want := int32(n%5 + 1)
			readBack := func(want int32) {
				stats.do("v1alpha1 get after a v1alpha2 write", func(ctx context.Context) error {
					return replicasAre(v1Client.Get(ctx, hubName, metav1.GetOptions{}))(want)
				})
			}
			var l *v1alpha2.LlamaStackDistribution
			if !stats.do("v1alpha2 get", func(ctx context.Context) (err error) {
				l, err = v2Client.Get(ctx, hubName, metav1.GetOptions{})
				return err
			}) {
				return
			}
			l.Spec.Workload.Replicas = ptr.To(want)
			if stats.do("v1alpha2 update", func(ctx context.Context) error {
				_, err := v2Client.Update(ctx, l, metav1.UpdateOptions{})
				return err
			}) {
				readBack(want)
			}
			want = want%5 + 1
			if stats.do("v1alpha2 patch", func(ctx context.Context) error {
				patch := fmt.Sprintf(`{"spec":{"workload":{"replicas":%d}}}`, want)
				_, err := v2Client.Patch(ctx, hubName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				return err
			}) {
				readBack(want)
			}
		})
	}
	// Bursts of gets, more at once than the API server keeps connections to a webhook
	// (client-go's transport keeps 25 idle per host): each burst makes it open new
	// connections, and so shake hands with the certificate served at that moment.
	// Without them it would reuse its connections, and meet a renewed certificate only
	// when the caBundle changes (a new client).
	loop(func(n int) {
		var burst sync.WaitGroup
		for j := range burstSize {
			burst.Go(func() {
				name := names[(n+j)%len(names)]
				stats.do("v1alpha1 get in a burst", func(ctx context.Context) error {
					_, err := v1Client.Get(ctx, name, metav1.GetOptions{})
					return err
				})
			})
		}
		burst.Wait()
		select {
		case <-stop:
		case <-time.After(time.Second):
		}
	})
	loadStart := time.Now()
	// When the API server's failed calls grow, noted every two seconds, for the
	// message of a failure.
	var failedCalls []string
	var sampler sync.WaitGroup
	sampler.Go(func() {
		last := before.failure
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Second):
			}
			if calls, err := conversionWebhookCalls(ctx, kube); err == nil && calls.failure != last {
				failedCalls = append(failedCalls, fmt.Sprintf("%d more by %s", calls.failure-last, time.Now().Format("15:04:05.0")))
				last = calls.failure
			}
		}
	})

	// Meanwhile, the certificates: the Secret, the CRD's caBundle, and what each
	// replica serves, looked at every 200 ms until the rotation is complete.
	inBundle, err := watchCABundle(ctx, apiextensionsclient.NewForConfigOrDie(admin))
	require.NoError(t, err)
	t.Cleanup(inBundle.stop)
	watcher := &renewalWatcher{servedBy: map[string]map[string]bool{}, inBundle: inBundle}
	var deadline time.Time
	for done := false; !done; {
		crd, err := crds.Get(ctx, webhook.CRDName, metav1.GetOptions{})
		require.NoError(t, err)
		secret, err := kube.CoreV1().Secrets(operatorNamespace).Get(ctx, webhook.DefaultSecretName, metav1.GetOptions{})
		require.NoError(t, err)
		bundle := crd.Spec.Conversion.Webhook.ClientConfig.CABundle
		watcher.observe(t, bundle, secret)
		for _, r := range replicas {
			watcher.dial(r.name, r.webhookAddr, bundle)
		}
		if deadline.IsZero() {
			// From the first CA's expiry, which ends the rotation: a serving
			// certificate's life for the rest to happen.
			deadline = watcher.firstCA.NotAfter.Add(renewalServingValidity)
			t.Logf("first CA valid %s to %s; waiting until %s at the latest", watcher.firstCA.NotBefore.Format(time.TimeOnly),
				watcher.firstCA.NotAfter.Format(time.TimeOnly), deadline.Format(time.TimeOnly))
		}
		done = watcher.complete(len(replicas))
		if !done && time.Now().After(deadline) {
			stopLoad()
			t.Fatalf("the rotation did not complete by %s (the first CA's expiry and a serving certificate's life): %s", deadline.Format(time.TimeOnly), watcher.summary())
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopLoad()
	sampler.Wait()
	window := time.Since(loadStart)

	// Every request answered, on the wire too.
	var sent, ok int64
	var counts []string
	for op, n := range stats.sent {
		sent += n.Load()
		ok += stats.ok[op].Load()
		counts = append(counts, fmt.Sprintf("%s %d", op, n.Load()))
		assert.Positive(t, n.Load(), "no %s sent", op)
	}
	sort.Strings(counts)
	t.Logf("load for %s: %d requests (%.0f/s): %s", window.Round(100*time.Millisecond), sent, float64(sent)/window.Seconds(), strings.Join(counts, ", "))
	t.Logf("certificates: %s", watcher.summary())
	assert.Empty(t, stats.failures(), "failed requests")
	assert.Equal(t, sent, ok, "requests sent and answered")
	// A change of the CRD (each caBundle change) makes the API server build the CRD's
	// storage anew, and until its watch cache is ready again it answers some reads 429
	// "storage is (re)initializing" with a Retry-After, which client-go waits out and
	// sends again. That is flow control, not a lost conversion: such answers are counted
	// apart, and every other answer on the wire is a 2xx.
	wireCodes := wire.snapshot()
	throttled := wireCodes[http.StatusTooManyRequests] - throttledBefore
	t.Logf("answers on the wire: %v (%d of them 429 during the load, each sent again by client-go)", wireCodes, throttled)
	assert.Equal(t, int(sent), wire.total()-wireBefore-throttled, "requests on the wire, 429s apart (client-go retries nothing else behind the counts): %v", wireCodes)
	for code, n := range wireCodes {
		assert.True(t, code >= 200 && code < 300 || code == http.StatusTooManyRequests, "%d responses with HTTP %d", n, code)
	}

	// The API server's own count: no failed conversion webhook call, and at least one
	// successful call per v1alpha1 request.
	after, err := conversionWebhookCalls(ctx, kube)
	require.NoError(t, err)
	var v1Requests int64
	for op, n := range stats.sent {
		if strings.HasPrefix(op, "v1alpha1 ") {
			v1Requests += n.Load()
		}
	}
	t.Logf("the API server's conversion webhook calls during the load: %d succeeded, %d failed (%v)", after.success-before.success, after.failure-before.failure, after.failures)
	assert.Equal(t, before.failure, after.failure, "failed conversion webhook calls: %v, %v (first CA made at %s)",
		after.failures, failedCalls, madeAt(watcher.firstCA).Format("15:04:05"))
	assert.GreaterOrEqual(t, after.success-before.success, v1Requests, "successful conversion webhook calls, against v1alpha1 requests")

	// The certificates did change, and every one served was trusted.
	assert.Empty(t, watcher.problems, "certificates the API server would not have trusted")
	if watcher.renewals(t) {
		t.Log("a serving certificate fell due while the new CA was younger than the propagation delay, and waited for it")
	} else {
		t.Log("no serving certificate fell due while the new CA was younger than the propagation delay (the timing drifted): the wait was not exercised")
	}
	assert.GreaterOrEqual(t, len(watcher.serving)-1, 2, "serving certificate renewals in the Secret")
	assert.GreaterOrEqual(t, len(watcher.cas)-1, 1, "CA rotations in the Secret")
	for _, r := range replicas {
		assert.GreaterOrEqual(t, len(watcher.servedBy[r.name]), 3, "distinct certificates served by %s", r.name)
	}

	// The API server's connections through the front, each one a TLS handshake, while
	// each serving certificate was the Secret's.
	for _, r := range replicas {
		conns := front.connections(r.webhookAddr, watcher.servingSeen)
		t.Logf("API server connections to %s while each serving certificate was the Secret's: %v", r.name, conns)
		// The last one's time was cut short by the end of the load.
		for i, n := range conns[:len(conns)-1] {
			assert.Positive(t, n, "%s: no connection from the API server while serving certificate %d was the Secret's", r.name, i+1)
		}
	}

	// At the end both replicas serve what the Secret holds (a replica reads the Secret
	// through its informer: a moment after the write).
	eventually(t, renewalServingValidity/2, "both replicas serve the Secret's certificate", func(ctx context.Context) (bool, error) {
		secret, err := kube.CoreV1().Secrets(operatorNamespace).Get(ctx, webhook.DefaultSecretName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want := fingerprintPEM(secret.Data[corev1.TLSCertKey])
		for _, r := range replicas {
			if got, err := servedFingerprint(r.webhookAddr); err != nil || got != want {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("renewal test done in %s", time.Since(start).Round(100*time.Millisecond))
}

// replicasAre checks that a v1alpha1 answer carries spec.replicas want.
func replicasAre(l *v1alpha1.LlamaStackDistribution, err error) func(int32) error {
	return func(want int32) error {
		if err != nil {
			return err
		}
		if l.Spec.Replicas != want {
			return fmt.Errorf("%s: spec.replicas is %d in v1alpha1, %d was written", l.Name, l.Spec.Replicas, want)
		}
		return nil
	}
}

// loadStats counts the load's requests by operation: sent, answered without error, and
// what failed.
type loadStats struct {
	sent, ok map[string]*atomic.Int64
	mu       sync.Mutex
	failed   []string
}

// do sends one request and counts it; it reports whether it succeeded.
func (s *loadStats) do(op string, req func(ctx context.Context) error) bool {
	s.sent[op].Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := req(ctx); err != nil {
		s.mu.Lock()
		s.failed = append(s.failed, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), op, err))
		s.mu.Unlock()
		return false
	}
	s.ok[op].Add(1)
	return true
}

func (s *loadStats) failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failed) > 20 {
		return append(s.failed[:20:20], fmt.Sprintf("... and %d more", len(s.failed)-20))
	}
	return append([]string(nil), s.failed...)
}

// wireCounter counts HTTP responses by status code, and requests that got none.
type wireCounter struct {
	mu    sync.Mutex
	codes map[int]int
}

func (w *wireCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		code := 0
		if err == nil {
			code = resp.StatusCode
		}
		w.mu.Lock()
		w.codes[code]++
		w.mu.Unlock()
		return resp, err
	})
}

func (w *wireCounter) snapshot() map[int]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int]int{}
	for k, v := range w.codes {
		out[k] = v
	}
	return out
}

func (w *wireCounter) total() int {
	n := 0
	for _, v := range w.snapshot() {
		n += v
	}
	return n
}

// renewalWatcher follows the Secret, the CRD's caBundle and the replicas' certificates.
type renewalWatcher struct {
	// serving and cas are the distinct serving certificates and newest CAs the Secret
	// held, in order; servingSeen is when each serving certificate was first seen;
	// bundles counts the CAs of each distinct caBundle, in order.
	serving, cas []*x509.Certificate
	servingSeen  []time.Time
	bundles      []int
	firstCA      *x509.Certificate
	// newCAServed is true once each replica served a certificate of a CA after the
	// first; firstCADropped once a caBundle without the first CA followed it.
	newCAServed    map[string]bool
	firstCADropped bool
	servedBy       map[string]map[string]bool
	problems       []string
	lastBundle     string
	// inBundle tells when each CA was first seen in the CRD's caBundle.
	inBundle *caBundleWatch
}

func (w *renewalWatcher) observe(t *testing.T, bundle []byte, secret *corev1.Secret) {
	t.Helper()
	now := time.Now()
	trusted, err := parseCerts(bundle)
	require.NoError(t, err, "the CRD's caBundle")
	if string(bundle) != w.lastBundle {
		w.lastBundle = string(bundle)
		w.bundles = append(w.bundles, len(trusted))
		if w.firstCA != nil && len(trusted) > 0 && !containsCert(trusted, w.firstCA) {
			w.firstCADropped = true
		}
	}
	cas, err := parseCerts(secret.Data["ca.crt"])
	require.NoError(t, err, "the Secret's ca.crt")
	require.NotEmpty(t, cas, "the Secret's ca.crt")
	if w.firstCA == nil {
		w.firstCA = cas[len(cas)-1]
	}
	if len(w.cas) == 0 || !w.cas[len(w.cas)-1].Equal(cas[0]) {
		w.cas = append(w.cas, cas[0])
	}
	leaves, err := parseCerts(secret.Data[corev1.TLSCertKey])
	require.NoError(t, err, "the Secret's tls.crt")
	require.NotEmpty(t, leaves, "the Secret's tls.crt")
	if len(w.serving) == 0 || !w.serving[len(w.serving)-1].Equal(leaves[0]) {
		w.serving = append(w.serving, leaves[0])
		w.servingSeen = append(w.servingSeen, now)
		// Signed by a CA the API server already trusts (the CRD was read first): the
		// very first certificate excepted, made before there was a caBundle.
		if len(w.serving) > 1 && issuer(leaves[0], trusted) == nil {
			w.problems = append(w.problems, fmt.Sprintf("%s: the Secret's new serving certificate (issuer %s) is signed by no CA of the CRD's caBundle",
				now.Format("15:04:05.000"), leaves[0].Issuer.CommonName))
		}
	}
}

// madeAt is when a certificate of the test's validities was made: the end of its
// validity less the validity (whole seconds, as X.509 keeps them).
func madeAt(c *x509.Certificate) time.Time {
	if c.IsCA {
		return c.NotAfter.Add(-renewalCAValidity)
	}
	return c.NotAfter.Add(-renewalServingValidity)
}

// renewals describes each serving certificate after the first and checks that one
// signed by a new CA was made no sooner than the propagation delay after that CA was
// made (less a second for the seconds X.509 drops), and no sooner than half the delay
// after this test's watch of the CRD first saw it in the caBundle (half: the watch
// may deliver it a little later than the replicas' own). It returns whether a renewal waited for a new CA: it was
// due while the CA was newer than the delay.
func (w *renewalWatcher) renewals(t *testing.T) (waited bool) {
	t.Helper()
	start := madeAt(w.firstCA)
	caNumber := func(ca *x509.Certificate) int {
		for i, c := range w.cas {
			if c.Equal(ca) {
				return i + 1
			}
		}
		return 0
	}
	for i := 1; i < len(w.serving); i++ {
		leaf, prev := w.serving[i], w.serving[i-1]
		ca := issuer(leaf, w.cas)
		if !assert.NotNil(t, ca, "serving certificate %d is signed by no CA the Secret held", i+1) {
			continue
		}
		made := madeAt(leaf)
		due := prev.NotBefore.Add(prev.NotAfter.Sub(prev.NotBefore) * 2 / 3)
		line := fmt.Sprintf("serving certificate %d: made at %s (due at %s), signed by CA %d", i+1, made.Sub(start), due.Sub(start), caNumber(ca))
		if !ca.Equal(w.firstCA) {
			after := made.Sub(madeAt(ca))
			published := w.inBundle.firstSeen(ca)
			assert.False(t, published.IsZero(), "CA %d never seen in the caBundle", caNumber(ca))
			line += fmt.Sprintf(" (made at %s, seen in the caBundle at %s), %s after it was made and %s after it was seen",
				madeAt(ca).Sub(start), published.Sub(start).Round(10*time.Millisecond), after, made.Sub(published).Round(10*time.Millisecond))
			assert.GreaterOrEqual(t, after, renewalCAPropagation-time.Second,
				"serving certificate %d signed by a CA younger than the propagation delay", i+1)
			assert.GreaterOrEqual(t, made.Sub(published), renewalCAPropagation/2,
				"serving certificate %d signed by a CA in the caBundle for less than half the propagation delay", i+1)
			if settled := madeAt(ca).Add(renewalCAPropagation); caNumber(issuer(prev, w.cas)) != caNumber(ca) && due.Before(settled) {
				waited = true
				line += fmt.Sprintf(": due before the CA was %s old, so it waited", renewalCAPropagation)
			}
		}
		t.Log(line)
	}
	return waited
}

// dial connects to a replica's webhook as the API server does, trusting bundle.
func (w *renewalWatcher) dial(name, addr string, bundle []byte) {
	if w.servedBy[name] == nil {
		w.servedBy[name] = map[string]bool{}
	}
	if w.newCAServed == nil {
		w.newCAServed = map[string]bool{}
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		w.problems = append(w.problems, fmt.Sprintf("%s: %s: %v", time.Now().Format("15:04:05.000"), name, err))
		return
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	w.servedBy[name][fingerprint(leaf.Raw)] = true
	if leaf.CheckSignatureFrom(w.firstCA) != nil {
		w.newCAServed[name] = true
	}
}

// complete tells whether the rotation has been seen whole: two serving renewals, a CA
// rotation, every replica serving the new CA's certificate, the first CA dropped.
func (w *renewalWatcher) complete(replicas int) bool {
	return len(w.serving) >= 3 && len(w.cas) >= 2 && len(w.newCAServed) == replicas && w.firstCADropped
}

func (w *renewalWatcher) summary() string {
	served := make([]string, 0, len(w.servedBy))
	for name, certs := range w.servedBy {
		served = append(served, fmt.Sprintf("%s served %d", name, len(certs)))
	}
	sort.Strings(served)
	return fmt.Sprintf("%d serving certificates and %d CAs in the Secret; caBundles by CA count %v (first CA dropped: %v); %s; %d problems",
		len(w.serving), len(w.cas), w.bundles, w.firstCADropped, strings.Join(served, ", "), len(w.problems))
}

func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out, nil
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

func containsCert(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range certs {
		if x.Equal(c) {
			return true
		}
	}
	return false
}

func issuer(c *x509.Certificate, cas []*x509.Certificate) *x509.Certificate {
	for _, ca := range cas {
		if c.CheckSignatureFrom(ca) == nil {
			return ca
		}
	}
	return nil
}

func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:8])
}

func fingerprintPEM(data []byte) string {
	certs, err := parseCerts(data)
	if err != nil || len(certs) == 0 {
		return ""
	}
	return fingerprint(certs[0].Raw)
}

// servedFingerprint is the fingerprint of the certificate served at addr, unverified.
func servedFingerprint(addr string) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // only reads which certificate is served
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return fingerprint(conn.ConnectionState().PeerCertificates[0].Raw), nil
}

// webhookCalls is the API server's apiserver_conversion_webhook_request_total.
type webhookCalls struct {
	success, failure int64
	failures         map[string]int64
}

// conversionWebhookCalls reads the API server's count of conversion webhook calls.
func conversionWebhookCalls(ctx context.Context, kube kubernetes.Interface) (webhookCalls, error) {
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return webhookCalls{}, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	calls := webhookCalls{failures: map[string]int64{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_conversion_webhook_request_total{") {
			continue
		}
		labels, value, _ := strings.Cut(strings.TrimPrefix(line, "apiserver_conversion_webhook_request_total"), " ")
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return webhookCalls{}, fmt.Errorf("metric line %q: %w", line, err)
		}
		switch {
		case strings.Contains(labels, `result="success"`):
			calls.success += int64(n)
		case strings.Contains(labels, `result="failure"`):
			calls.failure += int64(n)
			calls.failures[labels] += int64(n)
		}
	}
	return calls, sc.Err()
}

// caBundleWatch watches the CRD and notes when each CA first appears in its caBundle.
type caBundleWatch struct {
	mu     sync.Mutex
	seen   map[string]time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

func watchCABundle(ctx context.Context, client apiextensionsclient.Interface) (*caBundleWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &caBundleWatch{seen: map[string]time.Time{}, cancel: cancel, done: make(chan struct{})}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + webhook.CRDName}
	list, err := crds.List(ctx, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	for i := range list.Items {
		w.note(&list.Items[i])
	}
	go func() {
		defer close(w.done)
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			opts.ResourceVersion = rv
			watch, err := crds.Watch(ctx, opts)
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range watch.ResultChan() {
				if crd, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition); ok {
					w.note(crd)
					rv = crd.ResourceVersion
				}
			}
			watch.Stop()
		}
	}()
	return w, nil
}

func (w *caBundleWatch) note(crd *apiextensionsv1.CustomResourceDefinition) {
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Webhook == nil || crd.Spec.Conversion.Webhook.ClientConfig == nil {
		return
	}
	cas, _ := parseCerts(crd.Spec.Conversion.Webhook.ClientConfig.CABundle)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ca := range cas {
		if _, ok := w.seen[fingerprint(ca.Raw)]; !ok {
			w.seen[fingerprint(ca.Raw)] = now
		}
	}
}

// firstSeen is when ca was first seen in the caBundle, or the zero time.
func (w *caBundleWatch) firstSeen(ca *x509.Certificate) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[fingerprint(ca.Raw)]
}

func (w *caBundleWatch) stop() {
	w.cancel()
	<-w.done
}

// tcpFront passes each connection on to one of its backends, in turn, as a Service
// does: the one address of the CRD's clientConfig in front of every replica.
type tcpFront struct {
	ln       net.Listener
	mu       sync.Mutex
	backends []string
	next     int
	// opened is when each connection was passed on, by backend.
	opened map[string][]time.Time
}

func startTCPFront() (*tcpFront, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &tcpFront{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go f.pass(conn)
		}
	}()
	return f, nil
}

// connections counts the connections passed on to addr from since, in the windows
// that start at each of times.
func (f *tcpFront) connections(addr string, times []time.Time) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]int, len(times))
	for _, at := range f.opened[addr] {
		for i := len(times) - 1; i >= 0; i-- {
			if !at.Before(times[i]) {
				out[i]++
				break
			}
		}
	}
	return out
}

func (f *tcpFront) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

func (f *tcpFront) close() { _ = f.ln.Close() }

func (f *tcpFront) add(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backends = append(f.backends, addr)
}

func (f *tcpFront) pass(conn net.Conn) {
	defer conn.Close()
	f.mu.Lock()
	if len(f.backends) == 0 {
		f.mu.Unlock()
		return
	}
	addr := f.backends[f.next%len(f.backends)]
	f.next++
	if f.opened == nil {
		f.opened = map[string][]time.Time{}
	}
	f.opened[addr] = append(f.opened[addr], time.Now())
	f.mu.Unlock()
	backend, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return
	}
	defer backend.Close()
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go copyHalf(backend, conn)
	go copyHalf(conn, backend)
	<-done
	<-done
}

// linesWith returns the last max lines of log that contain s, leaving out the lines of
// each conversion and of the informers' machinery.
func linesWith(log, s string, max int) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, s) && !strings.Contains(line, `"Converted"`) && !strings.Contains(line, "reflector.go") &&
			!strings.Contains(line, "Conversion webhook server") {
			out = append(out, line)
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return strings.Join(out, "\n")
}
