//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// A fake llama-stack server that starts and behaves like the real one towards its
// config file. kwok pods run nothing, so when kube-apiserver dials a pod of a CR
// registered with fakeServers.readConfig, the server that pod would run is started here
// from the pod itself, as the kubelet, the image and the server would: the server
// container's environment (plain values, and Secret and ConfigMap keys read through the
// API, a missing one refusing the start as the kubelet refuses the container), the
// server version taken from the image tag, and the config file that version's server
// is started with:
//   - llama-stack, up to 0.7.x (which the controller starts with /bin/sh -c): the file
//     at $LLAMA_STACK_CONFIG.
//   - OGX, the server renamed, from 0.8.0: the image's entrypoint (no command, or the
//     entrypoint itself) runs `ogx stack run $RUN_CONFIG_PATH` when that file exists;
//     a command may run `ogx stack run <config>` (from 1.0 also `ogx run`). OGX reads
//     no LLAMA_STACK_* variable, and an OGX_CONFIG naming another file than the CLI is
//     given is refused (ogxStart). It listens on the CLI's --port, else $OGX_PORT, else
//     8321 (from 1.0 the config's server.port before that), and a dial of another
//     port fails (ogxPort). Any other command is the user's, and started as a
//     llama-stack one.
//
// The file is read from the ConfigMap (or Secret) volume mounted there (items and subPath
// honoured), its ${env...} expressions resolved as llama-stack's replace_env_vars does
// (unchanged in OGX). Without a file (no $LLAMA_STACK_CONFIG, or the entrypoint without
// the file at $RUN_CONFIG_PATH) the server runs the config bundled in the image, which
// the fake does not know: it lists no providers, and llamaServer.bundled says so. An
// API the version's Api enum lacks, named in the file's apis or providers, stops the
// server as it stops the real one: "API 'eval' does not exist" (checkAPIs). A server
// that cannot start is a failed dial, like a pod whose container never runs, and
// llamaServers.failure is why.
//
// It answers /v1/health, /v1/version (the image's version) and /v1/providers as
// llama-stack 0.7 and OGX 0.8 do (core/providers.py): every provider of the file's
// providers map, whatever the apis list says (the server starts them all), except those
// whose provider_id resolved to nothing; each config with the fields the server
// redacts replaced by "********", and the health every provider without a health check
// reports.

// llamaServers are the fake servers started for one CR, by pod.
type llamaServers struct {
	mu      sync.Mutex
	started map[types.UID]*llamaServer
	// failed is the last reason each pod's server could not start, by pod name.
	failed map[string]error
}

// llamaServer is the server one pod runs.
type llamaServer struct {
	pod     string
	version string
	// port is the port an OGX server listens on; 0 on the llama-stack line, where the
	// fake does not model it (the server takes any port it is dialled on).
	port int
	// configPath is the config file the server runs, "" for the image's bundled config
	// (see bundled).
	configPath string
	// config is the config file after env substitution: what the server runs with,
	// secrets included, nil for the bundled config. The test reads it; the server
	// never serves it unredacted.
	config    map[string]any
	providers []llamaProvider
	handler   http.Handler
	// tls is the server's TLS when it serves HTTPS (serverTLS); nil for plain HTTP.
	tls *tls.Config
	// certFile is where it read its certificate from ("" for plain HTTP).
	certFile string
}

// bundled reports whether the server runs the config bundled in its image, not a file
// of the pod: the fake does not know that config, and serves no providers.
func (s *llamaServer) bundled() bool { return s.configPath == "" }

// llamaProvider is one element of /v1/providers' data, as served (config redacted).
type llamaProvider struct {
	API          string         `json:"api"`
	ProviderID   string         `json:"provider_id"`
	ProviderType string         `json:"provider_type"`
	Config       map[string]any `json:"config"`
	Health       map[string]any `json:"health"`
}

// readConfig makes the pods of the CR ns/name run the fake llama-stack server built from
// their spec, until the test ends. The CR's Service host must not also be set with set.
func (f *fakeServers) readConfig(t *testing.T, ns, name string) *llamaServers {
	t.Helper()
	s := &llamaServers{started: map[types.UID]*llamaServer{}, failed: map[string]error{}}
	key := ns + "/" + name
	f.mu.Lock()
	if f.fromConfig == nil {
		f.fromConfig = map[string]*llamaServers{}
	}
	f.fromConfig[key] = s
	f.mu.Unlock()
	t.Cleanup(func() {
		f.mu.Lock()
		delete(f.fromConfig, key)
		f.mu.Unlock()
	})
	return s
}

// server is the server the named pod runs, if it started.
func (s *llamaServers) server(pod string) (*llamaServer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, srv := range s.started {
		if srv.pod == pod {
			return srv, true
		}
	}
	return nil, false
}

// failure is why the named pod's server last failed to start, nil if it never did.
func (s *llamaServers) failure(pod string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed[pod]
}

// dial connects to the server of pod on port, starting it from the pod's spec on the
// first connection (a server reads its config once, when it starts).
func (s *llamaServers) dial(ctx context.Context, pod *corev1.Pod, port string) (net.Conn, error) {
	s.mu.Lock()
	srv, ok := s.started[pod.UID]
	s.mu.Unlock()
	if !ok {
		var err error
		srv, err = startLlama(ctx, pod, port)
		s.mu.Lock()
		if err != nil {
			s.failed[pod.Name] = err
			s.mu.Unlock()
			return nil, err
		}
		delete(s.failed, pod.Name)
		if earlier, ok := s.started[pod.UID]; ok {
			srv = earlier // another connection started it meanwhile
		} else {
			s.started[pod.UID] = srv
		}
		s.mu.Unlock()
	}
	return serveOneConnection(ctx, srv.handler, srv.tls)
}

// serveOneConnection serves h on a loopback listener that accepts one connection, and
// returns the client end of that connection; over TLS when tlsConfig is set. Keep-alives
// are off: each request is a new dial, so a pod replaced under the same IP is never
// answered by its predecessor.
func serveOneConnection(ctx context.Context, h http.Handler, tlsConfig *tls.Config) (net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	srv.SetKeepAlivesEnabled(false)
	var served net.Listener = oneAccept{ln}
	if tlsConfig != nil {
		served = tls.NewListener(served, tlsConfig)
	}
	go func() { _ = srv.Serve(served) }()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return conn, nil
}

// oneAccept closes its listener after the first connection; the server goes on serving
// that connection and stops accepting.
type oneAccept struct{ net.Listener }

func (o oneAccept) Accept() (net.Conn, error) {
	c, err := o.Listener.Accept()
	_ = o.Listener.Close()
	return c, err
}

