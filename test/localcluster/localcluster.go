// Package localcluster starts a real Kubernetes control plane on the loopback
// interface for end-to-end tests: etcd, kube-apiserver, kube-controller-manager
// and kube-scheduler, with kwok acting as the kubelet of fake nodes (Pods get
// scheduled and reported Running and Ready, but no container ever runs).
//
// The binaries are built from the tool modules in hack/cluster by
// hack/cluster/build.sh (see BuildBinaries); this package only runs them, so
// the controller's own module does not depend on k8s.io/kubernetes or etcd.
//
// Every cluster has its own temporary run dir (PKI, etcd data, kubeconfigs,
// one log file per component) and its own ports, so several clusters can run
// side by side, in one process or in several.
package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Component names, as used by LogTail, PIDs and in errors.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kwok                  = "kwok"
)

// Components lists the components in the order they are started.
var Components = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, Kwok}

// Port names, as used by Ports.
const (
	PortEtcdClient = "etcd-client"
	PortEtcdPeer   = "etcd-peer"
	PortAPIServer  = KubeAPIServer
	PortKCM        = KubeControllerManager
	PortScheduler  = KubeScheduler
)

// Fixed address ranges of every cluster. They are only values in objects
// (ClusterIPs, pod IPs): nothing listens on them.
const (
	ServiceClusterIPRange = "10.96.0.0/16"
	PodCIDR               = "10.244.0.0/16"
)

// FakeNodeAnnotation is the annotation by which kwok picks the nodes it
// fakes; FakeNodeLabel is set on each of them too.
const (
	FakeNodeAnnotation = "kwok.x-k8s.io/node"
	FakeNodeLabel      = "type"
	FakeNodeValue      = "fake"
	FakeNodeLabelValue = "kwok"
)

// Options configure Start. BinDir and StagesFile are required; BuildBinaries
// returns both.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler and kwok.
	BinDir string
	// StagesFile is the kwok Stage configuration written by the build.
	StagesFile string
	// Nodes is the number of fake nodes (default 1). They are named
	// kwok-node-0, kwok-node-1, ... and have 32 CPU, 256Gi and 110 pods.
	Nodes int
	// Logs, if not nil, receives a copy of every component's output, each
	// line prefixed with "[component] ". The log files in the run dir are
	// written either way.
	Logs io.Writer
	// LogDir, if set, receives a copy of the component log files
	// (<component>.log) when the cluster stops or fails to start, before
	// the run dir is removed. Use one LogDir per cluster.
	LogDir string
	// RunDirParent is where the run dir is created (default os.TempDir()).
	RunDirParent string
	// KeepRunDir keeps the run dir (and its logs) after Stop or a failed
	// Start.
	KeepRunDir bool
	// StartTimeout bounds Start (default 90s).
	StartTimeout time.Duration
	// Extra flags per component, appended after the defaults (for a flag
	// given twice, the last one wins).
	ExtraEtcdArgs              []string
	ExtraAPIServerArgs         []string
	ExtraControllerManagerArgs []string
	ExtraSchedulerArgs         []string
	ExtraKwokArgs              []string
	// ClusterDialer, if set, carries kube-apiserver's connections into the cluster
	// network: its service, pod and node proxies. The API server sends them, through an
	// egress selector (as to a konnectivity server), to an HTTP CONNECT proxy on a Unix
	// socket in the run dir, which dials addr ("podIP:port") with this function. kwok
	// pods run nothing, so without it those proxies lead nowhere.
	ClusterDialer func(ctx context.Context, addr string) (net.Conn, error)
}

// Cluster is a running control plane. Stop it when done.
type Cluster struct {
	opts       Options
	runDir     string
	logsDir    string
	kubeconfig string
	pki        *pki
	ports      map[string]int
	restConfig *rest.Config

	mu           sync.Mutex
	procs        []*process
	egress       *egressProxy
	releasePorts func()
	stopped      bool
	stopErr      error
}

// ComponentError is returned by Start when a component fails to start or
// become ready; it carries the end of that component's log.
type ComponentError struct {
	Component string
	Err       error
	LogTail   string
}

func (e *ComponentError) Error() string {
	if e.LogTail == "" {
		return fmt.Sprintf("%s: %v (log is empty)", e.Component, e.Err)
	}
	return fmt.Sprintf("%s: %v\n--- last lines of the %s log ---\n%s\n---", e.Component, e.Err, e.Component, e.LogTail)
}

func (e *ComponentError) Unwrap() error { return e.Err }

// errPortTaken marks a start that failed because a picked port was taken by
// someone else in the meantime; Start then retries with other ports.
var errPortTaken = errors.New("a port was taken by another process")

