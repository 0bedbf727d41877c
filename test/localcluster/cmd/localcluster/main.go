// Command localcluster builds and runs the local Kubernetes control plane of
// package test/localcluster.
//
//	localcluster build
//	    Builds the binaries (or finds them in the cache) and prints the bin dir.
//	localcluster run [flags] -- CMD [ARGS...]
//	    Starts a cluster, runs CMD with KUBECONFIG set to its admin
//	    kubeconfig (and the bin dir, with a matching kubectl, first in PATH),
//	    forwards SIGINT and SIGTERM to CMD, stops the cluster when CMD exits
//	    or on a signal, and exits with CMD's exit code.
//	localcluster free-ports PORT...
//	    Prints, for each PORT, the first port at or above it that can be
//	    listened on at 127.0.0.1 and that no earlier PORT got (hack/run-local.sh
//	    puts the controller's metrics and health endpoints there).
//
// Run it from inside the repository (the build script is found from the
// working directory), e.g. go run ./test/localcluster/cmd/localcluster run -- go test ./...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

const (
	exitFailure  = 1
	exitUsage    = 2
	exitNotFound = 127
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  localcluster build
  localcluster run [--keep] [--nodes N] [--bin-dir DIR] [--log-dir DIR] [--timeout D] [--logs] -- CMD [ARGS...]
  localcluster free-ports PORT...

Environment: LLSC_CLUSTER_BIN_DIR uses prebuilt binaries (kwok-stages.yaml next
to the bin dir, or LLSC_CLUSTER_STAGES); LLSC_CACHE_DIR moves the build cache.
`)
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "build":
		if len(args) != 1 {
			usage(stderr)
			return exitUsage
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		binDir, _, err := localcluster.BuildBinaries(ctx)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitFailure
		}
		fmt.Fprintln(stdout, binDir)
		return 0
	case "run":
		return run(args[1:], stderr)
	case "free-ports":
		return freePorts(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	default:
		usage(stderr)
		return exitUsage
	}
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keep := fs.Bool("keep", false, "keep the run dir (logs, PKI, etcd data) after stopping")
	nodes := fs.Int("nodes", 1, "number of fake (kwok) nodes")
	binDir := fs.String("bin-dir", os.Getenv("LLSC_CLUSTER_BIN_DIR"), "prebuilt binaries (default: build or find them in the cache)")
	logDir := fs.String("log-dir", "", "copy the component logs here when the cluster stops")
	timeout := fs.Duration("timeout", 90*time.Second, "how long the cluster may take to start")
	logs := fs.Bool("logs", false, "copy the component logs to stderr while running")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	command := fs.Args()
	if len(command) == 0 {
		fmt.Fprintln(stderr, "localcluster run: no command (localcluster run [flags] -- CMD [ARGS...])")
		return exitUsage
	}

	// Signals are caught from now on: before the command runs they abort the
	// start (and stop what was started), afterwards they go to the command.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type started struct {
		cluster *localcluster.Cluster
		bin     string
		err     error
	}
	begin := time.Now()
	result := make(chan started, 1)
	go func() {
		bin, stages := *binDir, os.Getenv("LLSC_CLUSTER_STAGES")
		if bin == "" {
			var err error
			bin, stages, err = localcluster.BuildBinaries(ctx)
			if err != nil {
				result <- started{err: err}
				return
			}
		} else if stages == "" {
			stages = filepath.Join(filepath.Dir(bin), "kwok-stages.yaml")
		}
		opts := localcluster.Options{
			BinDir:       bin,
			StagesFile:   stages,
			Nodes:        *nodes,
			LogDir:       *logDir,
			KeepRunDir:   *keep,
			StartTimeout: *timeout,
		}
		if *logs {
			opts.Logs = stderr
		}
		c, err := localcluster.Start(ctx, opts)
		result <- started{cluster: c, bin: bin, err: err}
	}()

	var st started
	select {
	case st = <-result:
	case sig := <-sigs:
		fmt.Fprintf(stderr, "localcluster: %v while starting; stopping\n", sig)
		cancel()
		st = <-result
		if st.cluster != nil {
			stopCluster(st.cluster, *keep, stderr)
		}
		return signalExitCode(sig)
	}
	if st.err != nil {
		fmt.Fprintf(stderr, "localcluster: %v\n", st.err)
		return exitFailure
	}
	c := st.cluster
	fmt.Fprintf(stderr, "localcluster: cluster up in %.1fs at %s (KUBECONFIG=%s)\n",
		time.Since(begin).Seconds(), c.APIServerURL(), c.Kubeconfig())

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = commandEnv(os.Environ(), c.Kubeconfig(), st.bin)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "localcluster: %v\n", err)
		stopCluster(c, *keep, stderr)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitFailure
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var waitErr error
wait:
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case waitErr = <-waited:
			break wait
		}
	}
	code := exitCode(cmd.ProcessState, waitErr)
	stopCluster(c, *keep, stderr)
	return code
}

// commandEnv is env with KUBECONFIG set and binDir (with the kubectl that
// matches the cluster) first in PATH.
func commandEnv(env []string, kubeconfig, binDir string) []string {
	out := make([]string, 0, len(env)+2)
	path := binDir
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "KUBECONFIG="):
		case strings.HasPrefix(kv, "PATH="):
			if rest := strings.TrimPrefix(kv, "PATH="); rest != "" {
				path += string(os.PathListSeparator) + rest
			}
		default:
			out = append(out, kv)
		}
	}
	return append(out, "KUBECONFIG="+kubeconfig, "PATH="+path)
}

func stopCluster(c *localcluster.Cluster, keep bool, stderr io.Writer) {
	begin := time.Now()
	if err := c.Stop(); err != nil {
		fmt.Fprintf(stderr, "localcluster: %v\n", err)
	}
	fmt.Fprintf(stderr, "localcluster: cluster stopped in %.1fs\n", time.Since(begin).Seconds())
	if keep {
		fmt.Fprintf(stderr, "localcluster: run dir kept: %s\n", c.RunDir())
	}
}

// exitCode is the command's exit code, 128+N if signal N ended it.
func exitCode(state *os.ProcessState, err error) int {
	if state == nil {
		if err != nil {
			return exitFailure
		}
		return 0
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}

func signalExitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitFailure
}

// freePorts prints, space-separated, for each port argument the first port at
// or above it that 127.0.0.1 can listen on and that no earlier argument got.
// It checks by listening, as the process that will use the port does; the port
// is free at the time of the check, not reserved.
func freePorts(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	taken := map[int]bool{}
	out := make([]string, 0, len(args))
	for _, a := range args {
		from, err := strconv.Atoi(a)
		if err != nil || from < 1 || from > 65535 {
			fmt.Fprintf(stderr, "localcluster free-ports: %q is not a port\n", a)
			return exitUsage
		}
		port := 0
		for p := from; p <= 65535; p++ {
			if !taken[p] && canListen(p) {
				port = p
				break
			}
		}
		if port == 0 {
			fmt.Fprintf(stderr, "localcluster free-ports: no free port at or above %d on 127.0.0.1\n", from)
			return exitFailure
		}
		taken[port] = true
		out = append(out, strconv.Itoa(port))
	}
	fmt.Fprintln(stdout, strings.Join(out, " "))
	return 0
}

// canListen reports whether a listener on 127.0.0.1:port can be opened now.
func canListen(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