// startLlama starts the server pod runs, listening on port, or says why it cannot start.
func startLlama(ctx context.Context, pod *corev1.Pod, port string) (*llamaServer, error) {
	if pod.Status.Phase != corev1.PodRunning {
		return nil, fmt.Errorf("fake llama-stack server: pod %s is %s", pod.Name, pod.Status.Phase)
	}
	ctr, err := containerListening(pod, port)
	if err != nil {
		return nil, err
	}
	environ, err := containerEnv(ctx, pod, ctr)
	if err != nil {
		return nil, err
	}
	version, err := imageVersion(ctr.Image)
	if err != nil {
		return nil, err
	}
	start, known, err := ogxStart(ctx, pod, ctr, version, environ)
	if !known {
		start, err = llamaStackStart(ctx, pod, ctr, environ)
	}
	if err != nil {
		return nil, err
	}
	srv := &llamaServer{pod: pod.Name, version: version, configPath: start.path, providers: []llamaProvider{}}
	srv.handler = http.HandlerFunc(srv.serveHTTP)
	if start.path != "" { // else the image's bundled config, which the fake does not know
		if srv.config, srv.providers, err = runConfig(start, environ); err != nil {
			return nil, err
		}
		if err := checkAPIs(srv.config, version); err != nil {
			return nil, fmt.Errorf("fake llama-stack server: %s: %w", start.path, err)
		}
	}
	if err := srv.serverTLS(ctx, pod, ctr, start, environ); err != nil {
		return nil, err
	}
	if start.ogx {
		if srv.port, err = ogxPort(version, start.port, environ, srv.config); err != nil {
			return nil, err
		}
		if strconv.Itoa(srv.port) != port {
			return nil, fmt.Errorf("fake llama-stack server: pod %s: the server listens on port %d, not %s: connection refused", pod.Name, srv.port, port)
		}
	}
	return srv, nil
}

// serverTLS loads the certificate the server serves HTTPS with, as each start reads it:
// the uvicorn the controller's script starts for llama-stack 0.3 to 0.7 from
// UVICORN_SSL_CERTFILE and _KEYFILE (uvicorn's own variables; the config's keys are not
// read there), every server its CLI starts (OGX, llama-stack's image entrypoint and
// the older starts) from the config's server.tls_certfile and tls_keyfile. A named file
// the container does not have, or a pair that does not load, stops the server.
func (s *llamaServer) serverTLS(ctx context.Context, pod *corev1.Pod, c *corev1.Container, start serverStart, environ map[string]string) error {
	var cert, key string
	script := strings.Join(slices.Concat(c.Command, c.Args), " ")
	if !start.ogx && atLeast(s.version, 0, 3) && strings.Contains(script, "exec uvicorn ") {
		cert, key = environ["UVICORN_SSL_CERTFILE"], environ["UVICORN_SSL_KEYFILE"]
	} else if srvCfg, ok := s.config["server"].(map[string]any); ok {
		cert, _ = srvCfg["tls_certfile"].(string)
		key, _ = srvCfg["tls_keyfile"].(string)
	}
	if cert == "" || key == "" {
		return nil
	}
	certPEM, err := mountedFile(ctx, pod, c, cert)
	if err != nil {
		return fmt.Errorf("fake llama-stack server: the certificate: %w", err)
	}
	keyPEM, err := mountedFile(ctx, pod, c, key)
	if err != nil {
		return fmt.Errorf("fake llama-stack server: the key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("fake llama-stack server: ssl.SSLError loading %s and %s: %w", cert, key, err)
	}
	s.tls, s.certFile = &tls.Config{Certificates: []tls.Certificate{pair}}, cert
	return nil
}

// runConfig is the config file a server starts with after env substitution, and the
// providers it lists.
func runConfig(start serverStart, environ map[string]string) (map[string]any, []llamaProvider, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(start.raw, &doc); err != nil {
		return nil, nil, fmt.Errorf("fake llama-stack server: %s: %w", start.path, err)
	}
	resolved, err := replaceEnvVars(doc, "", environ)
	if err != nil {
		return nil, nil, fmt.Errorf("fake llama-stack server: %s: %w", start.path, err)
	}
	config, ok := resolved.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("fake llama-stack server: %s is not a mapping", start.path)
	}
	providers, err := listProviders(config)
	if err != nil {
		return nil, nil, fmt.Errorf("fake llama-stack server: %s: %w", start.path, err)
	}
	return config, providers, nil
}

// apiChanges is the Api enum of each server line (llama_stack_api/datatypes.py, from
// 0.8 ogx_api/datatypes.py), as the changes from the line before; the fake's own table,
// not the controller's. Read at llamastack/llama-stack's tags v0.3.0 to v0.8.0; 1.0
// from its release notes (#5291 removed safety and shields) and a 1.x starter config
// (skills); 1.5 inferred from a later datatypes.py (systemone, whose release is not
// known, with containers and container_runtime); 2.0 from its release notes (tools
// retired).
var apiChanges = []struct {
	major, minor int
	add, remove  []string
}{
	{0, 3, []string{"providers", "inference", "safety", "agents", "batches", "vector_io", "datasetio", "scoring", "eval",
		"post_training", "tool_runtime", "telemetry", "models", "shields", "vector_stores", "datasets", "scoring_functions",
		"benchmarks", "tool_groups", "files", "prompts", "conversations", "inspect"}, nil},
	{0, 4, []string{"file_processors", "connectors", "admin"}, []string{"telemetry"}},
	{0, 7, []string{"responses"}, []string{"agents", "post_training"}},
	{0, 8, []string{"messages", "interactions"}, []string{"datasetio", "scoring", "eval", "datasets", "scoring_functions", "benchmarks"}},
	{1, 0, []string{"skills"}, []string{"safety", "shields"}},
	{1, 5, []string{"systemone", "systemone_models", "containers", "container_runtime"}, nil},
	{2, 0, nil, []string{"tool_runtime", "tool_groups"}},
}

// apiEnum is the Api enum of server version, nil before 0.3 (older configs are not
// checked).
func apiEnum(version string) map[string]bool {
	var enum map[string]bool
	for _, c := range apiChanges {
		if !atLeast(version, c.major, c.minor) {
			break
		}
		if enum == nil {
			enum = map[string]bool{}
		}
		for _, a := range c.add {
			enum[a] = true
		}
		for _, a := range c.remove {
			delete(enum, a)
		}
	}
	return enum
}

// checkAPIs stops a server at an API its version lacks, as Api(name) does when the
// server starts: the keys of providers first (resolver.py), then the apis list
// (server.py), a name matching a member after lowercasing and "-" to "_". External
// APIs (external_apis_dir) are not modelled.
func checkAPIs(config map[string]any, version string) error {
	enum := apiEnum(version)
	if enum == nil {
		return nil
	}
	var names []string
	if byAPI, ok := config["providers"].(map[string]any); ok {
		names = slices.Sorted(maps.Keys(byAPI))
	}
	if apis, ok := config["apis"].([]any); ok {
		for _, a := range apis {
			names = append(names, fmt.Sprint(a))
		}
	}
	for _, name := range names {
		if !enum[strings.ReplaceAll(strings.ToLower(name), "-", "_")] {
			return fmt.Errorf("API '%s' does not exist. Use Api.add() to register new APIs.", name)
		}
	}
	return nil
}

// serverStart is the config file a server starts with: its path in the container and
// its content; no path for the image's bundled config. An OGX server (ogx) is also
// given the --port of its CLI, if any.
type serverStart struct {
	path string
	raw  []byte
	ogx  bool
	port string
}