const (
	defaultStartTimeout = 90 * time.Second
	logTailLines        = 40
	pollInterval        = 100 * time.Millisecond
	startAttempts       = 3
)

// Start starts a cluster and returns when it is usable: the apiserver is
// ready, the controller-manager and scheduler are healthy, every fake node is
// Ready and the default ServiceAccount of namespace default exists. ctx bounds
// the start only; the cluster runs until Stop. On failure everything started
// is stopped, the run dir is removed (unless KeepRunDir) and the error
// includes the end of the failing component's log (see ComponentError).
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	if opts.Nodes < 0 {
		return nil, fmt.Errorf("localcluster: Nodes must not be negative")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	if opts.BinDir == "" || opts.StagesFile == "" {
		return nil, fmt.Errorf("localcluster: BinDir and StagesFile are required (see BuildBinaries)")
	}
	for _, name := range Components {
		if fi, err := os.Stat(filepath.Join(opts.BinDir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("localcluster: no executable %s in %s", name, opts.BinDir)
		}
	}
	if _, err := os.Stat(opts.StagesFile); err != nil {
		return nil, fmt.Errorf("localcluster: stages file: %w", err)
	}
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		var c *Cluster
		c, err = start(ctx, opts)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

func start(parent context.Context, opts Options) (c *Cluster, err error) {
	ctx, cancel := context.WithTimeout(parent, opts.StartTimeout)
	defer cancel()

	runDir, err := os.MkdirTemp(opts.RunDirParent, "llsc-cluster-")
	if err != nil {
		return nil, fmt.Errorf("localcluster: run dir: %w", err)
	}
	c = &Cluster{
		opts:       opts,
		runDir:     runDir,
		logsDir:    filepath.Join(runDir, "logs"),
		kubeconfig: filepath.Join(runDir, "kubeconfig"),
	}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (and stopping: %v)", err, stopErr)
			}
			if opts.KeepRunDir {
				err = fmt.Errorf("%w (run dir kept: %s)", err, runDir)
			}
			c = nil
		}
	}()
	if err := os.MkdirAll(c.logsDir, 0o700); err != nil {
		return c, err
	}

	portList, release, err := reservePorts(5)
	if err != nil {
		return c, fmt.Errorf("localcluster: %w", err)
	}
	c.releasePorts = release
	c.ports = map[string]int{
		PortEtcdClient: portList[0],
		PortEtcdPeer:   portList[1],
		PortAPIServer:  portList[2],
		PortKCM:        portList[3],
		PortScheduler:  portList[4],
	}

	if c.pki, err = generatePKI(filepath.Join(runDir, "pki")); err != nil {
		return c, fmt.Errorf("localcluster: PKI: %w", err)
	}
	c.restConfig = &rest.Config{
		Host: c.apiServerURL(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.pki.ca.CertPEM,
			CertData: c.pki.admin.CertPEM,
			KeyData:  c.pki.admin.KeyPEM,
		},
		QPS:   50,
		Burst: 100,
	}
	if err := c.writeConfigFiles(); err != nil {
		return c, fmt.Errorf("localcluster: %w", err)
	}

	// etcd
	if err := c.startComponent(Etcd, c.etcdArgs()); err != nil {
		return c, err
	}
	etcdHealth := "http://127.0.0.1:" + strconv.Itoa(c.ports[PortEtcdClient]) + "/health"
	plain := &http.Client{Timeout: 2 * time.Second}
	if err := c.waitFor(ctx, Etcd, "etcd /health", func(ctx context.Context) error {
		return httpCheck(ctx, plain, etcdHealth, `"health":"true"`)
	}); err != nil {
		return c, err
	}

	// kube-apiserver
	apiServerArgs := c.apiServerArgs()
	if opts.ClusterDialer != nil {
		socket := c.path(egressSocketFile)
		egress, err := startEgressProxy(socket, opts.ClusterDialer)
		if err != nil {
			return c, fmt.Errorf("localcluster: %w", err)
		}
		c.mu.Lock()
		c.egress = egress
		c.mu.Unlock()
		if err := os.WriteFile(c.path(egressConfigFile), []byte(egressSelectorConfig(socket)), 0o600); err != nil {
			return c, fmt.Errorf("localcluster: %w", err)
		}
		apiServerArgs = append(apiServerArgs, "--egress-selector-config-file="+c.path(egressConfigFile))
	}
	if err := c.startComponent(KubeAPIServer, apiServerArgs); err != nil {
		return c, err
	}
	adminHTTP, err := c.adminHTTPClient()
	if err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, KubeAPIServer, "kube-apiserver /readyz", func(ctx context.Context) error {
		return httpCheck(ctx, adminHTTP, c.apiServerURL()+"/readyz", "ok")
	}); err != nil {
		return c, err
	}

	// The rest need only the apiserver.
	for _, comp := range []struct {
		name string
		args []string
	}{
		{KubeControllerManager, c.controllerManagerArgs()},
		{KubeScheduler, c.schedulerArgs()},
		{Kwok, c.kwokArgs()},
	} {
		if err := c.startComponent(comp.name, comp.args); err != nil {
			return c, err
		}
	}

	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return c, fmt.Errorf("localcluster: client: %w", err)
	}
	nodeNames := make([]string, opts.Nodes)
	for i := range nodeNames {
		nodeNames[i] = fmt.Sprintf("kwok-node-%d", i)
		node := fakeNode(nodeNames[i], i)
		if err := c.waitFor(ctx, KubeAPIServer, "creating node "+node.Name, func(ctx context.Context) error {
			return createNode(ctx, client, node)
		}); err != nil {
			return c, err
		}
	}

	// A client certificate is required by neither health endpoint; their
	// serving certificates are self-signed by the components.
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health check
	}}
	defer insecure.CloseIdleConnections()
	for _, comp := range []struct{ name, port string }{
		{KubeControllerManager, PortKCM},
		{KubeScheduler, PortScheduler},
	} {
		url := "https://127.0.0.1:" + strconv.Itoa(c.ports[comp.port]) + "/healthz"
		if err := c.waitFor(ctx, comp.name, comp.name+" /healthz", func(ctx context.Context) error {
			return httpCheck(ctx, insecure, url, "ok")
		}); err != nil {
			return c, err
		}
	}
	if err := c.waitFor(ctx, Kwok, "fake nodes Ready", func(ctx context.Context) error {
		return nodesReady(ctx, client, nodeNames)
	}); err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, KubeControllerManager, "ServiceAccount default/default", func(ctx context.Context) error {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", getOptions)
		return err
	}); err != nil {
		return c, err
	}
	return c, nil
}

