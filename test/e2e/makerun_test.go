//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
)

var (
	clusterUpLine  = regexp.MustCompile(`localcluster: cluster up in \S+ at \S+ \(KUBECONFIG=(\S+)\)`)
	metricsURLLine = regexp.MustCompile(`^Metrics: (http://127\.0\.0\.1:(\d+)/metrics)$`)
	healthURLLine  = regexp.MustCompile(`^Health:  (http://127\.0\.0\.1:\d+/healthz) and http://127\.0\.0\.1:\d+/readyz$`)
)

// `make run`'s path, the local control plane of bin/localcluster running
// hack/run-local.sh with the controller's binary, survives a crash of the controller:
// with 127.0.0.1:8080 (the controller's default metrics port) taken, the controller
// starts on free loopback ports and serves the example CR; killed with SIGKILL, it is
// restarted on the same ports while the control plane keeps running with its data; a
// CR created after the crash becomes Ready. A SIGINT to the process group, as a
// terminal's Ctrl-C sends, then stops everything: the controller, the script, the
// control plane, and the run dir goes.
func TestMakeRunSurvivesAControllerCrash(t *testing.T) {
	work := t.TempDir()
	controllerBin := filepath.Join(work, "llama-stack-controller")
	localclusterBin := filepath.Join(work, "localcluster")
	for bin, pkg := range map[string]string{controllerBin: "./cmd/controller", localclusterBin: "./test/localcluster/cmd/localcluster"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Dir = env.root
		out, err := build.CombinedOutput()
		require.NoError(t, err, "building %s: %s", pkg, out)
	}

	// Something else listens on the controller's default metrics port.
	if ln, err := net.Listen("tcp", "127.0.0.1:8080"); err != nil {
		t.Logf("127.0.0.1:8080 is taken already: %v", err)
	} else {
		t.Cleanup(func() { _ = ln.Close() })
	}

	// The run dir is made under TMPDIR: a test dir, to check that it goes.
	tmp := t.TempDir()
	output := &syncBuffer{}
	cmd := exec.Command(localclusterBin, "run", "--bin-dir", env.binDir, "--",
		"env", "LLSC_LOCAL=1", "BIN="+controllerBin, "LOCALCLUSTER="+localclusterBin,
		filepath.Join(env.root, "hack", "run-local.sh"))
	cmd.Dir = env.root
	cmd.Env = append(environWithout(os.Environ(), "KUBECONFIG", "TMPDIR", "LLSC_CLUSTER_STAGES"),
		"TMPDIR="+tmp, "LLSC_CLUSTER_STAGES="+env.stagesFile)
	cmd.Stdout, cmd.Stderr = output, output
	// Its own process group, like a command run from a terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second
	require.NoError(t, cmd.Start())
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			// The test failed half-way: end the whole group (the control plane's
			// processes die with localcluster).
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("output of localcluster run, the script and the controller:\n%s", tail(output.String(), 300))
		}
	})

	// waitLine waits for a line of the output that matches re and returns its submatches.
	waitLine := func(re *regexp.Regexp, timeout time.Duration) []string {
		t.Helper()
		var m []string
		eventually(t, timeout, "a line matching "+re.String(), func(context.Context) (bool, error) {
			m = findLine(output.String(), re)
			if m != nil {
				return true, nil
			}
			select {
			case <-exited:
				return false, fmt.Errorf("localcluster run exited (%v)", waitErr)
			default:
				return false, nil
			}
		})
		return m
	}

	kubeconfig := waitLine(clusterUpLine, 3*time.Minute)[1]
	runDir := filepath.Dir(kubeconfig)
	require.Equal(t, tmp, filepath.Dir(runDir), "the run dir is made under TMPDIR")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	kube := kubernetes.NewForConfigOrDie(cfg)
	client := clientset.NewForConfigOrDie(cfg)

	metrics := waitLine(metricsURLLine, time.Minute)
	metricsURL := metrics[1]
	assert.NotEqual(t, "8080", metrics[2], "the metrics port is not the taken 8080")
	healthURL := waitLine(healthURLLine, time.Minute)[1]

	waitReadyOn(t, client, "default", "minimal", 90*time.Second)
	waitMetric(t, metricsURL, `llama_stack_controller_llamastackdistribution_ready{name="minimal",namespace="default"} 1`)
	assert.Equal(t, http.StatusOK, httpStatus(t, healthURL), healthURL)

	// The crash.
	pids := processesOf(controllerBin)
	require.Len(t, pids, 1, "one controller process")
	crashed := pids[0]
	require.NoError(t, syscall.Kill(crashed, syscall.SIGKILL))
	waitLine(regexp.MustCompile(`the controller \(pid `+strconv.Itoa(crashed)+`\) was killed by SIGKILL .*still up`), 30*time.Second)

	// The control plane, its objects and the script are still there, and a new
	// controller, on the same ports, takes over.
	_, err = kube.Discovery().ServerVersion()
	require.NoError(t, err, "the API server answers after the crash")
	// Read in v1alpha2, the storage version: v1alpha1 reads need the conversion
	// webhook, which is down with the controller.
	_, err = client.LlamastackV1alpha2().LlamaStackDistributions("default").Get(context.Background(), "minimal", metav1.GetOptions{})
	require.NoError(t, err, "the example CR is still there")
	var restarted int
	eventually(t, 30*time.Second, "a new controller process", func(context.Context) (bool, error) {
		pids := processesOf(controllerBin)
		if len(pids) > 1 {
			return false, fmt.Errorf("%d controller processes: %v", len(pids), pids)
		}
		if len(pids) == 1 && pids[0] != crashed {
			restarted = pids[0]
			return true, nil
		}
		return false, nil
	})
	// Written in v1alpha1: converted by the new controller's webhook once it serves.
	eventually(t, 30*time.Second, "a v1alpha1 CR is created through the restarted webhook", func(ctx context.Context) (bool, error) {
		_, err := client.LlamastackV1alpha1().LlamaStackDistributions("default").Create(ctx,
			&v1alpha1.LlamaStackDistribution{
				ObjectMeta: metav1.ObjectMeta{Name: "after-crash", Namespace: "default"},
				Spec:       v1alpha1.LlamaStackDistributionSpec{Replicas: 1, Server: v1alpha1.ServerSpec{Distribution: v1alpha1.DistributionType{Name: "starter"}}},
			}, metav1.CreateOptions{})
		return err == nil, nil
	})
	waitReadyOn(t, client, "default", "after-crash", 90*time.Second)
	waitMetric(t, metricsURL, `llama_stack_controller_llamastackdistribution_ready{name="after-crash",namespace="default"} 1`)
	assert.Equal(t, []int{restarted}, processesOf(controllerBin), "the restarted controller is the only one")
	select {
	case <-exited:
		t.Fatalf("localcluster run exited after the controller's crash (%v)", waitErr)
	default:
	}

	// Ctrl-C stops everything.
	starts := strings.Count(output.String(), "run-local: controller started")
	assert.Equal(t, 2, starts, "controller starts: the first and the one after the crash")
	componentPIDs := processesWith(runDir)
	require.NotEmpty(t, componentPIDs, "the control plane's processes name the run dir")
	require.NoError(t, syscall.Kill(-pgid, syscall.SIGINT))
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("localcluster run did not exit within 2 minutes of SIGINT")
	}
	var exitErr *exec.ExitError
	require.ErrorAs(t, waitErr, &exitErr, "localcluster run exits with the script's status")
	assert.Equal(t, 130, exitErr.ExitCode(), "the script ends as on SIGINT")
	assert.Equal(t, starts, strings.Count(output.String(), "run-local: controller started"), "the controller was started again after SIGINT")
	assert.Contains(t, output.String(), "localcluster: cluster stopped in")
	_, err = kube.Discovery().ServerVersion()
	assert.Error(t, err, "the API server still answers after Ctrl-C")
	_, err = os.Stat(runDir)
	assert.True(t, errors.Is(err, os.ErrNotExist), "the run dir %s is still there (%v)", runDir, err)
	assert.Empty(t, processesOf(controllerBin), "controller processes left")
	assert.Empty(t, processesWith(runDir), "control plane processes left (were %v)", componentPIDs)
	assert.Empty(t, processGroup(pgid), "processes left in the process group (pid state command)")
}

