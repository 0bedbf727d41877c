//go:build e2e

// End-to-end test of the local control plane. It starts real clusters, so it
// is behind the e2e build tag:
//
//	go test -tags e2e ./test/localcluster/ -v -count=1
//
// The binaries come from LLSC_CLUSTER_BIN_DIR (with kwok-stages.yaml next to
// it) or are built by hack/cluster/build.sh (about ten minutes the first time,
// seconds afterwards).
package localcluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

const (
	pauseImage  = "registry.k8s.io/pause:3.10"
	kubeVersion = "v1.37.2"
)

func binaries(t *testing.T) (binDir, stagesFile string) {
	t.Helper()
	if dir := os.Getenv("LLSC_CLUSTER_BIN_DIR"); dir != "" {
		return dir, filepath.Join(filepath.Dir(dir), "kwok-stages.yaml")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	binDir, stagesFile, err := localcluster.BuildBinaries(ctx)
	if err != nil {
		t.Fatalf("building the control plane: %v", err)
	}
	return binDir, stagesFile
}

// dumpLogsOnFailure logs the end of every component's log if the test failed
// (registered before Stop so that it runs while the run dir still exists).
func dumpLogsOnFailure(t *testing.T, name string, c *localcluster.Cluster) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, comp := range localcluster.Components {
			t.Logf("--- %s: last lines of %s ---\n%s", name, comp, c.LogTail(comp, 30))
		}
	})
}

func poll(ctx context.Context, t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
}

