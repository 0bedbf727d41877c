//go:build bench

package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
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
	crds, err := filepath.Glob(a("crd", "*.yaml"))
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("no CRD in artifacts/crd: %v", err)
	}
	batches := [][]string{
		append(crds, a("controller", "namespace.yaml"), a("rbac", "service_account.yaml"),
			a("rbac", "cluster_role.yaml"), a("rbac", "cluster_role_binding.yaml")),
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
