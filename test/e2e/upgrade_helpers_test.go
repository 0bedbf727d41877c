//go:build e2e

package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/cmd/controller/app"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// upgradeCluster is a control plane of an upgrade test's own, with the API server's
// audit log, so that the test can tell which writes each controller sent.
type upgradeCluster struct {
	cluster  *localcluster.Cluster
	cfg      *rest.Config
	kube     kubernetes.Interface
	client   clientset.Interface
	dyn      dynamic.Interface
	crds     apiextensionsclient.Interface
	work     string
	auditLog string
}

// upgradeAuditPolicy records every request at the Metadata level, except those of the
// control plane's own components.
const upgradeAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:kube-controller-manager", "system:kube-scheduler", "kwok-controller", "system:apiserver"]
- level: None
  userGroups: ["system:serviceaccounts:kube-system"]
- level: None
  nonResourceURLs: ["/*"]
- level: Metadata
`

func startUpgradeCluster(t *testing.T) *upgradeCluster {
	t.Helper()
	work := t.TempDir()
	u := &upgradeCluster{work: work, auditLog: filepath.Join(work, "audit.log")}
	policy := filepath.Join(work, "audit-policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte(upgradeAuditPolicy), 0o600))
	cluster, err := localcluster.Start(context.Background(), localcluster.Options{
		BinDir: env.binDir, StagesFile: env.stagesFile, Nodes: 1,
		ExtraAPIServerArgs: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + u.auditLog, "--audit-log-mode=blocking"},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Errorf("stopping the upgrade test's control plane: %v", err)
		}
	})
	u.cluster = cluster
	u.cfg = cluster.RESTConfig()
	u.kube = kubernetes.NewForConfigOrDie(u.cfg)
	u.client = clientset.NewForConfigOrDie(u.cfg)
	u.dyn = dynamic.NewForConfigOrDie(u.cfg)
	u.crds = apiextensionsclient.NewForConfigOrDie(u.cfg)
	return u
}

// kubectl runs kubectl against the cluster with stdin, and returns its standard output.
func (u *upgradeCluster) kubectl(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.binDir, "kubectl"), append([]string{"--kubeconfig", u.cluster.Kubeconfig()}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubectl %s: %s%s", strings.Join(args, " "), out, stderr.Bytes())
	return out
}

// namespace creates a namespace with labels.
func (u *upgradeCluster) namespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	_, err := u.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// operatorConfig creates the controller's operator ConfigMap with NetworkPolicies on.
func (u *upgradeCluster) operatorConfig(t *testing.T) {
	t.Helper()
	_, err := u.kube.CoreV1().ConfigMaps(operatorNamespace).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "llama-stack-operator-config", Namespace: operatorNamespace},
		Data:       map[string]string{"featureFlags": "enableNetworkPolicy:\n  enabled: true\n", "image-overrides": ""},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// boundPV creates a PersistentVolume bound in advance to the claim ns/claim (the local
// control plane has no provisioner).
func (u *upgradeCluster) boundPV(t *testing.T, ns, claim, size string) {
	t.Helper()
	_, err := u.kube.CoreV1().PersistentVolumes().Create(context.Background(), &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns + "-" + claim}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// installCurrent installs what `kubectl apply -k artifacts/` changes for the controller
// of this tree, the CRD with its conversion webhook on loopback at webhookAddr (served by
// the controller startCurrent starts), and the RBAC it runs with.
func (u *upgradeCluster) installCurrent(t *testing.T, webhookAddr string) {
	t.Helper()
	_, port, err := net.SplitHostPort(webhookAddr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	crd, err := localcluster.LoopbackCRD(env.root, p)
	require.NoError(t, err)
	crdJSON, err := crd.MarshalJSON()
	require.NoError(t, err)
	crdFile := filepath.Join(u.work, "crd-current.json")
	require.NoError(t, os.WriteFile(crdFile, crdJSON, 0o600))
	args := []string{"apply", "--server-side", "-f", crdFile}
	for _, f := range []string{
		"controller/namespace.yaml", "rbac/service_account.yaml", "rbac/cluster_role.yaml", "rbac/cluster_role_binding.yaml",
		"rbac/webhook_role.yaml", "rbac/webhook_role_binding.yaml",
	} {
		args = append(args, "-f", filepath.Join(env.root, "artifacts", f))
	}
	u.kubectl(t, nil, args...)
}

// serviceAccount is the artifacts' ServiceAccount, which every controller of the upgrade
// tests runs as (impersonated); the replica is recorded as a user extra, so that the
// audit log tells the two releases apart.
func serviceAccountImpersonation(replica string) rest.ImpersonationConfig {
	return rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + operatorNamespace + ":llama-stack-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"},
		Extra:    map[string][]string{"replica": {replica}},
	}
}

// startCurrent runs this tree's controller in-process, as the binary runs it with the
// artifacts' flags, its conversion webhook on webhookAddr; the returned function stops
// it, and so does the test's cleanup if it still runs.
func (u *upgradeCluster) startCurrent(t *testing.T, webhookAddr, version string) (stop func()) {
	t.Helper()
	cfg := rest.CopyConfig(u.cfg)
	cfg.UserAgent = "llama-stack-controller/" + version
	cfg.Impersonate = serviceAccountImpersonation("current")
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.LoggerWithName(klog.NewKlogr(), "upgrade-"+t.Name())))
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, cfg, app.Options{
			Workers: 4, QPS: 50, Burst: 100, OperatorNamespace: operatorNamespace, Version: version,
			ServerProbe: "off", MetricsBindAddress: "0", HealthProbeBindAddress: "0",
			WebhookBindAddress: webhookAddr, WebhookCertMode: app.WebhookCertModeSelf, WebhookCertHosts: "localhost,127.0.0.1",
		})
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err, "the upgrade test's controller")
			case <-time.After(30 * time.Second):
				t.Error("the upgrade test's controller did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	// The controller listens for conversions before it starts its informers: wait for
	// that, and fail at once with its error if it stops instead.
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", webhookAddr, time.Second)
		if err == nil {
			require.NoError(t, conn.Close())
			break
		}
		select {
		case runErr := <-done:
			once.Do(cancel)
			require.FailNow(t, "the upgrade test's controller stopped while starting", "%v", runErr)
		case <-time.After(100 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "the upgrade test's controller does not listen on %s after 30s: %v", webhookAddr, err)
	}
	return stop
}

// waitCurrent waits until the controller of this tree has synced every CR of names in
// ns: status written by it (its version), at the CR's generation, Ready, the rollout
// complete; and each Deployment's own status current.
func (u *upgradeCluster) waitCurrent(t *testing.T, ns string, names []string, version string) map[string]*v1alpha2.LlamaStackDistribution {
	t.Helper()
	out := map[string]*v1alpha2.LlamaStackDistribution{}
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			l, err := u.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			p := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionProgressing)
			if l.Status.Version.OperatorVersion != version || l.Status.ObservedGeneration != l.Generation || l.Status.Phase != v1alpha2.PhaseReady ||
				p == nil || p.Reason != v1alpha2.ReasonRolloutComplete {
				last = fmt.Sprintf("%s: version %q, observed generation %d of %d, phase %s, progressing %v",
					name, l.Status.Version.OperatorVersion, l.Status.ObservedGeneration, l.Generation, l.Status.Phase, p)
				return false, nil
			}
			d, err := u.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || d.Status.ObservedGeneration != d.Generation {
				last = name + ": the Deployment's status is not current"
				return false, nil
			}
			out[name] = l
		}
		return true, nil
	})
	require.NoError(t, err, "waiting until the controller of this tree has synced every CR in %s (last: %s)", ns, last)
	return out
}

// auditEvent is what the upgrade tests read of one audit event.
type auditEvent struct {
	Verb             string `json:"verb"`
	Stage            string `json:"stage"`
	ImpersonatedUser *struct {
		Extra map[string][]string `json:"extra"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

