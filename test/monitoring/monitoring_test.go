// Package monitoring checks artifacts/monitoring: the alerting rules with promtool (Debian's
// prometheus package; `make tools` installs it), and that the rules and the dashboard read
// only series the controller exports.
package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/controller"
)

const dir = "../../artifacts/monitoring"

// promtool returns the promtool binary, failing the test with how to get it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool (Debian's prometheus package) is needed: make tools installs it")
	return p
}

// rulesFile writes the PrometheusRule's spec, a Prometheus rules file, and the promtool
// tests beside it into a temporary directory; it returns the directory.
func rulesFile(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "prometheus_rule.yaml"))
	require.NoError(t, err)
	var rule struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       map[string]any `json:"spec"`
	}
	require.NoError(t, yaml.UnmarshalStrict(raw, &rule))
	require.Equal(t, "monitoring.coreos.com/v1", rule.APIVersion)
	require.Equal(t, "PrometheusRule", rule.Kind)
	spec, err := yaml.Marshal(rule.Spec)
	require.NoError(t, err)
	out := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(out, "rules.yaml"), spec, 0o644))
	tests, err := os.ReadFile(filepath.Join(dir, "prometheus_rule_test.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(out, "prometheus_rule_test.yaml"), tests, 0o644))
	return out
}

func runIn(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}

// The rules are valid and fire when, and only when, their tests say.
func TestRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	d := rulesFile(t)
	assert.Contains(t, runIn(t, d, bin, "check", "rules", "rules.yaml"), "SUCCESS: 5 rules found")
	assert.Contains(t, runIn(t, d, bin, "test", "rules", "prometheus_rule_test.yaml"), "SUCCESS")
}

// Every alert has a test: an alert without one could never fire and nobody would know.
func TestEveryAlertIsTested(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(dir, "prometheus_rule.yaml"))
	require.NoError(t, err)
	tests, err := os.ReadFile(filepath.Join(dir, "prometheus_rule_test.yaml"))
	require.NoError(t, err)
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)$`).FindAllStringSubmatch(string(raw), -1)
	require.NotEmpty(t, alerts)
	for _, a := range alerts {
		assert.Contains(t, string(tests), "alertname: "+a[1]+"\n", "%s has no promtool test", a[1])
	}
}

// exported lists the metric names the controller registers (histograms with their
// _bucket, _sum and _count series).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	controller.RegisterMetrics()
	ch := make(chan *prometheus.Desc, 256)
	go func() { controller.Registry.Describe(ch); close(ch) }()
	names := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		require.NotNil(t, m, d.String())
		for _, s := range []string{"", "_bucket", "_sum", "_count"} {
			names[m[1]+s] = true
		}
	}
	return names
}

// ours matches the series names of the controller's families in an expression.
var ours = regexp.MustCompile(`\b(llama_stack_controller_[a-z_]+|workqueue_[a-z_]+|rest_client_[a-z_]+|leader_election_[a-z_]+)\b`)

// dashboardExprs returns the expressions of every panel of the dashboard.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "dashboard_configmap.yaml"))
	require.NoError(t, err)
	var cm struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &cm))
	assert.Equal(t, "1", cm.Metadata.Labels["grafana_dashboard"], "Grafana's sidecar loads labelled ConfigMaps only")
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.Contains(t, cm.Data, "llama-stack-controller.json")
	require.NoError(t, json.Unmarshal([]byte(cm.Data["llama-stack-controller.json"]), &dash))
	require.NotEmpty(t, dash.UID)
	exprs := map[string]string{}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		assert.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		require.NotEmpty(t, p.Targets, p.Title)
		for i, tg := range p.Targets {
			exprs[p.Title+"/"+string(rune('A'+i))] = tg.Expr
		}
	}
	return exprs
}

// The dashboard and the rules read series the controller exports, with the names it
// gives them; a renamed metric fails here, not silently on a dashboard.
func TestRulesAndDashboardReadExportedSeries(t *testing.T) {
	names := exported(t)
	exprs := dashboardExprs(t)
	raw, err := os.ReadFile(filepath.Join(dir, "prometheus_rule.yaml"))
	require.NoError(t, err)
	for i, m := range regexp.MustCompile(`(?m)^\s*expr: (.+)$`).FindAllStringSubmatch(string(raw), -1) {
		exprs["rule "+string(rune('0'+i))] = m[1]
	}
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		used := ours.FindAllString(exprs[k], -1)
		assert.NotEmpty(t, used, "%s reads none of the controller's series: %s", k, exprs[k])
		for _, u := range used {
			assert.True(t, names[u], "%s reads %s, which the controller does not export", k, u)
		}
	}
}