func (c *Cluster) apiServerURL() string {
	return "https://127.0.0.1:" + strconv.Itoa(c.ports[PortAPIServer])
}

// adminHTTPClient is an HTTP client that trusts the cluster CA and presents
// the admin client certificate.
func (c *Cluster) adminHTTPClient() (*http.Client, error) {
	cert, err := tls.X509KeyPair(c.pki.admin.CertPEM, c.pki.admin.KeyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.pki.ca.cert)
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}, nil
}

// httpCheck GETs url and wants status 200 and a body containing want.
func httpCheck(ctx context.Context, client *http.Client, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// startComponent starts one component with its log in the run dir.
func (c *Cluster) startComponent(name string, args []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("localcluster: cluster stopped")
	}
	p, err := startProcess(name, filepath.Join(c.opts.BinDir, name), args, c.logPath(name), c.opts.Logs)
	if err != nil {
		return c.componentError(name, err)
	}
	c.procs = append(c.procs, p)
	return nil
}

// Restart stops one component and starts it again with the same flags, as a crash or
// an upgrade would: with SIGTERM (graceful; SIGKILL after 15 s) or, when kill is true,
// with SIGKILL at once. It returns once the component is serving again (kube-apiserver:
// /readyz; etcd: /health; the others as soon as they run).
func (c *Cluster) Restart(ctx context.Context, component string, kill bool) error {
	c.mu.Lock()
	idx := -1
	for i, p := range c.procs {
		if p.name == component {
			idx = i
		}
	}
	if c.stopped || idx < 0 {
		c.mu.Unlock()
		return fmt.Errorf("localcluster: no running %s", component)
	}
	p := c.procs[idx]
	c.procs = append(c.procs[:idx:idx], c.procs[idx+1:]...)
	c.mu.Unlock()

	if kill {
		p.signal(syscall.SIGKILL)
	} else {
		p.signal(syscall.SIGTERM)
	}
	if err := p.wait(stopTimeout); err != nil {
		return fmt.Errorf("localcluster: restart: %w", err)
	}
	if err := c.startComponent(component, p.args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	switch component {
	case KubeAPIServer:
		adminHTTP, err := c.adminHTTPClient()
		if err != nil {
			return err
		}
		defer adminHTTP.CloseIdleConnections()
		return c.waitFor(ctx, KubeAPIServer, "kube-apiserver /readyz", func(ctx context.Context) error {
			return httpCheck(ctx, adminHTTP, c.apiServerURL()+"/readyz", "ok")
		})
	case Etcd:
		plain := &http.Client{Timeout: 2 * time.Second}
		url := "http://127.0.0.1:" + strconv.Itoa(c.ports[PortEtcdClient]) + "/health"
		return c.waitFor(ctx, Etcd, "etcd /health", func(ctx context.Context) error {
			return httpCheck(ctx, plain, url, `"health":"true"`)
		})
	}
	return nil
}

// waitFor polls check until it succeeds. It fails when ctx ends (blaming
// component) or when any started component exits (blaming that one).
func (c *Cluster) waitFor(ctx context.Context, component, what string, check func(context.Context) error) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		checkCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lastErr := check(checkCtx)
		cancel()
		if lastErr == nil {
			return nil
		}
		c.mu.Lock()
		procs := append([]*process(nil), c.procs...)
		c.mu.Unlock()
		for _, p := range procs {
			if p.exited() {
				return c.componentError(p.name, fmt.Errorf("exited (%s) while waiting for %s", p.exitDescription(), what))
			}
		}
		select {
		case <-ctx.Done():
			return c.componentError(component, fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), lastErr))
		case <-ticker.C:
		}
	}
}