func (e auditEvent) String() string {
	if e.ObjectRef == nil {
		return e.Verb
	}
	r := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	code := 0
	if e.ResponseStatus != nil {
		code = e.ResponseStatus.Code
	}
	return fmt.Sprintf("%s %s %s/%s (%d)", e.Verb, r, e.ObjectRef.Namespace, e.ObjectRef.Name, code)
}

// writes lists the completed create, update, patch and delete requests that replica
// sent since from.
func (u *upgradeCluster) writes(t *testing.T, replica string, from time.Time) []auditEvent {
	t.Helper()
	f, err := os.Open(u.auditLog)
	require.NoError(t, err)
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Stage != "ResponseComplete" || e.StageTimestamp.Before(from) ||
			e.ImpersonatedUser == nil || len(e.ImpersonatedUser.Extra["replica"]) != 1 || e.ImpersonatedUser.Extra["replica"][0] != replica {
			continue
		}
		switch e.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			out = append(out, e)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// waitQuiet waits until replica has sent no write for quiet.
func (u *upgradeCluster) waitQuiet(t *testing.T, replica string, quiet time.Duration) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		from := time.Now()
		time.Sleep(quiet)
		w := u.writes(t, replica, from)
		if len(w) == 0 {
			return
		}
		require.False(t, time.Now().After(deadline), "the %s controller does not come to rest; still writing: %v", replica, w)
	}
}