// ogxPort is the port an OGX server listens on: the CLI's --port, else $OGX_PORT, else
// 8321 (0.8.0: cli/stack/run.py takes `args.port or config.server.port`, and args.port
// defaults to $OGX_PORT or 8321). From 1.0 (1.x's run.py; the release that changed
// it is not known) the config's server.port comes before 8321, and an empty
// $OGX_PORT is unset. The bundled config's port is taken to be 8321, as upstream's are.
func ogxPort(version, flag string, environ map[string]string, config map[string]any) (int, error) {
	if flag != "" {
		return strconv.Atoi(flag) // checked by parseOGXRun
	}
	envPort, set := environ["OGX_PORT"]
	if atLeast(version, 1, 0) && envPort == "" {
		set = false
	}
	if set {
		n, err := strconv.Atoi(envPort)
		if err != nil {
			return 0, fmt.Errorf("fake llama-stack server: ogx stack run: OGX_PORT: invalid literal for int() with base 10: '%s'", envPort)
		}
		return n, nil
	}
	if server, ok := config["server"].(map[string]any); ok && atLeast(version, 1, 0) && server["port"] != nil {
		switch n := server["port"].(type) {
		case float64: // as the file has it
			if n == float64(int(n)) {
				return int(n), nil
			}
		case int64: // from an ${env...}
			return int(n), nil
		}
		return 0, fmt.Errorf("fake llama-stack server: server.port is %v, which the fake does not read as a port", server["port"])
	}
	return 8321, nil
}

// llamaStackStart is how the controller starts a llama-stack server (up to 0.7.x, and
// any command the fake does not know on a later image): with the file at
// $LLAMA_STACK_CONFIG, or without the variable the image's bundled config.
func llamaStackStart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, environ map[string]string) (serverStart, error) {
	file, ok := environ["LLAMA_STACK_CONFIG"]
	if !ok {
		return serverStart{}, nil
	}
	raw, err := mountedFile(ctx, pod, c, file)
	if err != nil {
		return serverStart{}, err
	}
	return serverStart{path: file, raw: raw}, nil
}

// ogxEntrypoint is the ENTRYPOINT of the OGX images (containers/Containerfile, from 0.8.0).
const ogxEntrypoint = "/usr/local/bin/ogx-entrypoint.sh"

// ogxStart is how an OGX image (from 0.8.0, the server renamed) starts the server,
// known false for a llama-stack image or a command the fake does not know (the
// user's). The image's entrypoint runs `ogx stack run "$RUN_CONFIG_PATH" "$@"` when
// that file exists, else `ogx stack run "$DISTRO_NAME" "$@"`: the bundled config. The
// CLI sets OGX_CONFIG, which the server reads, to the file it runs; OGX reads no
// LLAMA_STACK_* variable.
//
// The CLI overwrites an OGX_CONFIG the pod sets, so one naming something other than
// what the CLI is given (RUN_CONFIG_PATH through the entrypoint) changes nothing in the
// real server; but that pod spec says two things, which the fake refuses so that a
// test sees it.
func ogxStart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, version string, environ map[string]string) (serverStart, bool, error) {
	if !atLeast(version, 0, 8) {
		return serverStart{}, false, nil
	}
	args, entrypoint, known := ogxCommand(c, version)
	if !known {
		return serverStart{}, false, nil
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "$(") }) {
		return serverStart{}, true, fmt.Errorf("fake llama-stack server: $(VAR) references in the arguments of container %s are not supported by the fake", c.Name)
	}
	given := environ["RUN_CONFIG_PATH"] // what OGX_CONFIG must name
	if entrypoint {
		config := "$DISTRO_NAME"
		if given != "" {
			_, err := mountedFile(ctx, pod, c, given)
			switch {
			case err == nil:
				config = given
			case !errors.Is(err, errNoFile):
				return serverStart{}, true, err
			}
		}
		args = append([]string{config}, args...)
	}
	run, err := parseOGXRun(args)
	if err != nil {
		return serverStart{}, true, err
	}
	if !entrypoint {
		given = run.config
	}
	if ogxConfig, ok := environ["OGX_CONFIG"]; ok && (given == "" || path.Clean(ogxConfig) != path.Clean(given)) {
		what := "RUN_CONFIG_PATH"
		if !entrypoint {
			what = "the config the command runs"
		}
		return serverStart{}, true, fmt.Errorf("fake llama-stack server: OGX_CONFIG is %q but %s is %q: the CLI sets OGX_CONFIG to the file it runs, and the pod says otherwise", ogxConfig, what, given)
	}
	start, err := ogxConfigFile(ctx, pod, c, run.config)
	start.ogx, start.port = true, run.port
	return start, true, err
}

// ogxCommand is what container c gives `ogx stack run`, if it starts the CLI a way the
// fake knows: through the image's entrypoint (no command, or the entrypoint itself),
// which puts the config before the arguments, or with `ogx stack run` or, from 1.0,
// `ogx run`.
func ogxCommand(c *corev1.Container, version string) (args []string, entrypoint, known bool) {
	argv := slices.Concat(c.Command, c.Args)
	switch {
	case len(c.Command) == 0:
		return argv, true, true
	case c.Command[0] == ogxEntrypoint:
		return argv[1:], true, true
	case path.Base(argv[0]) != "ogx":
		return nil, false, false
	case len(argv) >= 3 && argv[1] == "stack" && argv[2] == "run":
		return argv[3:], false, true
	case len(argv) >= 2 && argv[1] == "run" && atLeast(version, 1, 0):
		return argv[2:], false, true
	}
	return nil, false, false
}

// ogxRun is what `ogx stack run` parsed: the config or distribution, and --port as given.
type ogxRun struct {
	config string
	port   string
}

// parseOGXRun parses the arguments of `ogx stack run` as its argparse does: at most one
// positional (the config), --port N and --enable-ui; the fake does not model the
// other options (--providers, and --dry-run from 1.x).
func parseOGXRun(args []string) (ogxRun, error) {
	var r ogxRun
	positional := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--port" && i+1 < len(args):
			i++
			r.port = args[i]
		case strings.HasPrefix(a, "--port="):
			r.port = strings.TrimPrefix(a, "--port=")
		case a == "--enable-ui":
		case strings.HasPrefix(a, "-") || positional == 1:
			return ogxRun{}, fmt.Errorf("fake llama-stack server: ogx stack run: unrecognized arguments: %s (or not modelled by the fake)", a)
		default:
			r.config = a
			positional++
		}
	}
	if _, err := strconv.Atoi(r.port); r.port != "" && err != nil {
		return ogxRun{}, fmt.Errorf("fake llama-stack server: ogx stack run: argument --port: invalid int value: '%s'", r.port)
	}
	return r, nil
}

// ogxConfigFile is the config `ogx stack run` runs (resolve_config_or_distro): the
// file config, or the bundled config of a distribution named with no "/" and no
// ".yaml" when there is no such file.
func ogxConfigFile(ctx context.Context, pod *corev1.Pod, c *corev1.Container, config string) (serverStart, error) {
	if config == "" {
		return serverStart{}, errors.New("fake llama-stack server: ogx stack run: Config file is required")
	}
	raw, err := mountedFile(ctx, pod, c, config)
	switch {
	case err == nil:
		return serverStart{path: config, raw: raw}, nil
	case errors.Is(err, errNoFile) && !strings.Contains(config, "/") && !strings.HasSuffix(config, ".yaml"):
		return serverStart{}, nil
	}
	return serverStart{}, err
}

