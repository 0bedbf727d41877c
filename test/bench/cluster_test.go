//go:build bench

package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// kcmQPS is kube-controller-manager's client QPS in the bench.
const kcmQPS = 500

// benchCluster is one local control plane with the controller's artifacts installed.
type benchCluster struct {
	lc     *localcluster.Cluster
	kube   kubernetes.Interface
	client clientset.Interface
	// webhookAddr is where the controller serves the CRD's conversion webhook, which the
	// CRD reaches on loopback (localcluster.LoopbackCRD).
	webhookAddr string
}

// startCluster starts a control plane with nodes kwok nodes and installs the CRD, the
// controller's namespace, ServiceAccount and ClusterRole, and the operator ConfigMap,
// all from artifacts/. The driver's own client is not rate limited in practice, so that
// it never holds the load back.
func startCluster(ctx context.Context, env *benchEnv, name string, nodes int) (*benchCluster, error) {
	lc, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: env.binDir, StagesFile: env.stages, Nodes: nodes,
		LogDir: filepath.Join(env.out, name, "cluster-logs"),
		// kube-controller-manager's own client limits (20 QPS per controller) would
		// otherwise decide how fast 200 Deployments roll out, whatever the controller does.
		ExtraControllerManagerArgs: []string{"--kube-api-qps=" + strconv.Itoa(kcmQPS), "--kube-api-burst=" + strconv.Itoa(2*kcmQPS)},
	})
	if err != nil {
		return nil, err
	}
	bc := &benchCluster{lc: lc}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = lc.Stop()
		return nil, err
	}
	bc.webhookAddr = ln.Addr().String()
	_ = ln.Close()
	cfg := lc.RESTConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	cfg.UserAgent = "llsc-bench-driver"
	if bc.kube, err = kubernetes.NewForConfig(cfg); err == nil {
		bc.client, err = clientset.NewForConfig(cfg)
	}
	if err == nil {
		err = bc.install(ctx, env)
	}
	if err != nil {
		_ = lc.Stop()
		return nil, err
	}
	return bc, nil
}

func (bc *benchCluster) install(ctx context.Context, env *benchEnv) error {
	a := func(parts ...string) string {
		return filepath.Join(append([]string{env.root, "artifacts"}, parts...)...)
	}
	port, err := strconv.Atoi(bc.webhookAddr[strings.LastIndex(bc.webhookAddr, ":")+1:])
	if err != nil {
		return err
	}
	crd, err := localcluster.LoopbackCRD(env.root, port)
	if err != nil {
		return err
	}
	raw, err := crd.MarshalJSON()
	if err != nil {
		return err
	}
	crdFile, err := os.CreateTemp("", "llsc-bench-crd-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(crdFile.Name())
	if _, err := crdFile.Write(raw); err != nil {
		_ = crdFile.Close()
		return err
	}
	if err := crdFile.Close(); err != nil {
		return err
	}
	batches := [][]string{
		{crdFile.Name(), a("controller", "namespace.yaml"), a("rbac", "service_account.yaml"),
			a("rbac", "cluster_role.yaml"), a("rbac", "cluster_role_binding.yaml"),
			a("rbac", "webhook_role.yaml"), a("rbac", "webhook_role_binding.yaml")},
		{a("controller", "operator_config.yaml")},
	}
	for _, files := range batches {
		args := []string{"--kubeconfig", bc.lc.Kubeconfig(), "apply", "--server-side"}
		for _, f := range files {
			args = append(args, "-f", f)
		}
		if out, err := exec.CommandContext(ctx, filepath.Join(env.binDir, "kubectl"), args...).CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl apply: %v\n%s", err, out)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := bc.client.LlamastackV1alpha1().LlamaStackDistributions("default").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the CRD is not served: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (bc *benchCluster) stop() error { return bc.lc.Stop() }

// waitConversion waits until the API server converts through the controller's webhook
// (a dry-run create of a v1alpha1 CR, stored as v1alpha2): the driver writes v1alpha1.
func (bc *benchCluster) waitConversion(ctx context.Context) error {
	probe := newBenchCR(0)
	probe.Namespace, probe.Name = "default", "conversion-probe"
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := bc.client.LlamastackV1alpha1().LlamaStackDistributions("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the conversion webhook does not serve: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