// childKinds are the kinds a CR's children and their pods have, read as unstructured
// objects so that a comparison sees every field the API server returns.
var childKinds = []schema.GroupVersionResource{
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Group: "apps", Version: "v1", Resource: "replicasets"},
	{Version: "v1", Resource: "pods"},
	{Version: "v1", Resource: "services"},
	{Version: "v1", Resource: "persistentvolumeclaims"},
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "serviceaccounts"},
	{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
	{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
	{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
}

// snapshot reads every object of childKinds in ns, by "resource/name".
func (u *upgradeCluster) snapshot(t *testing.T, ns string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, gvr := range childKinds {
		list, err := u.dyn.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		for i := range list.Items {
			out[gvr.Resource+"/"+list.Items[i].GetName()] = &list.Items[i]
		}
	}
	return out
}

// storedAPIVersion reads the apiVersion in which the API server stored a CR, from etcd
// itself (its JSON gateway, /v3/kv/range).
func (u *upgradeCluster) storedAPIVersion(t *testing.T, ns, name string) string {
	t.Helper()
	key := "/registry/llamastack.io/llamastackdistributions/" + ns + "/" + name
	body, err := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	require.NoError(t, err)
	url := "http://127.0.0.1:" + strconv.Itoa(u.cluster.Ports()[localcluster.PortEtcdClient]) + "/v3/kv/range"
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		KVs []struct {
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Len(t, out.KVs, 1, "etcd key %s", key)
	var stored struct {
		APIVersion string `json:"apiVersion"`
	}
	require.NoError(t, json.Unmarshal(out.KVs[0].Value, &stored), "the stored %s: %.200s", key, out.KVs[0].Value)
	return stored.APIVersion
}

// storedVersions is the CRD's status.storedVersions.
func (u *upgradeCluster) storedVersions(t *testing.T) []string {
	t.Helper()
	crd, err := u.crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "llamastackdistributions.llamastack.io", metav1.GetOptions{})
	require.NoError(t, err)
	return crd.Status.StoredVersions
}

// requirePreviousRelease fails the test, rather than skip it, in a clone without the
// commit previousRelease.
func requirePreviousRelease(t *testing.T) {
	t.Helper()
	out, err := exec.Command("git", "-C", env.root, "cat-file", "-e", previousRelease+"^{commit}").CombinedOutput()
	require.NoError(t, err, "the upgrade test starts from commit %s of this repository (the previous release) and needs the "+
		"repository's history: it is not in this clone (a shallow clone? run `git fetch --unshallow`): %s", previousRelease, out)
}

// previousReleaseTree extracts the commit previousRelease of this repository into a
// directory and builds its controller there (stamped with the commit as its version),
// with the module and build caches of this one.
func previousReleaseTree(dir string) (tree, binary string, err error) {
	tree = filepath.Join(dir, "previous-release")
	archive := exec.Command("git", "-C", env.root, "archive", "--format=tar", previousRelease)
	stdout, err := archive.StdoutPipe()
	if err != nil {
		return "", "", err
	}
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	if err := archive.Start(); err != nil {
		return "", "", err
	}
	extractErr := untar(stdout, tree)
	if err := archive.Wait(); err != nil {
		return "", "", fmt.Errorf("git archive %s: %v: %s", previousRelease, err, stderr.Bytes())
	}
	if extractErr != nil {
		return "", "", fmt.Errorf("extracting %s: %w", previousRelease, extractErr)
	}
	binary = filepath.Join(dir, "llama-stack-controller-"+previousRelease)
	build := exec.Command("go", "build", "-o", binary,
		"-ldflags", "-X github.com/llamastack/llama-stack-controller/cmd/controller/app.version="+previousRelease, "./cmd/controller")
	build.Dir = tree
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("building the controller of %s: %v\n%s", previousRelease, err, out)
	}
	return tree, binary, nil
}

// untar writes the regular files and directories of a tar stream under dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("%s: outside the tree", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

// previousController is the previous release's controller binary, run as a process.
type previousController struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

// startPrevious runs the previous release's binary against the cluster, as the
// artifacts' ServiceAccount (the previous release's RBAC), with the flags it has then.
func (u *upgradeCluster) startPrevious(t *testing.T, binary string) *previousController {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(u.cluster.Kubeconfig())
	require.NoError(t, err)
	imp := serviceAccountImpersonation("previous")
	for _, a := range kc.AuthInfos {
		a.Impersonate, a.ImpersonateGroups, a.ImpersonateUserExtra = imp.UserName, imp.Groups, imp.Extra
	}
	kubeconfig := filepath.Join(u.work, "kubeconfig-previous")
	require.NoError(t, clientcmd.WriteToFile(*kc, kubeconfig))
	health, err := freeAddress()
	require.NoError(t, err)
	p := &previousController{done: make(chan struct{}), log: filepath.Join(u.work, "controller-previous.log")}
	f, err := os.Create(p.log)
	require.NoError(t, err)
	p.cmd = exec.Command(binary, "--kubeconfig="+kubeconfig, "--operator-namespace="+operatorNamespace, "--server-probe=off",
		"--metrics-bind-address=0", "--health-probe-bind-address="+health, "-v=2")
	p.cmd.Stdout, p.cmd.Stderr = f, f
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			data, _ := os.ReadFile(p.log)
			lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			if len(lines) > 80 {
				lines = lines[len(lines)-80:]
			}
			t.Logf("the previous release's controller log (end):\n%s", strings.Join(lines, "\n"))
		}
	})
	return p
}