// atLeast reports whether version ("0.8.0") is major.minor or later.
func atLeast(version string, major, minor int) bool {
	var v [3]int
	_, _ = fmt.Sscanf(version, "%d.%d.%d", &v[0], &v[1], &v[2])
	return v[0] > major || v[0] == major && v[1] >= minor
}

func (s *llamaServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var body any
	switch {
	case r.Method != http.MethodGet:
		w.WriteHeader(http.StatusMethodNotAllowed)
		body = map[string]any{"detail": "Method Not Allowed"}
	case r.URL.Path == "/v1/health":
		body = map[string]any{"status": "OK"}
	case r.URL.Path == "/v1/version":
		body = map[string]any{"version": s.version}
	case r.URL.Path == "/v1/providers":
		body = map[string]any{"data": s.providers}
	default:
		w.WriteHeader(http.StatusNotFound)
		body = map[string]any{"detail": "Not Found"}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// containerListening is the container of pod that declares port.
func containerListening(pod *corev1.Pod, port string) (*corev1.Container, error) {
	for i, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if strconv.Itoa(int(p.ContainerPort)) == port {
				return &pod.Spec.Containers[i], nil
			}
		}
	}
	return nil, fmt.Errorf("fake llama-stack server: no container of pod %s listens on port %s", pod.Name, port)
}

// containerEnv is the container's environment as the kubelet makes it: a Secret or
// ConfigMap key that cannot be read (and is not optional) refuses the container.
func containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (map[string]string, error) {
	if len(c.EnvFrom) > 0 {
		return nil, errors.New("fake llama-stack server: envFrom is not supported by the fake")
	}
	out := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			if strings.Contains(e.Value, "$(") {
				return nil, fmt.Errorf("fake llama-stack server: $(VAR) references in %s are not supported by the fake", e.Name)
			}
			out[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			optional := ref.Optional != nil && *ref.Optional
			s, err := env.kube.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && optional {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("fake llama-stack server: container %s: %s: secret %q not found", c.Name, e.Name, ref.Name)
			}
			v, ok := s.Data[ref.Key]
			if !ok {
				if optional {
					continue
				}
				return nil, fmt.Errorf("fake llama-stack server: container %s: %s: couldn't find key %s in Secret %s/%s", c.Name, e.Name, ref.Key, pod.Namespace, ref.Name)
			}
			out[e.Name] = string(v)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			optional := ref.Optional != nil && *ref.Optional
			cm, err := env.kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && optional {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("fake llama-stack server: container %s: %s: configmap %q not found", c.Name, e.Name, ref.Name)
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				if optional {
					continue
				}
				return nil, fmt.Errorf("fake llama-stack server: container %s: %s: couldn't find key %s in ConfigMap %s/%s", c.Name, e.Name, ref.Key, pod.Namespace, ref.Name)
			}
			out[e.Name] = v
		default:
			return nil, fmt.Errorf("fake llama-stack server: %s: only secretKeyRef and configMapKeyRef are supported by the fake", e.Name)
		}
	}
	return out, nil
}

// errNoFile is a file the container does not have: no volume is mounted at its path,
// or the volume has no such file.
var errNoFile = errors.New("no such file")

// mountedFile reads the file at file in container c of pod: the ConfigMap or Secret
// volume of the innermost mount holding it, with the mount's subPath and the volume's
// items. A file the container does not have is errNoFile.
func mountedFile(ctx context.Context, pod *corev1.Pod, c *corev1.Container, file string) ([]byte, error) {
	file = path.Clean(file)
	var mount *corev1.VolumeMount
	rel := ""
	for i, m := range c.VolumeMounts {
		dir := path.Clean(m.MountPath)
		r, ok := strings.CutPrefix(file, dir+"/")
		if dir == file {
			r, ok = "", true
		}
		if ok && (mount == nil || len(dir) > len(path.Clean(mount.MountPath))) {
			mount, rel = &c.VolumeMounts[i], r
		}
	}
	if mount == nil {
		return nil, fmt.Errorf("fake llama-stack server: %s: %w: no volume is mounted there", file, errNoFile)
	}
	inVolume := path.Join(mount.SubPath, rel)
	var vol *corev1.Volume
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == mount.Name {
			vol = &pod.Spec.Volumes[i]
		}
	}
	var (
		kind, name string
		items      []corev1.KeyToPath
		optional   bool
		data       map[string][]byte
	)
	switch {
	case vol != nil && vol.ConfigMap != nil:
		src := vol.ConfigMap
		kind, name, items, optional = "configmap", src.Name, src.Items, src.Optional != nil && *src.Optional
		cm, err := env.kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, src.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && optional:
		case err != nil:
			return nil, fmt.Errorf("fake llama-stack server: volume %s: configmap %q not found", mount.Name, src.Name)
		default:
			data = map[string][]byte{}
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
		}
	case vol != nil && vol.Secret != nil:
		src := vol.Secret
		kind, name, items, optional = "secret", src.SecretName, src.Items, src.Optional != nil && *src.Optional
		s, err := env.kube.CoreV1().Secrets(pod.Namespace).Get(ctx, src.SecretName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && optional:
		case err != nil:
			return nil, fmt.Errorf("fake llama-stack server: volume %s: secret %q not found", mount.Name, src.SecretName)
		default:
			data = s.Data
		}
	default:
		return nil, fmt.Errorf("fake llama-stack server: %s: volume %s is neither a ConfigMap nor a Secret volume, which the fake does not read", file, mount.Name)
	}
	files := map[string]string{} // path in the volume -> key
	if len(items) == 0 {
		for k := range data {
			files[k] = k
		}
	}
	for _, item := range items {
		if _, ok := data[item.Key]; !ok && !optional {
			return nil, fmt.Errorf("fake llama-stack server: volume %s: %s %s has no key %s", mount.Name, kind, name, item.Key)
		}
		files[path.Clean(item.Path)] = item.Key
	}
	key, ok := files[inVolume]
	if !ok {
		return nil, fmt.Errorf("fake llama-stack server: %s: %w (volume %s, %s %s)", file, errNoFile, mount.Name, kind, name)
	}
	return data[key], nil
}

// imageVersion is the server version of an image whose tag is one (0.7.1 or v0.7.1):
// the fake cannot tell what another image runs.
func imageVersion(image string) (string, error) {
	ref, _, _ := strings.Cut(image, "@")
	tag := ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	m := regexp.MustCompile(`^v?(\d+\.\d+\.\d+)$`).FindStringSubmatch(tag)
	if m == nil {
		return "", fmt.Errorf("fake llama-stack server: the tag of image %s is not a version; the fake cannot tell the server's", image)
	}
	return m[1], nil
}

