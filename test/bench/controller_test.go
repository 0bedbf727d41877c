//go:build bench

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/cmd/controller/app"
	"github.com/llamastack/llama-stack-controller/pkg/controller"
)

// childEnv carries the JSON childSpec that puts the test binary in controller mode.
const childEnv = "LLSC_BENCH_CONTROLLER"

// addrLine prefixes the line on which the child announces its debug address.
const addrLine = "LLSC_BENCH_ADDR="

// operatorNamespace is the controller's namespace, as in artifacts/.
const operatorNamespace = "llama-stack-controller-system"

// childSpec configures the controller process.
type childSpec struct {
	Kubeconfig string        `json:"kubeconfig"`
	Workers    int           `json:"workers"`
	QPS        float64       `json:"qps"`
	Burst      int           `json:"burst"`
	Resync     time.Duration `json:"resync"`
	LogFile    string        `json:"logFile"`
	Verbosity  int           `json:"verbosity"`
	// WebhookAddr serves the CRD's conversion webhook on loopback.
	WebhookAddr string `json:"webhookAddr"`
	// ServerProbe is --server-probe: off, service or proxy.
	ServerProbe string `json:"serverProbe"`
	// HostDNS leaves name lookups to the host's resolver; without it, every lookup fails
	// at once in the process (see noClusterDNS).
	HostDNS bool `json:"hostDNS"`
}

// errNoClusterDNS is why every name lookup of the controller process fails in the bench.
var errNoClusterDNS = errors.New("no cluster DNS in the bench")

// noClusterDNS makes every DNS query of this process fail at once, the same way every
// time, without a packet sent: the Services' names of the probes in service mode resolve
// nowhere outside a cluster, and the host's resolver, asked a thousand names a minute,
// answers some with "no such host" and times out on others, so the failure's text (and
// with it the HealthCheck condition) would change from probe to probe with the machine's
// resolver rather than with the controller. The API server and the webhook are reached
// at IP addresses and need no lookup; /etc/hosts is still read.
func noClusterDNS() {
	net.DefaultResolver = &net.Resolver{
		PreferGo: true,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errNoClusterDNS
		},
	}
}

// runChild runs the controller as cmd/controller does, with app.Run, as the artifacts'
// ServiceAccount (impersonated) and with a transport that counts every request. A debug
// server on loopback, which exists only in this test binary, serves the counts, the
// controller's metrics, and the heap after a forced GC.
func runChild(specJSON string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "controller mode:", err)
		return 2
	}
	logFile, err := os.OpenFile(spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer logFile.Close()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for k, v := range map[string]string{"logtostderr": "false", "alsologtostderr": "false",
		"stderrthreshold": "FATAL", "v": strconv.Itoa(spec.Verbosity)} {
		if err := fs.Set(k, v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	klog.SetOutput(logFile)

	if !spec.HostDNS {
		noClusterDNS()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", spec.Kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.UserAgent = "llama-stack-controller/bench"
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + operatorNamespace + ":llama-stack-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"},
	}
	counter := &requestCounter{counts: map[string]int{}}
	cfg.Wrap(counter.wrap)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/requests", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(counter.report())
	})
	// RegisterMetrics is idempotent; app.Run calls it too, before its first client.
	controller.RegisterMetrics()
	mux.Handle("/metrics", promhttp.HandlerFor(controller.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/heap", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(readHeap())
	})
	mux.HandleFunc("/heap.pprof", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		_ = pprof.Lookup("heap").WriteTo(w, 0)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("%s%s\n", addrLine, ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err = app.Run(klog.NewContext(ctx, klog.NewKlogr()), cfg, app.Options{
		Workers: spec.Workers, QPS: spec.QPS, Burst: spec.Burst, ResyncPeriod: spec.Resync,
		// The Event client has limits of its own; the run's limits apply to both (at the
		// default limits, they are the defaults of both).
		EventQPS: spec.QPS, EventBurst: spec.Burst,
		OperatorNamespace: operatorNamespace, Version: "bench",
		// kwok pods run nothing: with probes on, every probe fails. In service mode (the
		// in-cluster mode) the probes go to the Services' DNS names, which resolve nowhere
		// here (noClusterDNS): a failing server, at the controller's default interval.
		ServerProbe:        spec.ServerProbe,
		MetricsBindAddress: "0",
		// The conversion webhook, as the artifacts run it: its CertManager's requests
		// (the Secret, the CRD's caBundle) count with the controller's.
		WebhookBindAddress: spec.WebhookAddr, WebhookCertMode: app.WebhookCertModeSelf,
		WebhookCertHosts: "localhost,127.0.0.1",
	})
	_ = srv.Close()
	klog.Flush()
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		return 1
	}
	return 0
}

// heapStats is the controller's heap right after two forced collections.
type heapStats struct {
	HeapAlloc   uint64 `json:"heapAlloc"`
	HeapInuse   uint64 `json:"heapInuse"`
	HeapObjects uint64 `json:"heapObjects"`
}

func readHeap() heapStats {
	// The second cycle frees what finalizers of the first released.
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return heapStats{HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse, HeapObjects: ms.HeapObjects}
}

// requestCounter counts requests by "verb resource[/subresource] code".
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	// lastChildWrite is when the last write of a child (not of a CR's status, not of an
	// Event) was answered.
	lastChildWrite time.Time
	// lastEvent is when the last Event write was answered.
	lastEvent time.Time
}