// environWithout is env without the named variables.
func environWithout(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			if name == n {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// findLine returns the submatches of the first line of text that matches re.
func findLine(text string, re *regexp.Regexp) []string {
	for _, line := range strings.Split(text, "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			return m
		}
	}
	return nil
}

// tail is the last n lines of text.
func tail(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// processesOf lists the processes that run the executable at path.
func processesOf(path string) []int {
	return findProcesses(func(pid string) bool {
		exe, err := os.Readlink(filepath.Join("/proc", pid, "exe"))
		return err == nil && exe == path
	})
}

// processesWith lists the processes whose command line contains s.
func processesWith(s string) []int {
	return findProcesses(func(pid string) bool {
		cmdline, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		return err == nil && strings.Contains(string(cmdline), s)
	})
}

// processGroup describes the processes, zombies included, in the process group pgid:
// "pid state command line".
func processGroup(pgid int) []string {
	var out []string
	for _, pid := range findProcesses(func(pid string) bool {
		_, pgrp := procStat(pid)
		return pgrp == pgid
	}) {
		state, _ := procStat(strconv.Itoa(pid))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		out = append(out, fmt.Sprintf("%d %s %s", pid, state, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
	}
	return out
}

// procStat reads a process's state and process group from /proc/<pid>/stat
// ("pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses); pgrp is
// -1 if it cannot be read.
func procStat(pid string) (state string, pgrp int) {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return "", -1
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 3 {
		return "", -1
	}
	pgrp, err = strconv.Atoi(fields[2])
	if err != nil {
		return fields[0], -1
	}
	return fields[0], pgrp
}

func findProcesses(match func(pid string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if match(e.Name()) {
			out = append(out, pid)
		}
	}
	return out
}

// waitReadyOn waits until the CR is Ready at its generation on the cluster of client.
func waitReadyOn(t *testing.T, client clientset.Interface, ns, name string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, ns+"/"+name+" is Ready", func(ctx context.Context) (bool, error) {
		l, err := client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return l.Status.ObservedGeneration == l.Generation && l.Status.Phase == v1alpha2.PhaseReady &&
			meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha2.ConditionReady), nil
	})
}

// waitMetric waits until the page at url has the line.
func waitMetric(t *testing.T, url, line string) {
	t.Helper()
	eventually(t, 30*time.Second, url+" shows "+line, func(ctx context.Context) (bool, error) {
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return false, nil
		}
		return strings.Contains("\n"+string(body), "\n"+line+"\n"), nil
	})
}

// httpStatus is the status code of a GET of url.
func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
