//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// startPrometheus runs a real Prometheus (Debian's package; make tools installs it) on
// loopback that scrapes the suite's controller every second, as the ServiceMonitor of
// artifacts/monitoring does (honor_labels, the namespace and pod target labels), and
// evaluates the rules of artifacts/monitoring/prometheus_rule.yaml every second. It
// returns its base URL; the process is stopped, by PID, when the test ends.
func startPrometheus(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	require.NoError(t, err, "prometheus (Debian's prometheus package) is needed: make tools installs it")
	dir := t.TempDir()

	raw, err := os.ReadFile(filepath.Join(env.root, "artifacts", "monitoring", "prometheus_rule.yaml"))
	require.NoError(t, err)
	var rule struct {
		Spec map[string]any `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rule))
	rules, err := yaml.Marshal(rule.Spec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644))

	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
- rules.yaml
scrape_configs:
- job_name: llama-stack-controller-metrics
  honor_labels: true
  static_configs:
  - targets: [%q]
    labels:
      namespace: llama-stack-controller-system
      pod: suite-controller
`, env.metricsAddr)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644))

	addr, err := freeAddress()
	require.NoError(t, err)
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	eventually(t, 30*time.Second, "prometheus is ready", func(context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("prometheus exited:\n%s", logs.String())
		default:
		}
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return base
}

// promAPI GETs a Prometheus API path and decodes its data into out.
func promAPI(base, path string, out any) error {
	resp, err := http.Get(base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return err
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", path, body.Error)
	}
	return json.Unmarshal(body.Data, out)
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func promQuery(base, q string) ([]promSample, error) {
	var data struct {
		Result []promSample `json:"result"`
	}
	err := promAPI(base, "/api/v1/query?query="+url.QueryEscape(q), &data)
	return data.Result, err
}

// A real Prometheus scrapes the controller and evaluates the shipped rules: every rule
// evaluates without error on the series the controller serves, a CR that is not Ready
// has its alert pending (it fires after 10 minutes, as promtool's tests show), a Ready
// one has none, and with the suite's controller leading, no NoLeader alert.
func TestPrometheusScrapesTheControllerAndEvaluatesTheRules(t *testing.T) {
	ns := newNamespace(t)
	create(t, llsd(ns, "app"))
	create(t, llsd(ns, "unpublished", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Distribution.Name = "remote-vllm" }))
	waitReady(t, ns, "app")
	base := startPrometheus(t)

	eventually(t, 60*time.Second, "the controller is scraped and the CRs' series are in", func(context.Context) (bool, error) {
		up, err := promQuery(base, `up{job="llama-stack-controller-metrics"} == 1`)
		if err != nil || len(up) != 1 {
			return false, err
		}
		ready, err := promQuery(base, fmt.Sprintf(`llama_stack_controller_llamastackdistribution_ready{namespace=%q}`, ns))
		if err != nil {
			return false, err
		}
		values := map[string]any{}
		for _, s := range ready {
			values[s.Metric["name"]] = s.Value[1]
		}
		return values["app"] == "1" && values["unpublished"] == "0", nil
	})
	// The queue's series carry the name the rules and the dashboard select.
	depth, err := promQuery(base, `workqueue_depth{name="llama-stack-controller"}`)
	require.NoError(t, err)
	assert.Len(t, depth, 1)

	type alert struct {
		Labels map[string]string `json:"labels"`
		State  string            `json:"state"`
	}
	var groups struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name           string    `json:"name"`
				Health         string    `json:"health"`
				LastError      string    `json:"lastError"`
				LastEvaluation time.Time `json:"lastEvaluation"`
				Alerts         []alert   `json:"alerts"`
			} `json:"rules"`
		} `json:"groups"`
	}
	started := time.Now()
	eventually(t, 60*time.Second, "every rule evaluated, and the not-Ready CR's alert pending", func(context.Context) (bool, error) {
		if err := promAPI(base, "/api/v1/rules", &groups); err != nil {
			return false, err
		}
		if len(groups.Groups) != 1 || len(groups.Groups[0].Rules) != 5 {
			return false, fmt.Errorf("want the one group of 5 rules, got %+v", groups)
		}
		pending := false
		for _, r := range groups.Groups[0].Rules {
			if r.Health == "err" {
				return false, fmt.Errorf("rule %s: %s", r.Name, r.LastError)
			}
			// Evaluated a few times since the CRs' series were in.
			if r.Health != "ok" || r.LastEvaluation.Before(started.Add(3*time.Second)) {
				return false, nil
			}
			for _, a := range r.Alerts {
				if r.Name == "LlamaStackDistributionNotReady" && a.Labels["namespace"] == ns && a.Labels["name"] == "unpublished" && a.State == "pending" {
					pending = true
				}
			}
		}
		return pending, nil
	})
	for _, r := range groups.Groups[0].Rules {
		for _, a := range r.Alerts {
			assert.False(t, a.Labels["namespace"] == ns && a.Labels["name"] == "app", "%s for a Ready CR: %v", r.Name, a)
			assert.NotEqual(t, "LlamaStackControllerNoLeader", r.Name, "the suite's controller leads: %v", a)
		}
	}
	assert.True(t, strings.HasPrefix(base, "http://127.0.0.1:"), "Prometheus listens on loopback only: %s", base)
}

// prometheusOperatorCRD returns the path of one of the Prometheus Operator module's CRD
// manifests (localcluster.PrometheusOperatorCRD).
func prometheusOperatorCRD(t *testing.T, name string) string {
	t.Helper()
	path, err := localcluster.PrometheusOperatorCRD(context.Background(), name)
	require.NoError(t, err)
	return path
}

// artifacts/monitoring is what the Prometheus Operator's CRDs accept, field for field
// (strict validation: a misspelled or unknown field fails).
func TestMonitoringArtifactsApplyToThePrometheusOperatorCRDs(t *testing.T) {
	ctx := context.Background()
	for _, crd := range []string{"servicemonitors", "prometheusrules"} {
		name := crd + ".monitoring.coreos.com"
		kubectl(t, "apply", "--server-side", "-f", prometheusOperatorCRD(t, "monitoring.coreos.com_"+crd+".yaml"))
		t.Cleanup(func() { kubectl(t, "delete", "crd", name, "--ignore-not-found", "--wait=true") })
		require.NoError(t, localcluster.WaitCRDEstablished(ctx, env.cfg, name, 30*time.Second))
	}
	const ns = "llama-stack-controller-system"
	if _, err := env.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		_, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = env.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	} else {
		require.NoError(t, err)
	}
	out := kubectl(t, "apply", "--dry-run=server", "--validate=strict", "-k", filepath.Join(env.root, "artifacts", "monitoring"))
	for _, obj := range []string{
		"service/llama-stack-controller-metrics", "servicemonitor.monitoring.coreos.com/llama-stack-controller",
		"prometheusrule.monitoring.coreos.com/llama-stack-controller", "configmap/llama-stack-controller-dashboard",
	} {
		assert.Contains(t, out, obj+" created (server dry run)")
	}
}