// stop sends SIGTERM, as the kubelet does when its pod is replaced, and waits for the
// exit.
func (p *previousController) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
		require.NoError(t, p.err, "the previous release's controller exits cleanly on SIGTERM")
	case <-time.After(30 * time.Second):
		t.Fatal("the previous release's controller did not exit within 30s of SIGTERM")
	}
}

// diffJSON returns the paths at which two JSON values differ, sorted.
func diffJSON(a, b any, path string) []string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return []string{path}
		}
		var out []string
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		for k := range keys {
			out = append(out, diffJSON(av[k], bv[k], path+"."+k)...)
		}
		sort.Strings(out)
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return []string{path}
		}
		var out []string
		for i := range av {
			out = append(out, diffJSON(av[i], bv[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			return []string{path}
		}
		return nil
	}
}

// upstreamShapedCRD is the CRD as the upstream operator installs it: the same group,
// kind and v1alpha1 fields (this tree's v1alpha1 schema is upstream's, plus admission
// rules that upstream's samples pass), v1alpha1 the only version and the storage
// version, and no conversion. It is derived from artifacts/crd rather than kept as a
// copy of upstream's generated file.
func upstreamShapedCRD(t *testing.T) []byte {
	t.Helper()
	crd, err := localcluster.LoopbackCRD(env.root, 0)
	require.NoError(t, err)
	versions, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	require.NoError(t, err)
	var kept []any
	for _, v := range versions {
		version := v.(map[string]any)
		if version["name"] == "v1alpha1" {
			version["served"], version["storage"] = true, true
			kept = append(kept, version)
		}
	}
	require.Len(t, kept, 1, "artifacts/crd serves v1alpha1")
	require.NoError(t, unstructured.SetNestedSlice(crd.Object, kept, "spec", "versions"))
	unstructured.RemoveNestedField(crd.Object, "spec", "conversion")
	unstructured.RemoveNestedField(crd.Object, "status")
	out, err := crd.MarshalJSON()
	require.NoError(t, err)
	return out
}