// resourceIDFields are the fields whose resolving to nothing drops a list entry, as in
// llama-stack's RESOURCE_ID_FIELDS (core/stack.py).
var resourceIDFields = []string{"vector_store_id", "model_id", "shield_id", "dataset_id", "scoring_fn_id", "benchmark_id"}

// envExpr is llama-stack's ${env.NAME}, ${env.NAME:=default} and ${env.NAME:+value}.
var envExpr = regexp.MustCompile(`\$\{env\.([A-Z0-9_]+)(?::([=+])([^}]*))?\}`)

// replaceEnvVars resolves the ${env...} expressions of v against environ as
// llama-stack's replace_env_vars does: NAME unset or empty is an error for ${env.NAME},
// the default for :=, nothing for :+ (the value when set); "~" in a value is the home
// directory; a string that changed is typed again (nothing is null, true/false
// booleans, numbers numbers). In a list, an entry whose provider_id resolves to
// __disabled__ is dropped, as is one whose resource id resolves to nothing.
func replaceEnvVars(v any, at string, environ map[string]string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, val := range v {
			r, err := replaceEnvVars(val, join(at, k), environ)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(v))
	entries:
		for i, val := range v {
			here := fmt.Sprintf("%s[%d]", at, i)
			if m, ok := val.(map[string]any); ok {
				if id, ok := m["provider_id"]; ok {
					if r, err := replaceEnvVars(id, here+".provider_id", environ); err == nil && r == "__disabled__" {
						continue
					}
				}
				for _, field := range resourceIDFields {
					if id, ok := m[field]; ok {
						if r, err := replaceEnvVars(id, here+"."+field, environ); err == nil && (r == nil || r == "") {
							continue entries
						}
					}
				}
			}
			r, err := replaceEnvVars(val, here, environ)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	case string:
		var missing string
		result := envExpr.ReplaceAllStringFunc(v, func(expr string) string {
			m := envExpr.FindStringSubmatch(expr)
			name, op, arg := m[1], m[2], m[3]
			value := environ[name]
			switch op {
			case "=":
				if value == "" {
					if arg == "" {
						return ""
					}
					value = arg
				}
			case "+":
				if value == "" || arg == "" {
					return ""
				}
				value = arg
			default:
				if value == "" && missing == "" {
					missing = name
				}
			}
			return expandUser(value, environ)
		})
		if missing != "" {
			return nil, fmt.Errorf("environment variable '%s' not set or empty at %s", missing, at)
		}
		if result == v {
			return v, nil
		}
		return typed(result), nil
	default:
		return v, nil
	}
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

// expandUser replaces a leading "~" by $HOME, as Python's os.path.expanduser does
// (without $HOME it would ask the password database, which the fake has not: "~" stays).
func expandUser(value string, environ map[string]string) string {
	home, ok := environ["HOME"]
	if !ok || (value != "~" && !strings.HasPrefix(value, "~/")) {
		return value
	}
	return strings.TrimSuffix(home, "/") + value[1:]
}

// typed is llama-stack's _convert_string_to_proper_type.
func typed(s string) any {
	if s == "" {
		return nil
	}
	switch strings.ToLower(s) {
	case "true":
		return true
	case "false":
		return false
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f
	}
	return s
}

// listProviders is /v1/providers' data: every provider of the config whose id is set,
// its config redacted.
func listProviders(config map[string]any) ([]llamaProvider, error) {
	byAPI, ok := config["providers"].(map[string]any)
	if !ok {
		return nil, errors.New("providers is not a mapping")
	}
	apis := make([]string, 0, len(byAPI))
	for api := range byAPI {
		apis = append(apis, api)
	}
	slices.Sort(apis) // the file's order, as configgen writes sorted keys
	var out []llamaProvider
	for _, api := range apis {
		list, ok := byAPI[api].([]any)
		if !ok {
			return nil, fmt.Errorf("providers.%s is not a list", api)
		}
		for i, entry := range list {
			p, ok := entry.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("providers.%s[%d] is not a mapping", api, i)
			}
			providerType, ok := p["provider_type"].(string)
			if !ok {
				return nil, fmt.Errorf("providers.%s[%d].provider_type is not a string", api, i)
			}
			if p["provider_id"] == nil {
				continue // not enabled
			}
			id, ok := p["provider_id"].(string)
			if !ok {
				id = fmt.Sprint(p["provider_id"])
			}
			cfg, _ := p["config"].(map[string]any)
			out = append(out, llamaProvider{
				API: api, ProviderID: id, ProviderType: providerType,
				Config: redact(cfg),
				Health: map[string]any{"status": "Not Implemented", "message": "Provider does not implement health check"},
			})
		}
	}
	return out, nil
}

// redact is llama-stack's redact_sensitive_fields (core/utils/config.py).
func redact(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		lower := strings.ToLower(k)
		switch {
		case slices.ContainsFunc([]string{"chunk_size_tokens", "max_tokens", "default_chunk_overlap_tokens", "max_document_tokens"},
			func(safe string) bool { return strings.Contains(lower, safe) }):
			out[k] = redactValue(v)
		case slices.ContainsFunc([]string{"api_key", "api_token", "password", "secret", "token"},
			func(s string) bool { return strings.Contains(lower, s) }):
			out[k] = "********"
		default:
			out[k] = redactValue(v)
		}
	}
	return out
}

func redactValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return redact(v)
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = redactValue(v[i])
		}
		return out
	}
	return v
}

// The fake resolves ${env...} as llama-stack 0.7's replace_env_vars (core/stack.py).
func TestFakeLlamaResolvesLikeLlamaStack(t *testing.T) {
	environ := map[string]string{"SET": "value", "EMPTY": "", "PORT": "5432", "ON": "True", "HOME": "/home/lls"}
	for _, tc := range []struct {
		in   string
		want any
		err  string
	}{
		{in: "${env.SET}", want: "value"},
		{in: "${env.UNSET}", err: "environment variable 'UNSET' not set or empty at x"},
		{in: "${env.EMPTY}", err: "environment variable 'EMPTY' not set or empty at x"},
		{in: "${env.UNSET:=fallback}", want: "fallback"},
		{in: "${env.EMPTY:=fallback}", want: "fallback"},
		{in: "${env.SET:=fallback}", want: "value"},
		{in: "${env.UNSET:=}", want: nil},
		{in: "${env.SET:+on}", want: "on"},
		{in: "${env.UNSET:+on}", want: nil},
		{in: "${env.EMPTY:+on}", want: nil},
		{in: "${env.SET:+}", want: nil},
		{in: "${env.PORT}", want: int64(5432)},
		{in: "${env.ON}", want: true},
		{in: "${env.UNSET:=0.5}", want: 0.5},
		{in: "${env.UNSET:=~/.llama}/kv.db", want: "/home/lls/.llama/kv.db"},
		{in: "http://${env.SET}:${env.PORT}", want: "http://value:5432"},
		{in: "${env.lower}", want: "${env.lower}"},
		{in: "plain 5", want: "plain 5"},
	} {
		got, err := replaceEnvVars(tc.in, "x", environ)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, tc.in)
			continue
		}
		if assert.NoError(t, err, tc.in) {
			assert.Equal(t, tc.want, got, tc.in)
		}
	}

	// Lists: a provider whose id is __disabled__ and a resource whose id is empty are
	// dropped; a provider whose id is empty stays, with no id (the server does not
	// start it, and lists it not).
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(`
providers:
  vector_io:
  - {provider_id: faiss, provider_type: "inline::faiss"}
  - {provider_id: "${env.UNSET:+milvus}", provider_type: "inline::milvus", config: {db: "${env.UNSET:=x}"}}
  - {provider_id: "${env.UNSET:=__disabled__}", provider_type: "remote::qdrant", config: {key: "${env.UNSET}"}}
  - {provider_id: "${env.SET:+chromadb}", provider_type: "remote::chromadb", config: {api_key: "${env.SET}", max_tokens: 3}}
registered_resources:
  models:
  - {model_id: "${env.UNSET:=}", provider_id: faiss}
  - {model_id: m, provider_id: faiss}
`), &doc))
	out, err := replaceEnvVars(doc, "", environ)
	require.NoError(t, err)
	config := out.(map[string]any)
	assert.Len(t, config["providers"].(map[string]any)["vector_io"], 3)
	assert.Len(t, config["registered_resources"].(map[string]any)["models"], 1)
	listed, err := listProviders(config)
	require.NoError(t, err)
	var ids []string
	for _, p := range listed {
		ids = append(ids, p.ProviderID)
	}
	assert.Equal(t, []string{"faiss", "chromadb"}, ids)
	assert.Equal(t, map[string]any{"api_key": "********", "max_tokens": float64(3)}, listed[1].Config)

	v, err := imageVersion("docker.io/llamastack/distribution-starter:v0.7.1")
	require.NoError(t, err)
	assert.Equal(t, "0.7.1", v)
	_, err = imageVersion("localhost:5000/llamastack/distribution-starter")
	assert.Error(t, err)
}