// componentError wraps err with the end of component's log, and marks it
// errPortTaken when the log says a port was in use.
func (c *Cluster) componentError(component string, err error) error {
	tail := c.LogTail(component, logTailLines)
	if strings.Contains(tail, "address already in use") {
		err = fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return &ComponentError{Component: component, Err: err, LogTail: tail}
}

func (c *Cluster) logPath(component string) string {
	return filepath.Join(c.logsDir, component+".log")
}

// Kubeconfig returns the path of the admin kubeconfig (user local-admin in
// group system:masters; certificates embedded) in the run dir.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// RESTConfig returns a new copy of the admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// RunDir returns the run dir: pki/, etcd/, logs/<component>.log and the
// kubeconfigs.
func (c *Cluster) RunDir() string { return c.runDir }

// APIServerURL returns https://127.0.0.1:<port> of the apiserver.
func (c *Cluster) APIServerURL() string { return c.apiServerURL() }

// Ports returns the loopback ports of the cluster by name (PortEtcdClient,
// PortEtcdPeer, PortAPIServer, PortKCM, PortScheduler). kwok listens on none.
func (c *Cluster) Ports() map[string]int {
	out := make(map[string]int, len(c.ports))
	for k, v := range c.ports {
		out[k] = v
	}
	return out
}

// PIDs returns the process ids of the components started, by component.
func (c *Cluster) PIDs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.procs))
	for _, p := range c.procs {
		out[p.name] = p.cmd.Process.Pid
	}
	return out
}

// LogTail returns the last n lines of a component's log ("" if there is
// none). After Stop it reads the copy in Options.LogDir, if any.
func (c *Cluster) LogTail(component string, n int) string {
	if t := tailFile(c.logPath(component), n); t != "" {
		return t
	}
	if c.opts.LogDir != "" {
		return tailFile(filepath.Join(c.opts.LogDir, component+".log"), n)
	}
	return ""
}

// Stop sends SIGTERM to every component (etcd last, once the others have
// exited), sends SIGKILL to any that has not exited 15 s later, copies the
// logs to Options.LogDir if set, and removes the run dir unless
// Options.KeepRunDir. Calling it again returns the first result.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true

	var errs []error
	var first, last []*process
	for _, p := range c.procs {
		if p.name == Etcd {
			last = append(last, p)
		} else {
			first = append(first, p)
		}
	}
	for _, group := range [][]*process{first, last} {
		for _, p := range group {
			p.signal(syscall.SIGTERM)
		}
		deadline := time.Now().Add(stopTimeout)
		for _, p := range group {
			if err := p.wait(time.Until(deadline)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if c.egress != nil {
		c.egress.close()
	}
	if c.releasePorts != nil {
		c.releasePorts()
	}
	if c.opts.LogDir != "" {
		if err := copyLogs(c.logsDir, c.opts.LogDir); err != nil {
			errs = append(errs, fmt.Errorf("copying logs: %w", err))
		}
	}
	if !c.opts.KeepRunDir {
		if err := os.RemoveAll(c.runDir); err != nil {
			errs = append(errs, fmt.Errorf("removing run dir: %w", err))
		}
	}
	if len(errs) > 0 {
		c.stopErr = fmt.Errorf("localcluster: stop: %w", errors.Join(errs...))
	}
	return c.stopErr
}

// copyLogs copies the *.log files of src into dst.
func copyLogs(src, dst string) error {
	entries, err := os.ReadDir(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
