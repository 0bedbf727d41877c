//go:build e2e

// Package e2e runs the controller in-process against a real local control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok fake nodes, built by
// hack/cluster/build.sh) and checks its behaviour end to end. Run it with `make test-e2e`.
package e2e

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/cmd/controller/app"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// resyncPeriod is short so that the idle test spans several informer resyncs.
const resyncPeriod = 5 * time.Second

// probeInterval between health probes of a ready server.
const probeInterval = 2 * time.Second

// env is the shared test environment: one cluster and one controller for the package.
var env struct {
	cluster *localcluster.Cluster
	cfg     *rest.Config
	binDir  string
	// stagesFile is kwok's stages, for a test that starts a cluster of its own.
	stagesFile string
	root       string
	kube       kubernetes.Interface
	client     clientset.Interface
	dynamic    dynamic.Interface
	requests   *requestCounter
	// metricsAddr serves the controller's /metrics, healthAddr its /healthz and /readyz.
	metricsAddr string
	healthAddr  string
	// webhookAddr serves the controller's conversion webhook, which the CRD reaches on
	// loopback (localcluster.LoopbackCRD).
	webhookAddr string
	// servers routes Service DNS names to fake llama-stack servers.
	servers *fakeServers
	// controllerLog holds the controller's log, printed when a test fails.
	controllerLog *syncBuffer
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	root, err := localcluster.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.root = root
	binDir, stages, err := localcluster.BuildBinaries(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "building the control plane:", err)
		return 1
	}
	env.binDir, env.stagesFile = binDir, stages
	env.servers = &fakeServers{byHost: map[string]string{}}
	// kube-apiserver's service proxy reaches the fake llama-stack servers: its connections
	// to a pod IP go, through an egress selector, to the fake server of that pod's Service.
	cluster, err := localcluster.Start(ctx, localcluster.Options{BinDir: binDir, StagesFile: stages, Nodes: 3,
		ClusterDialer: env.servers.dialPod})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	env.cluster = cluster
	// The controller runs outside the cluster even if this process runs in one.
	_ = os.Unsetenv("KUBERNETES_SERVICE_HOST")
	env.cfg = cluster.RESTConfig()
	env.kube = kubernetes.NewForConfigOrDie(env.cfg)
	env.client = clientset.NewForConfigOrDie(env.cfg)
	env.dynamic = dynamic.NewForConfigOrDie(env.cfg)

	if env.webhookAddr, err = freeAddress(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := installCRD(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "installing the CRD:", err)
		return 1
	}

	// The controller runs in-process, as the binary does, as the artifacts'
	// ServiceAccount with exactly the artifacts' ClusterRole and leader election Role
	// (impersonated), so a verb the controller needs but the roles lack fails the suite,
	// and with a transport that counts every request it sends.
	if out, err := exec.Command(filepath.Join(binDir, "kubectl"), "--kubeconfig", cluster.Kubeconfig(), "apply", "--server-side",
		"-f", filepath.Join(root, "artifacts", "controller", "namespace.yaml"),
		"-f", filepath.Join(root, "artifacts", "rbac", "service_account.yaml"),
		"-f", filepath.Join(root, "artifacts", "rbac", "cluster_role.yaml"),
		"-f", filepath.Join(root, "artifacts", "rbac", "cluster_role_binding.yaml"),
		"-f", filepath.Join(root, "artifacts", "rbac", "leader_election_role.yaml"),
		"-f", filepath.Join(root, "artifacts", "rbac", "leader_election_role_binding.yaml"),
		// The conversion webhook's certificates: the Secret and the CRD's caBundle.
		"-f", filepath.Join(root, "artifacts", "rbac", "webhook_role.yaml"),
		"-f", filepath.Join(root, "artifacts", "rbac", "webhook_role_binding.yaml"),
		// The controller runs outside the cluster, so it probes the servers through the
		// API server's service proxy, with the optional role made for that.
		"-f", filepath.Join(root, "artifacts", "rbac", "service_proxy_role.yaml")).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "installing the RBAC: %v\n%s", err, out)
		return 1
	}
	if env.metricsAddr, err = freeAddress(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if env.healthAddr, err = freeAddress(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.requests = &requestCounter{}
	env.controllerLog = &syncBuffer{}
	ctrlCfg := controllerConfig(env.requests)
	// The controller's log (-v=4 by default, $LLSC_E2E_V to change) goes to a buffer; a
	// failing test prints the lines about its namespace and every error.
	logFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logFlags)
	verbosity := os.Getenv("LLSC_E2E_V")
	if verbosity == "" {
		verbosity = "4"
	}
	for _, kv := range [][2]string{{"logtostderr", "false"}, {"alsologtostderr", "false"}, {"stderrthreshold", "FATAL"}, {"v", verbosity}} {
		if err := logFlags.Set(kv[0], kv[1]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	klog.SetOutput(env.controllerLog)
	logger := klog.NewKlogr()
	ctrlCtx, cancel := context.WithCancel(klog.NewContext(ctx, logger))
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctrlCtx, ctrlCfg, app.Options{
			Workers: 4, QPS: 50, Burst: 100, ResyncPeriod: resyncPeriod,
			OperatorNamespace: operatorNamespace, Version: "e2e",
			// Outside a cluster "auto" probes the servers through the API server's service
			// proxy (see fakeServers.dialPod for where that leads).
			ServerProbe: "auto", ServerProbeInterval: probeInterval,
			MetricsBindAddress: env.metricsAddr, HealthProbeBindAddress: env.healthAddr,
			// As the artifacts run it: the suite proves the leader election Role suffices,
			// and the idle test that leading costs nothing but Lease renewals.
			LeaderElect: true,
			// The conversion webhook, with the certificates it makes (its IP address covers
			// the CRD's loopback URL) and the caBundle it sets, as the artifacts run it.
			WebhookBindAddress: env.webhookAddr, WebhookCertMode: app.WebhookCertModeSelf,
			WebhookCertHosts: "localhost,127.0.0.1",
		})
	}()
	if err := waitConversion(ctx, done); err != nil {
		fmt.Fprintln(os.Stderr, err)
		fmt.Fprintln(os.Stderr, env.controllerLog.String())
		cancel()
		return 1
	}
	code := m.Run()
	if code != 0 {
		if f, err := os.CreateTemp("", "llsc-e2e-controller-*.log"); err == nil {
			_, _ = f.WriteString(env.controllerLog.String())
			_ = f.Close()
			fmt.Fprintln(os.Stderr, "the controller's whole log:", f.Name())
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintln(os.Stderr, "controller:", err)
			code = 1
		}
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "controller did not stop within 30s of its context being cancelled")
		code = 1
	}
	return code
}

