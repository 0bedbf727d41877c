//go:build e2e

// Package chaos runs the controller's binary against a real local control plane and
// breaks things while it works: the controller is killed at random points, the API
// server restarts and etcd compacts so watches expire, API requests fail, users edit
// and delete children by hand, and (with leader election) the leader dies
// mid-rollout. Every scenario ends with the same checks (see invariants_test.go):
// every CR converged, no duplicate or orphaned child, nobody else's object touched, no
// PVC deleted, and no pod replaced without a spec change. It runs with the e2e suite
// (`make test-e2e`), bounded in time.
package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// operatorNamespace is the controller's namespace, as in artifacts/.
const operatorNamespace = "llama-stack-controller-system"

// serviceAccount is the identity every controller in the suite runs as (impersonated),
// with exactly the artifacts' RBAC.
const serviceAccount = "system:serviceaccount:" + operatorNamespace + ":llama-stack-controller"

var env struct {
	cluster    *localcluster.Cluster
	cfg        *rest.Config
	kube       kubernetes.Interface
	client     clientset.Interface
	root       string
	binDir     string
	workDir    string
	controller string // the controller binary
	auditLog   string
	// webhook is the front of the replicas' conversion webhooks (the CRD's loopback
	// URL), as the webhook Service is in a cluster.
	webhook *webhookFront
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 1
	}
	root, err := localcluster.ModuleRoot()
	if err != nil {
		return fail("module root", err)
	}
	env.root = root
	work, err := os.MkdirTemp("", "llsc-chaos-")
	if err != nil {
		return fail("work dir", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	env.workDir = work

	// The controller under test is the real binary, so that it can be killed.
	env.controller = filepath.Join(work, "llama-stack-controller")
	build := exec.Command("go", "build", "-o", env.controller, "./cmd/controller")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fail("building the controller", fmt.Errorf("%v\n%s", err, out))
	}

	binDir, stages, err := localcluster.BuildBinaries(ctx)
	if err != nil {
		return fail("building the control plane", err)
	}
	env.binDir = binDir
	// The API server's audit log tells which client sent which request; etcd is
	// compacted every 10 s so that a watch that was away for a while expires (410).
	policy := filepath.Join(work, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return fail("audit policy", err)
	}
	env.auditLog = filepath.Join(work, "audit.log")
	cluster, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: binDir, StagesFile: stages, Nodes: 3,
		ExtraAPIServerArgs: []string{
			"--audit-policy-file=" + policy,
			"--audit-log-path=" + env.auditLog,
			"--audit-log-mode=blocking",
			"--etcd-compaction-interval=10s",
		},
	})
	if err != nil {
		return fail("starting the control plane", err)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	env.cluster = cluster
	env.cfg = cluster.RESTConfig()
	env.kube = kubernetes.NewForConfigOrDie(env.cfg)
	env.client = clientset.NewForConfigOrDie(env.cfg)

	// The CRD converts through the replicas' webhooks, behind a front on loopback.
	front, err := startWebhookFront()
	if err != nil {
		return fail("the webhook front", err)
	}
	defer front.close()
	env.webhook = front
	crd, err := localcluster.LoopbackCRD(root, front.port)
	if err != nil {
		return fail("the CRD", err)
	}
	crdJSON, err := crd.MarshalJSON()
	if err != nil {
		return fail("the CRD", err)
	}
	crdFile := filepath.Join(work, "crd.json")
	if err := os.WriteFile(crdFile, crdJSON, 0o600); err != nil {
		return fail("the CRD", err)
	}
	files := []string{
		crdFile,
		filepath.Join(root, "artifacts", "controller", "namespace.yaml"),
		filepath.Join(root, "artifacts", "rbac", "service_account.yaml"),
		filepath.Join(root, "artifacts", "rbac", "cluster_role.yaml"),
		filepath.Join(root, "artifacts", "rbac", "cluster_role_binding.yaml"),
		filepath.Join(root, "artifacts", "rbac", "webhook_role.yaml"),
		filepath.Join(root, "artifacts", "rbac", "webhook_role_binding.yaml"),
	}
	files = append(files, leaderElectionRBAC()...)
	args := []string{"--kubeconfig", cluster.Kubeconfig(), "apply", "--server-side"}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	if out, err := exec.Command(filepath.Join(binDir, "kubectl"), args...).CombinedOutput(); err != nil {
		return fail("installing the CRD and RBAC", fmt.Errorf("%v\n%s", err, out))
	}
	if err := localcluster.WaitCRDEstablished(ctx, env.cfg, crd.GetName(), 60*time.Second); err != nil {
		return fail("waiting for the CRD", err)
	}
	return m.Run()
}