// counterReport is what the child reports of its requests.
type counterReport struct {
	Counts         map[string]int `json:"counts"`
	LastChildWrite time.Time      `json:"lastChildWrite"`
	LastEvent      time.Time      `json:"lastEvent"`
}

func (r *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		code := "error"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		what := describeRequest(req)
		q := parseKey(what)
		r.mu.Lock()
		r.counts[what+" "+code]++
		if q.mutating() && !strings.HasPrefix(q.resource, "llamastackdistributions") {
			r.lastChildWrite = time.Now()
		}
		if q.event() {
			r.lastEvent = time.Now()
		}
		r.mu.Unlock()
		return resp, err
	})
}

func (r *requestCounter) report() counterReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := counterReport{Counts: make(map[string]int, len(r.counts)), LastChildWrite: r.lastChildWrite, LastEvent: r.lastEvent}
	for k, v := range r.counts {
		out.Counts[k] = v
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// describeRequest names a request to the API server as "verb resource[/subresource]",
// with the verbs of the API server's audit log (apply for a server-side apply patch).
func describeRequest(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// /api/v1/... or /apis/<group>/<version>/...
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(req.Method) + " " + req.URL.Path
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // namespaced: <resource>[/<name>[/<subresource>]]
	}
	resource, named := "", len(parts) >= 2
	if len(parts) >= 1 {
		resource = parts[0]
	}
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	var verb string
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
			verb = "apply"
		}
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(req.Method)
	}
	return verb + " " + resource
}

// controllerProc is the running controller child process, seen from the driver.
type controllerProc struct {
	cmd     *exec.Cmd
	base    string
	logFile string
	done    chan struct{}
	waitErr error
	http    *http.Client
}

// startController starts the test binary in controller mode and returns once it
// announced its debug address.
func startController(ctx context.Context, spec childSpec) (*controllerProc, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := os.OpenFile(spec.LogFile+".stderr", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		_ = stderr.Close()
		return nil, err
	}
	p := &controllerProc{cmd: cmd, logFile: spec.LogFile, done: make(chan struct{}), http: &http.Client{Timeout: 2 * time.Minute}}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), addrLine); ok {
				addr <- a
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		p.waitErr = cmd.Wait()
		_ = stderr.Close()
		close(p.done)
	}()
	select {
	case a := <-addr:
		p.base = "http://" + a
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("the controller process exited: %v (see %s.stderr)", p.waitErr, spec.LogFile)
	case <-ctx.Done():
		_ = p.stop()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		_ = p.stop()
		return nil, errors.New("the controller process did not announce its address within 30s")
	}
}

// waitStarted waits until the controller's caches have synced and its workers run.
func (p *controllerProc) waitStarted(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(p.logFile)
		if err == nil && strings.Contains(string(data), "Starting workers") {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("the controller process exited: %v", p.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return errors.New("the controller did not start its workers within 2 minutes")
}

func (p *controllerProc) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	switch o := out.(type) {
	case io.Writer:
		_, err = io.Copy(o, resp.Body)
	case *string:
		var b []byte
		b, err = io.ReadAll(resp.Body)
		*o = string(b)
	default:
		err = json.NewDecoder(resp.Body).Decode(out)
	}
	return err
}

// snapshot is the controller's counters at one moment.
type snapshot struct {
	at             time.Time
	requests       requestCounts
	lastChildWrite time.Time
	lastEvent      time.Time
	syncs          float64
	cpuSeconds     float64
	queueDepth     float64
	// requestSeconds and requestCount are the sum and count of the controller's request
	// latencies (rest_client_request_duration_seconds, the limiter's wait included);
	// limiterSeconds the sum of the waits for its clients' rate limiters.
	requestSeconds, requestCount, limiterSeconds float64
}

func (p *controllerProc) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now()}
	var rep counterReport
	if err := p.get(ctx, "/requests", &rep); err != nil {
		return s, err
	}
	s.requests, s.lastChildWrite, s.lastEvent = rep.Counts, rep.LastChildWrite, rep.LastEvent
	var metrics string
	if err := p.get(ctx, "/metrics", &metrics); err != nil {
		return s, err
	}
	s.syncs = metricSum(metrics, "llama_stack_controller_syncs_total", "")
	s.cpuSeconds = metricSum(metrics, "process_cpu_seconds_total", "")
	s.queueDepth = metricSum(metrics, "workqueue_depth", `name="llama-stack-controller"`)
	s.requestSeconds = metricSum(metrics, "rest_client_request_duration_seconds_sum", "")
	s.requestCount = metricSum(metrics, "rest_client_request_duration_seconds_count", "")
	s.limiterSeconds = metricSum(metrics, "rest_client_rate_limiter_duration_seconds_sum", "")
	return s, nil
}

func (p *controllerProc) heap(ctx context.Context) (heapStats, error) {
	var h heapStats
	err := p.get(ctx, "/heap", &h)
	return h, err
}

// heapProfile writes the controller's heap profile (after a GC) to path.
func (p *controllerProc) heapProfile(ctx context.Context, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return p.get(ctx, "/heap.pprof", io.Writer(f))
}

// stop sends SIGTERM and waits for the process; it is killed after 30 seconds.
func (p *controllerProc) stop() error {
	select {
	case <-p.done:
		return p.waitErr
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("the controller did not stop within 30s of SIGTERM; killed")
	}
}

// metricSum adds the values of every sample of the named metric in the Prometheus text
// format whose labels contain filter.
func metricSum(text, name, filter string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue // another metric sharing the prefix
		}
		if filter != "" && !strings.Contains(rest, filter) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}