// operatorNamespace is the controller's namespace in the suite.
const operatorNamespace = "llama-stack-controller-system"

// controllerConfig is the client configuration of a controller run by the suite: the
// artifacts' ServiceAccount (impersonated), every request counted by requests.
func controllerConfig(requests *requestCounter) *rest.Config {
	cfg := rest.CopyConfig(env.cfg)
	cfg.UserAgent = "llama-stack-controller/e2e"
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + operatorNamespace + ":llama-stack-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"},
	}
	cfg.Wrap(requests.wrap)
	return cfg
}

// freeAddress returns a loopback address with a port free at the time of the call.
func freeAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// installCRD creates the CRD of artifacts/crd, its conversion webhook on loopback at
// env.webhookAddr, and the admission policies of artifacts/policy, and waits until the
// CRD is served.
func installCRD(ctx context.Context) error {
	_, port, err := net.SplitHostPort(env.webhookAddr)
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	crd, err := localcluster.LoopbackCRD(env.root, p)
	if err != nil {
		return err
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := env.dynamic.Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating %s: %w", crd.GetName(), err)
	}
	// And its admission policy, as kubectl apply -k artifacts/ installs it.
	policies, err := filepath.Glob(filepath.Join(env.root, "artifacts", "policy", "*.yaml"))
	if err != nil {
		return err
	}
	for _, file := range policies {
		objs, err := readObjects(file)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			resource := map[string]string{
				"ValidatingAdmissionPolicy":        "validatingadmissionpolicies",
				"ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
			}[obj.GetKind()]
			if resource == "" {
				return fmt.Errorf("%s: no resource known for the kind %s", file, obj.GetKind())
			}
			gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: resource}
			if _, err := env.dynamic.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating the %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := env.client.LlamastackV1alpha1().LlamaStackDistributions("default").List(ctx, metav1.ListOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the CRD is not served: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitConversion waits until the API server converts through the controller's webhook:
// a v1alpha1 object created with dry run is converted to v1alpha2, the storage
// version, which needs the webhook serving and the caBundle it set.
func waitConversion(ctx context.Context, controllerDone <-chan error) error {
	probe := &v1alpha1.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: "conversion-probe", Namespace: "default"},
		Spec:       v1alpha1.LlamaStackDistributionSpec{Server: v1alpha1.ServerSpec{Distribution: v1alpha1.DistributionType{Name: "starter"}}},
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := env.client.LlamastackV1alpha1().LlamaStackDistributions("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return nil
		}
		select {
		case cerr := <-controllerDone:
			return fmt.Errorf("the controller stopped before the conversion webhook served: %v", cerr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the conversion webhook does not serve within 60s: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readObjects decodes every object of a multi-document YAML file.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// requestCounter counts the controller's requests: watches, server probes and Lease
// requests apart from everything else.
type requestCounter struct {
	mu    sync.Mutex
	byKey map[string]int
}

func (r *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		key := req.Method + " " + req.URL.Path
		switch {
		case req.URL.Query().Get("watch") == "true":
			key = "WATCH " + req.URL.Path
		case strings.Contains(req.URL.Path, "/proxy/"):
			key = "PROBE " + req.URL.Path
		case strings.Contains(req.URL.Path, "/leases/") || strings.HasSuffix(req.URL.Path, "/leases"):
			key = "LEASE " + req.Method + " " + req.URL.Path
		}
		r.mu.Lock()
		if r.byKey == nil {
			r.byKey = map[string]int{}
		}
		r.byKey[key]++
		r.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// snapshot returns a copy of the per-request counts.
func (r *requestCounter) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.byKey))
	for k, v := range r.byKey {
		out[k] = v
	}
	return out
}

// since lists the requests other than watches, server probes and Lease requests made
// after an earlier snapshot. (Probes reach the API server only because the controller
// runs outside the cluster here; in a cluster they go straight to the Service. The Lease
// requests are the price of leader election: one renewal per retry period.)
func (r *requestCounter) since(before map[string]int) []string {
	var out []string
	for k, v := range r.snapshot() {
		if strings.HasPrefix(k, "WATCH ") || strings.HasPrefix(k, "PROBE ") || strings.HasPrefix(k, "LEASE ") {
			continue
		}
		if d := v - before[k]; d > 0 {
			out = append(out, fmt.Sprintf("%dx %s", d, k))
		}
	}
	return out
}

// leaseSince counts the Lease requests by method since an earlier snapshot.
func (r *requestCounter) leaseSince(before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range r.snapshot() {
		if method, _, ok := strings.Cut(strings.TrimPrefix(k, "LEASE "), " "); ok && strings.HasPrefix(k, "LEASE ") {
			if d := v - before[k]; d > 0 {
				out[method] += d
			}
		}
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// fakeServers maps "host:port" of a Service to the loopback address of a fake server,
// and CRs ("namespace/name") to the fake llama-stack servers their pods run
// (readConfig, fakellama_test.go).
type fakeServers struct {
	mu         sync.Mutex
	byHost     map[string]string
	fromConfig map[string]*llamaServers
}

func (f *fakeServers) set(hostPort, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if addr == "" {
		delete(f.byHost, hostPort)
	} else {
		f.byHost[hostPort] = addr
	}
}

// dialPod connects kube-apiserver to "podIP:port": to the fake llama-stack server
// that pod runs when its CR is registered with readConfig, else to the fake server set
// for the Service of that pod's CR ("<name>-service.<namespace>.svc:<port>"), or fails
// like an unreachable pod. A pod being deleted comes last, should a new pod have its IP.
func (f *fakeServers) dialPod(ctx context.Context, addr string) (net.Conn, error) {
	ip, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	pods, err := env.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.podIP=" + ip})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(pods.Items, func(a, b corev1.Pod) int {
		return cmp.Compare(boolInt(a.DeletionTimestamp != nil), boolInt(b.DeletionTimestamp != nil))
	})
	for i := range pods.Items {
		p := &pods.Items[i]
		instance := p.Labels["app.kubernetes.io/instance"]
		host := fmt.Sprintf("%s-service.%s.svc:%s", instance, p.Namespace, port)
		f.mu.Lock()
		target, ok := f.byHost[host]
		llama := f.fromConfig[p.Namespace+"/"+instance]
		f.mu.Unlock()
		if llama != nil {
			return llama.dial(ctx, p, port)
		}
		if ok {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", target)
		}
	}
	return nil, fmt.Errorf("dial tcp %s: no server listens there", addr)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