// leaderElectionRBAC lists the artifacts' RBAC for the leader election lease, if any.
func leaderElectionRBAC() []string {
	files, _ := filepath.Glob(filepath.Join(env.root, "artifacts", "rbac", "leader_election*.yaml"))
	return files
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:kube-controller-manager", "system:kube-scheduler", "kwok-controller", "system:apiserver"]
- level: None
  nonResourceURLs: ["/*"]
- level: Metadata
`

// kubeconfig writes a kubeconfig that impersonates the controller's ServiceAccount.
// replica is recorded as a user extra, so the audit log tells replicas apart (RBAC
// ignores it).
func kubeconfig(replica string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(env.cluster.Kubeconfig())
	if err != nil {
		return "", err
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = serviceAccount
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"}
		a.ImpersonateUserExtra = map[string][]string{"replica": {replica}}
	}
	path := filepath.Join(env.workDir, "kubeconfig-"+replica)
	return path, clientcmd.WriteToFile(*cfg, path)
}

// controllerProcess is one run of the controller binary.
type controllerProcess struct {
	replica string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	log     string
	health  string // host:port of /healthz and /readyz, when served
	webhook string // host:port of its conversion webhook
}

// startController starts the binary as replica (a name in the audit log) with extra
// flags; the test kills it at the end and prints its log if it failed.
func startController(t *testing.T, replica string, extra ...string) *controllerProcess {
	t.Helper()
	p, err := launch(replica, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("controller %s log (end):\n%s", replica, tail(p.log, 60))
		}
	})
	return p
}

// launch starts the binary; safe from any goroutine. The caller kills it.
func launch(replica string, extra ...string) (*controllerProcess, error) {
	kc, err := kubeconfig(replica)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	p := &controllerProcess{replica: replica, done: make(chan struct{}), log: filepath.Join(env.workDir, "controller-"+replica+".log")}
	p.health = freePort()
	// Every replica serves the conversion webhook, as in a cluster, each on a port of
	// its own behind env.webhook.
	p.webhook = freePort()
	args := []string{"--kubeconfig=" + kc, "--operator-namespace=" + operatorNamespace, "--server-probe=off",
		"--metrics-bind-address=0", "--health-probe-bind-address=" + p.health, "-v=2",
		"--webhook-bind-address=" + p.webhook, "--webhook-cert-hosts=localhost,127.0.0.1"}
	args = append(args, extra...)
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("controller log: %w", err)
	}
	fmt.Fprintf(f, "# %s start %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	p.cmd = exec.Command(env.controller, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting the controller: %w", err)
	}
	env.webhook.add(p.webhook)
	go func() {
		p.err = p.cmd.Wait()
		env.webhook.remove(p.webhook)
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// kill sends SIGKILL and waits until the process is gone.
func (p *controllerProcess) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// terminate sends SIGTERM, as the kubelet does, and waits up to timeout for the exit.
func (p *controllerProcess) terminate(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("controller %s did not exit within %s of SIGTERM", p.replica, timeout)
	}
}

func (p *controllerProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// freePort returns a loopback address with a port free at the time of the call.
func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// auditEvent is what the suite reads of one API server audit event.
type auditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	Stage      string `json:"stage"`
	UserAgent  string `json:"userAgent"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// replica is the controller replica that sent the request, or "" for anyone else.
func (e auditEvent) replica() string {
	if e.ImpersonatedUser == nil || e.ImpersonatedUser.Username != serviceAccount {
		return ""
	}
	if r := e.ImpersonatedUser.Extra["replica"]; len(r) == 1 {
		return r[0]
	}
	return "?"
}

func (e auditEvent) mutating() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

func (e auditEvent) resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	r := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	return r
}

// controllerRequests reads the audit log: the controller's requests since from.
func controllerRequests(t *testing.T, from time.Time) []auditEvent {
	t.Helper()
	f, err := os.Open(env.auditLog)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.replica() == "" || e.StageTimestamp.Before(from) {
			continue
		}
		// A watch is counted when it starts (it may run for minutes); any other request
		// when it completes.
		if e.Verb == "watch" && e.Stage != "ResponseStarted" || e.Verb != "watch" && e.Stage != "ResponseComplete" && e.Stage != "Panic" {
			continue
		}
		out = append(out, e)
	}
	return out
}

// summarize counts requests by replica, verb and resource, for the test log.
func summarize(events []auditEvent) string {
	counts := map[string]int{}
	for _, e := range events {
		counts[fmt.Sprintf("%s %s %s", e.replica(), e.Verb, e.resource())]++
	}
	var lines []string
	for k, v := range counts {
		lines = append(lines, k+" "+strconv.Itoa(v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