// The fake reads the config file from the ConfigMap volume mounted at its path, as the
// kubelet lays it out: every key a file, or the items' paths; a subPath mount is one
// file; the innermost mount holding the path wins; a missing ConfigMap is no file.
func TestFakeLlamaReadsTheMountedFile(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	_, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data:       map[string]string{"config.yaml": "one", "other.yaml": "two"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	optional := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "whole", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
			{Name: "items", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
				Items: []corev1.KeyToPath{{Key: "other.yaml", Path: "run/config.yaml"}}}}},
			{Name: "absent", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}}},
			{Name: "optional", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: &optional}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}},
	}
	for _, tc := range []struct {
		mounts []corev1.VolumeMount
		file   string
		want   string
		err    string
	}{
		{mounts: []corev1.VolumeMount{{Name: "whole", MountPath: "/etc/llama-stack/"}}, file: "/etc/llama-stack/config.yaml", want: "one"},
		{mounts: []corev1.VolumeMount{{Name: "whole", MountPath: "/etc/llama-stack"}}, file: "/etc/llama-stack/other.yaml", want: "two"},
		{mounts: []corev1.VolumeMount{{Name: "items", MountPath: "/etc/x"}}, file: "/etc/x/run/config.yaml", want: "two"},
		{mounts: []corev1.VolumeMount{{Name: "items", MountPath: "/etc/x"}}, file: "/etc/x/config.yaml", err: "no such file"},
		{mounts: []corev1.VolumeMount{{Name: "whole", MountPath: "/etc/llama-stack/config.yaml", SubPath: "other.yaml"}}, file: "/etc/llama-stack/config.yaml", want: "two"},
		{mounts: []corev1.VolumeMount{{Name: "items", MountPath: "/etc/x", SubPath: "run"}}, file: "/etc/x/config.yaml", want: "two"},
		{mounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/etc"}, {Name: "whole", MountPath: "/etc/llama-stack"}}, file: "/etc/llama-stack/config.yaml", want: "one"},
		{mounts: []corev1.VolumeMount{{Name: "whole", MountPath: "/etc/llama-stack"}, {Name: "scratch", MountPath: "/etc"}}, file: "/etc/llama-stack/config.yaml", want: "one"},
		{mounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/etc"}}, file: "/etc/llama-stack/config.yaml", err: "neither a ConfigMap nor a Secret volume"},
		{mounts: []corev1.VolumeMount{{Name: "whole", MountPath: "/etc/llama-stacks"}}, file: "/etc/llama-stack/config.yaml", err: "no volume is mounted there"},
		{mounts: []corev1.VolumeMount{{Name: "absent", MountPath: "/etc/llama-stack"}}, file: "/etc/llama-stack/config.yaml", err: `configmap "absent" not found`},
		{mounts: []corev1.VolumeMount{{Name: "optional", MountPath: "/etc/llama-stack"}}, file: "/etc/llama-stack/config.yaml", err: "no such file"},
	} {
		c := &corev1.Container{VolumeMounts: tc.mounts}
		got, err := mountedFile(ctx, pod, c, tc.file)
		what := fmt.Sprintf("%s through %v", tc.file, tc.mounts)
		if tc.err != "" {
			if assert.Error(t, err, what) {
				assert.Contains(t, err.Error(), tc.err, what)
			}
			continue
		}
		if assert.NoError(t, err, what) {
			assert.Equal(t, tc.want, string(got), what)
		}
	}
}

// The fake starts a pod's server the way its line does: llama-stack (up to 0.7.x) with
// the file at $LLAMA_STACK_CONFIG; OGX (from 0.8.0) through the image's entrypoint,
// with the file at $RUN_CONFIG_PATH, or the CLI a command runs; else the bundled config.
func TestFakeLlamaStartsAsEachLineDoes(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	_, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data:       map[string]string{"config.yaml": starterConfig, "port-9000.yaml": starterConfig + "server: {port: 9000}\n"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	const (
		lls = "/etc/llama-stack/config.yaml"
		ogx = "/etc/ogx/config.yaml"
	)
	sh := []string{"/bin/sh", "-c", "exec python3 -m llama_stack.core.server.server " + lls}
	for _, tc := range []struct {
		name          string
		version       string
		command, args []string
		env           map[string]string
		dial          string // the port dialled, 8321 if not set
		file          string // the config the server runs, "" for the bundled one
		port          int    // the port it listens on, if not 0
		err           string
	}{
		{name: "llama-stack: $LLAMA_STACK_CONFIG", version: "0.7.1", command: sh,
			env: map[string]string{"LLAMA_STACK_CONFIG": lls}, file: lls},
		{name: "llama-stack without $LLAMA_STACK_CONFIG: bundled", version: "0.7.1"},
		{name: "llama-stack: $LLAMA_STACK_CONFIG not mounted", version: "0.7.1", command: sh,
			env: map[string]string{"LLAMA_STACK_CONFIG": "/srv/config.yaml"}, err: "no volume is mounted there"},
		{name: "OGX: the entrypoint with $RUN_CONFIG_PATH and $OGX_CONFIG", version: "1.3.0",
			env: map[string]string{"RUN_CONFIG_PATH": ogx, "OGX_CONFIG": ogx}, file: ogx},
		{name: "OGX: the entrypoint with $RUN_CONFIG_PATH alone", version: "0.8.0",
			env: map[string]string{"RUN_CONFIG_PATH": ogx}, file: ogx},
		{name: "OGX ignores $LLAMA_STACK_CONFIG: bundled", version: "0.8.0",
			env: map[string]string{"LLAMA_STACK_CONFIG": lls}},
		{name: "OGX: $RUN_CONFIG_PATH without its file: bundled", version: "1.3.0",
			env: map[string]string{"RUN_CONFIG_PATH": "/etc/ogx/absent.yaml"}},
		{name: "OGX: $RUN_CONFIG_PATH in no volume: bundled", version: "1.3.0",
			env: map[string]string{"RUN_CONFIG_PATH": "/srv/config.yaml", "OGX_CONFIG": "/srv/config.yaml"}},
		{name: "OGX: the entrypoint as the command, with --port", version: "1.3.0", command: []string{ogxEntrypoint}, args: []string{"--port", "8321"},
			env: map[string]string{"RUN_CONFIG_PATH": ogx, "OGX_CONFIG": ogx}, file: ogx},
		{name: "OGX: $OGX_CONFIG another file than $RUN_CONFIG_PATH", version: "1.3.0",
			env: map[string]string{"RUN_CONFIG_PATH": ogx, "OGX_CONFIG": "/etc/ogx/other.yaml"},
			err: `OGX_CONFIG is "/etc/ogx/other.yaml" but RUN_CONFIG_PATH is "/etc/ogx/config.yaml"`},
		{name: "OGX: $OGX_CONFIG without $RUN_CONFIG_PATH", version: "1.3.0",
			env: map[string]string{"OGX_CONFIG": ogx}, err: `OGX_CONFIG is "/etc/ogx/config.yaml" but RUN_CONFIG_PATH is ""`},
		{name: "OGX: an argument the entrypoint passes on to the CLI", version: "1.3.0", args: []string{ogx},
			env: map[string]string{"RUN_CONFIG_PATH": ogx}, err: "unrecognized arguments: " + ogx},
		{name: "OGX: ogx stack run <file>", version: "0.8.0", command: []string{"ogx", "stack", "run", ogx}, file: ogx},
		{name: "OGX: ogx run <file>, from 1.0", version: "1.0.0", command: []string{"/usr/local/bin/ogx"}, args: []string{"run", ogx},
			env: map[string]string{"OGX_CONFIG": ogx}, file: ogx},
		{name: "OGX: ogx stack run <distribution>: bundled", version: "1.3.0", command: []string{"ogx", "stack", "run", "starter"}},
		{name: "OGX: ogx stack run <file> that is not there", version: "1.3.0", command: []string{"ogx", "stack", "run", "/etc/ogx/absent.yaml"},
			err: "no such file"},
		{name: "OGX: ogx stack run <file> but $OGX_CONFIG another", version: "1.3.0", command: []string{"ogx", "stack", "run", ogx},
			env: map[string]string{"OGX_CONFIG": lls}, err: "but the config the command runs is"},
		{name: "OGX: the user's command, started as llama-stack", version: "1.3.0", command: sh,
			env: map[string]string{"LLAMA_STACK_CONFIG": lls, "RUN_CONFIG_PATH": "/srv/config.yaml"}, file: lls},

		// The port: OGX listens on --port, else $OGX_PORT, else (from 1.0) server.port,
		// else 8321, and a dial of another port is refused; llama-stack takes any.
		{name: "OGX: 8321 by default", version: "0.8.0",
			env: map[string]string{"RUN_CONFIG_PATH": ogx}, file: ogx, port: 8321},
		{name: "OGX: $OGX_PORT", version: "1.3.0", dial: "9000",
			env: map[string]string{"RUN_CONFIG_PATH": ogx, "OGX_PORT": "9000"}, file: ogx, port: 9000},
		{name: "OGX: not on $OGX_PORT", version: "1.3.0",
			env: map[string]string{"RUN_CONFIG_PATH": ogx, "OGX_PORT": "9000"}, err: "listens on port 9000, not 8321: connection refused"},
		{name: "OGX: --port before $OGX_PORT", version: "1.3.0", args: []string{"--port=9000"},
			env: map[string]string{"RUN_CONFIG_PATH": ogx, "OGX_PORT": "8321"}, err: "listens on port 9000, not 8321"},
		{name: "OGX 1.x: server.port without $OGX_PORT", version: "1.3.0", dial: "9000",
			env: map[string]string{"RUN_CONFIG_PATH": "/etc/ogx/port-9000.yaml"}, file: "/etc/ogx/port-9000.yaml", port: 9000},
		{name: "OGX 1.x: $OGX_PORT before server.port", version: "1.3.0",
			env: map[string]string{"RUN_CONFIG_PATH": "/etc/ogx/port-9000.yaml", "OGX_PORT": "8321"}, file: "/etc/ogx/port-9000.yaml", port: 8321},
		{name: "OGX 0.8: server.port is not read", version: "0.8.0",
			env: map[string]string{"RUN_CONFIG_PATH": "/etc/ogx/port-9000.yaml"}, file: "/etc/ogx/port-9000.yaml", port: 8321},
		{name: "OGX 0.8: an empty $OGX_PORT", version: "0.8.0",
			env: map[string]string{"RUN_CONFIG_PATH": ogx, "OGX_PORT": ""}, err: "invalid literal for int()"},
		{name: "OGX: the bundled config on 8321", version: "1.3.0", dial: "9000", err: "listens on port 8321, not 9000"},
		{name: "llama-stack: any port", version: "0.7.1", command: sh, dial: "9000",
			env: map[string]string{"LLAMA_STACK_CONFIG": lls, "LLS_PORT": "8321"}, file: lls},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dial := cmp.Or(tc.dial, "8321")
			srv, err := startLlama(ctx, ogxTestPod(ns, tc.version, tc.command, tc.args, tc.env), dial)
			if tc.err != "" {
				if assert.Error(t, err) {
					assert.Contains(t, err.Error(), tc.err)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.version, srv.version)
			assert.Equal(t, tc.file, srv.configPath)
			assert.Equal(t, tc.file == "", srv.bundled())
			if tc.port != 0 {
				assert.Equal(t, tc.port, srv.port)
			}
			if srv.bundled() {
				assert.Nil(t, srv.config)
				assert.Empty(t, srv.providers, "the fake does not know the bundled config")
				return
			}
			require.Len(t, srv.providers, 1)
			assert.Equal(t, "vllm", srv.providers[0].ProviderID)
		})
	}

	// Through a dial: the server answers its version, and lists no providers when it runs
	// the bundled config; a pod whose server cannot start is a failed dial, with the
	// reason kept.
	servers := &llamaServers{started: map[types.UID]*llamaServer{}, failed: map[string]error{}}
	get := func(pod *corev1.Pod, url string) (map[string]any, error) {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return servers.dial(ctx, pod, "8321")
		}}}
		resp, err := client.Get("http://" + pod.Name + url)
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		var out map[string]any
		return out, json.NewDecoder(resp.Body).Decode(&out)
	}
	bundled := ogxTestPod(ns, "0.8.0", nil, nil, map[string]string{"LLAMA_STACK_CONFIG": lls})
	body, err := get(bundled, "/v1/version")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"version": "0.8.0"}, body)
	body, err = get(bundled, "/v1/providers")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"data": []any{}}, body)
	srv, ok := servers.server(bundled.Name)
	require.True(t, ok)
	assert.True(t, srv.bundled())
	refused := ogxTestPod(ns, "1.3.0", nil, nil, map[string]string{"OGX_CONFIG": ogx})
	refused.Name, refused.UID = "refused", "refused-uid"
	_, err = get(refused, "/v1/version")
	assert.Error(t, err)
	_, ok = servers.server(refused.Name)
	assert.False(t, ok)
	if assert.Error(t, servers.failure(refused.Name)) {
		assert.Contains(t, servers.failure(refused.Name).Error(), "OGX_CONFIG")
	}
}

