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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/llamastack/llama-stack-controller/pkg/controller"
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
	dyn    dynamic.Interface
	// webhookAddr is where the controller serves the CRD's conversion webhook, which the
	// CRD reaches on loopback (localcluster.LoopbackCRD).
	webhookAddr string
}

// startCluster starts a control plane with nodes kwok nodes and installs the CRD, the
// controller's namespace, ServiceAccount and ClusterRole, and the operator ConfigMap,
// all from artifacts/, with NetworkPolicies turned on; and the real CRDs of every
// optional kind (optionalCRDs), so that the CRs have every child they can have. The driver's own client is not rate limited in practice, so that
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
		bc.dyn, err = dynamic.NewForConfig(cfg)
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
	optional, err := optionalCRDs(ctx, env.root)
	if err != nil {
		return err
	}
	defer func() {
		for _, f := range optional {
			if strings.HasPrefix(filepath.Base(f), "llsc-bench-") {
				_ = os.Remove(f)
			}
		}
	}()
	batches := [][]string{
		append([]string{crdFile.Name(), a("controller", "namespace.yaml"), a("rbac", "service_account.yaml"),
			a("rbac", "cluster_role.yaml"), a("rbac", "cluster_role_binding.yaml"),
			a("rbac", "webhook_role.yaml"), a("rbac", "webhook_role_binding.yaml")}, optional...),
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
	// NetworkPolicies on, as every optional child is (the artifacts leave them off).
	patch := `{"data":{"featureFlags":"enableNetworkPolicy:\n  enabled: true\n"}}`
	if _, err := bc.kube.CoreV1().ConfigMaps(operatorNamespace).Patch(ctx, controller.OperatorConfigMapName,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("turning NetworkPolicies on: %w", err)
	}
	for _, name := range optionalCRDNames {
		if err := localcluster.WaitCRDEstablished(ctx, bc.lc.RESTConfig(), name, time.Minute); err != nil {
			return err
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

// optionalCRDNames are the CRDs optionalCRDs installs.
var optionalCRDNames = []string{
	"servicemonitors.monitoring.coreos.com", localcluster.RouteCRDName, "gateways.gateway.networking.k8s.io",
	"httproutes.gateway.networking.k8s.io", "backendtlspolicies.gateway.networking.k8s.io",
}

// optionalCRDs are the files of the real CRDs of the optional kinds, as the e2e tests
// install them: the Prometheus Operator's ServiceMonitor, a Route CRD of OpenShift's
// types (written to a temporary file), and Gateway API's Gateway, HTTPRoute and
// BackendTLSPolicy of the standard channel.
func optionalCRDs(ctx context.Context, root string) ([]string, error) {
	monitors, err := localcluster.PrometheusOperatorCRD(ctx, "monitoring.coreos.com_servicemonitors.yaml")
	if err != nil {
		return nil, err
	}
	files := []string{monitors}
	for _, name := range []string{"gateways", "httproutes", "backendtlspolicies"} {
		f, err := localcluster.GatewayAPICRD(ctx, root, "gateway.networking.k8s.io_"+name+".yaml")
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	raw, err := localcluster.RouteCRD(ctx)
	if err != nil {
		return nil, err
	}
	route, err := os.CreateTemp("", "llsc-bench-route-crd-*.yaml")
	if err != nil {
		return nil, err
	}
	_, err = route.Write(raw)
	if cerr := route.Close(); err == nil {
		err = cerr
	}
	return append(files, route.Name()), err
}

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