func waitForDefaultServiceAccount(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	poll(ctx, t, "ServiceAccount "+ns+"/default", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

type startResult struct {
	cluster *localcluster.Cluster
	took    time.Duration
	err     error
}

func TestLocalCluster(t *testing.T) {
	binDir, stagesFile := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opts := localcluster.Options{BinDir: binDir, StagesFile: stagesFile}

	begin := time.Now()
	a, err := localcluster.Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting cluster A: %v", err)
	}
	t.Logf("cluster A started in %s: %s, run dir %s", time.Since(begin).Round(time.Millisecond), a.APIServerURL(), a.RunDir())
	t.Cleanup(func() { _ = a.Stop() })
	dumpLogsOnFailure(t, "cluster A", a)

	// Cluster B starts while A is being exercised.
	bResult := make(chan startResult, 1)
	go func() {
		begin := time.Now()
		c, err := localcluster.Start(ctx, opts)
		bResult <- startResult{cluster: c, took: time.Since(begin), err: err}
	}()

	client, err := kubernetes.NewForConfig(a.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ServerVersion", func(t *testing.T) {
		v, err := client.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.GitVersion != kubeVersion {
			t.Errorf("server gitVersion %q, want %q", v.GitVersion, kubeVersion)
		}
	})

	t.Run("Kubeconfig", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", a.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		kc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 1 {
			t.Fatalf("%d kwok nodes, want 1", len(nodes.Items))
		}
		n := nodes.Items[0]
		if n.Annotations["kwok.x-k8s.io/node"] != "fake" || n.Labels["kubernetes.io/hostname"] != n.Name ||
			n.Labels["topology.kubernetes.io/zone"] == "" {
			t.Errorf("node %s: labels %v, annotations %v", n.Name, n.Labels, n.Annotations)
		}
		if got := n.Status.Allocatable.Cpu().String(); got != "32" {
			t.Errorf("node %s: allocatable cpu %s, want 32", n.Name, got)
		}
	})

	t.Run("Deployment", func(t *testing.T) {
		ns := "e2e-deploy"
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: ns},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{"app": "pause"}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptrTo[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: pauseImage}}},
				},
			},
		}
		if _, err := client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(ctx, t, "Deployment Available with 2 replicas", func(ctx context.Context) (bool, error) {
			d, err := client.AppsV1().Deployments(ns).Get(ctx, dep.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range d.Status.Conditions {
				if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
					return d.Status.AvailableReplicas == 2, nil
				}
			}
			return false, nil
		})
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=pause"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 2 {
			t.Fatalf("%d pods, want 2", len(pods.Items))
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "kwok-node-0" || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				t.Errorf("pod %s: node %q, phase %s, IP %q", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP)
			}
		}
	})

	t.Run("PodSecurityRestricted", func(t *testing.T) {
		ns := "e2e-restricted"
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:   ns,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The ServiceAccount admission plugin rejects Pods until the
		// namespace has its default ServiceAccount.
		waitForDefaultServiceAccount(ctx, t, client, ns)

		privileged := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: pauseImage,
				SecurityContext: &corev1.SecurityContext{Privileged: ptrTo(true)},
			}}},
		}
		_, err := client.CoreV1().Pods(ns).Create(ctx, privileged, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
			t.Fatalf("privileged pod in a restricted namespace: got %v, want a PodSecurity rejection", err)
		}
		t.Logf("rejected as expected: %v", err)

		restricted := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "restricted", Namespace: ns},
			Spec: corev1.PodSpec{
				SecurityContext: &corev1.PodSecurityContext{
					RunAsNonRoot:   ptrTo(true),
					RunAsUser:      ptrTo[int64](65532),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				Containers: []corev1.Container{{
					Name: "c", Image: pauseImage,
					SecurityContext: &corev1.SecurityContext{
						AllowPrivilegeEscalation: ptrTo(false),
						Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					},
				}},
			},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, restricted, metav1.CreateOptions{}); err != nil {
			t.Fatalf("a pod that meets the restricted profile was rejected: %v", err)
		}
	})

	t.Run("GarbageCollection", func(t *testing.T) {
		ns := "default"
		owner, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "gc-owner"},
			Data:       map[string]string{"role": "owner"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: "gc-dependent",
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
				}},
			},
			Data: map[string]string{"role": "dependent"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The dependent stays while its owner exists.
		time.Sleep(300 * time.Millisecond)
		if _, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "gc-dependent", metav1.GetOptions{}); err != nil {
			t.Fatalf("dependent ConfigMap before its owner is deleted: %v", err)
		}
		if err := client.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(ctx, t, "garbage collection of the dependent ConfigMap", func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "gc-dependent", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
	})

	r := <-bResult
	if r.err != nil {
		t.Fatalf("starting cluster B (concurrently with A's checks): %v", r.err)
	}
	b := r.cluster
	t.Logf("cluster B started in %s: %s, run dir %s", r.took.Round(time.Millisecond), b.APIServerURL(), b.RunDir())
	t.Cleanup(func() { _ = b.Stop() })
	dumpLogsOnFailure(t, "cluster B", b)

	t.Run("SecondCluster", func(t *testing.T) {
		aPorts := map[int]string{}
		for name, p := range a.Ports() {
			aPorts[p] = name
		}
		for name, p := range b.Ports() {
			if other, ok := aPorts[p]; ok {
				t.Errorf("port %d is %s of B and %s of A", p, name, other)
			}
		}
		if a.RunDir() == b.RunDir() {
			t.Errorf("both clusters use run dir %s", a.RunDir())
		}
		bClient, err := kubernetes.NewForConfig(b.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		// B has its own etcd: none of A's objects.
		if _, err := bClient.CoreV1().Namespaces().Get(ctx, "e2e-deploy", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace e2e-deploy in cluster B: got %v, want NotFound", err)
		}
		if _, err := bClient.CoreV1().Nodes().Get(ctx, "kwok-node-0", metav1.GetOptions{}); err != nil {
			t.Errorf("cluster B node: %v", err)
		}
	})

	t.Run("Stop", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			cluster *localcluster.Cluster
		}{{"A", a}, {"B", b}} {
			pids := c.cluster.PIDs()
			if len(pids) != len(localcluster.Components) {
				t.Errorf("cluster %s: %d processes (%v), want %d", c.name, len(pids), pids, len(localcluster.Components))
			}
			begin := time.Now()
			if err := c.cluster.Stop(); err != nil {
				t.Errorf("stopping cluster %s: %v", c.name, err)
			}
			t.Logf("cluster %s stopped in %s", c.name, time.Since(begin).Round(time.Millisecond))
			if _, err := os.Stat(c.cluster.RunDir()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cluster %s: run dir %s still there (%v)", c.name, c.cluster.RunDir(), err)
			}
			for comp, pid := range pids {
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("cluster %s: %s (pid %d) still exists (kill 0: %v)", c.name, comp, pid, err)
				}
			}
		}
	})
}

// A start that fails stops what it started, removes its run dir and reports
// the failing component with the end of its log.
func TestStartFailure(t *testing.T) {
	binDir, stagesFile := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	parent := t.TempDir()
	c, err := localcluster.Start(ctx, localcluster.Options{
		BinDir:             binDir,
		StagesFile:         stagesFile,
		RunDirParent:       parent,
		ExtraAPIServerArgs: []string{"--no-such-flag=1"},
	})
	if err == nil {
		_ = c.Stop()
		t.Fatal("Start succeeded with an unknown apiserver flag")
	}
	t.Logf("Start failed as expected: %v", err)
	var ce *localcluster.ComponentError
	if !errors.As(err, &ce) || ce.Component != localcluster.KubeAPIServer {
		t.Fatalf("error %T does not name %s", err, localcluster.KubeAPIServer)
	}
	if !strings.Contains(ce.LogTail, "no-such-flag") {
		t.Errorf("log tail does not show the cause:\n%s", ce.LogTail)
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("run dir left behind in %s: %v", parent, entries)
	}
	// No process of that run (etcd's --data-dir is under parent) remains.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(data), parent) {
			t.Errorf("process %s still runs: %q", filepath.Dir(p), data)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