// A server stops at an API its version lacks, named in apis or providers, as the real
// one does; the same config starts on a version that has it.
func TestFakeLlamaRefusesAPIsItsVersionLacks(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	_, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data: map[string]string{
			"safety.yaml": starterConfig + `  safety:
  - {provider_id: llama-guard, provider_type: "inline::llama-guard"}
`,
			"eval.yaml": starterConfig + `  eval:
  - {provider_id: builtin, provider_type: "inline::builtin"}
`,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, tc := range []struct {
		version, file string
		err           string
	}{
		{version: "1.3.0", file: "safety.yaml", err: "/etc/ogx/safety.yaml: API 'safety' does not exist"},
		{version: "1.0.0", file: "safety.yaml", err: "API 'safety' does not exist"},
		{version: "0.8.0", file: "safety.yaml"},
		{version: "0.8.0", file: "eval.yaml", err: "API 'eval' does not exist"},
		{version: "0.7.1", file: "safety.yaml"},
		{version: "0.7.1", file: "eval.yaml"},
	} {
		what := tc.version + " with " + tc.file
		environ := map[string]string{"RUN_CONFIG_PATH": "/etc/ogx/" + tc.file, "OGX_CONFIG": "/etc/ogx/" + tc.file}
		command := []string(nil)
		if !atLeast(tc.version, 0, 8) {
			environ = map[string]string{"LLAMA_STACK_CONFIG": "/etc/llama-stack/" + tc.file}
			command = []string{"/bin/sh", "-c", "exec llama stack run /etc/llama-stack/" + tc.file}
		}
		srv, err := startLlama(ctx, ogxTestPod(ns, tc.version, command, nil, environ), "8321")
		if tc.err != "" {
			if assert.Error(t, err, what) {
				assert.Contains(t, err.Error(), tc.err, what)
			}
			continue
		}
		if assert.NoError(t, err, what) {
			assert.Len(t, srv.providers, 2, what)
		}
	}

	// Through a dial, the pod's server never runs, and the reason is kept.
	servers := &llamaServers{started: map[types.UID]*llamaServer{}, failed: map[string]error{}}
	pod := ogxTestPod(ns, "1.3.0", nil, nil, map[string]string{"RUN_CONFIG_PATH": "/etc/ogx/safety.yaml"})
	_, err = servers.dial(ctx, pod, "8321")
	assert.Error(t, err)
	_, ok := servers.server(pod.Name)
	assert.False(t, ok)
	if assert.Error(t, servers.failure(pod.Name)) {
		assert.Contains(t, servers.failure(pod.Name).Error(), "API 'safety' does not exist")
	}

	// The Api enum of each line, in apis as in providers.
	for _, tc := range []struct {
		version string
		apis    []string
		refused string
	}{
		{version: "0.3.4", apis: []string{"agents", "post_training", "telemetry", "eval", "safety"}},
		{version: "0.4.4", apis: []string{"telemetry"}, refused: "telemetry"},
		{version: "0.4.4", apis: []string{"file_processors", "agents"}},
		{version: "0.6.1", apis: []string{"agents", "post_training"}},
		{version: "0.7.1", apis: []string{"agents"}, refused: "agents"},
		{version: "0.7.1", apis: []string{"post_training"}, refused: "post_training"},
		{version: "0.7.1", apis: []string{"batches", "datasetio", "eval", "file_processors", "files", "inference", "responses",
			"safety", "scoring", "tool_runtime", "vector_io"}},
		{version: "0.7.1", apis: []string{"interactions"}, refused: "interactions"},
		{version: "0.8.0", apis: []string{"interactions", "messages", "safety", "shields", "responses"}},
		{version: "0.8.0", apis: []string{"datasetio"}, refused: "datasetio"},
		{version: "0.8.0", apis: []string{"scoring"}, refused: "scoring"},
		{version: "0.8.0", apis: []string{"skills"}, refused: "skills"},
		{version: "1.3.0", apis: []string{"skills", "tool_runtime", "interactions"}},
		{version: "1.3.0", apis: []string{"shields"}, refused: "shields"},
		{version: "1.3.0", apis: []string{"systemone"}, refused: "systemone"},
		{version: "1.5.0", apis: []string{"systemone", "tool_runtime"}},
		{version: "2.0.0", apis: []string{"tool_runtime"}, refused: "tool_runtime"},
		{version: "0.8.0", apis: []string{"Vector-IO"}},
		{version: "0.2.9", apis: []string{"anything"}}, // not checked
	} {
		what := fmt.Sprintf("%s with %v", tc.version, tc.apis)
		var apis []any
		providers := map[string]any{}
		for _, a := range tc.apis {
			apis = append(apis, a)
			providers[a] = []any{}
		}
		for _, config := range []map[string]any{{"apis": apis}, {"providers": providers}} {
			err := checkAPIs(config, tc.version)
			if tc.refused == "" {
				assert.NoError(t, err, what)
				continue
			}
			assert.EqualError(t, err, "API '"+tc.refused+"' does not exist. Use Api.add() to register new APIs.", what)
		}
	}
}

// starterConfig is a config of one inference provider.
const starterConfig = `
version: 2
distro_name: starter
apis: [inference]
providers:
  inference:
  - {provider_id: vllm, provider_type: "remote::vllm", config: {base_url: "${env.VLLM_URL:=http://vllm:8000/v1}"}}
`

// ogxTestPod is a running pod of the starter image of server version, its server
// container declaring ports 8321 and 9000, with the ConfigMap cfg mounted at
// /etc/llama-stack and /etc/ogx.
func ogxTestPod(ns, version string, command, args []string, environ map[string]string) *corev1.Pod {
	image := "docker.io/ogxai/distribution-starter:" + version
	if !atLeast(version, 0, 8) {
		image = "docker.io/llamastack/distribution-starter:" + version
	}
	var envVars []corev1.EnvVar
	for _, name := range slices.Sorted(maps.Keys(environ)) {
		envVars = append(envVars, corev1.EnvVar{Name: name, Value: environ[name]})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", UID: "p-uid"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "llama-stack", Image: image, Command: command, Args: args, Env: envVars,
				Ports: []corev1.ContainerPort{{ContainerPort: 8321}, {ContainerPort: 9000}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "config", MountPath: "/etc/llama-stack/"},
					{Name: "config", MountPath: "/etc/ogx/"},
				},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}
