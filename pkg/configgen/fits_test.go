package configgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFits(t *testing.T) {
	const v07 = `version: 2
distro_name: starter
apis: [inference, safety, eval, tool_runtime]
providers:
  inference: [{provider_id: vllm, provider_type: remote::vllm, config: {base_url: "http://v"}}]
  safety: [{provider_id: llama-guard, provider_type: inline::llama-guard}]
  eval: [{provider_id: builtin, provider_type: inline::builtin}]
registered_resources:
  shields: [{shield_id: g}]
safety: {default_shield_id: g}
some_key_no_server_reads: true
`
	if err := Fits([]byte(v07), mustVersion(t, "0.7.1")); err != nil {
		t.Errorf("0.7.1: %v", err)
	}
	err := Fits([]byte(v07), mustVersion(t, "1.3.0"))
	if err == nil {
		t.Fatal("1.3.0 accepted a config with safety and eval")
	}
	for _, want := range []string{
		"apis lists safety, which server 1.3.0 does not have (removed in 1.0",
		"apis lists eval, which server 1.3.0 does not have (removed in 0.8",
		"providers.safety: server 1.3.0 has no safety API",
		"providers.eval: server 1.3.0 has no eval API",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	for _, ignored := range []string{"default_shield_id", "registered_resources.shields"} {
		if strings.Contains(err.Error(), ignored) {
			t.Errorf("1.3.0 ignores %s, so it is not refused: %v", ignored, err)
		}
	}
	if strings.Contains(err.Error(), "some_key") {
		t.Errorf("a key no server reads is not this check's business: %v", err)
	}
	err = Fits([]byte("version: 2\napis: [inference]\nproviders:\n  inference: [{provider_id: t, provider_type: inline::transformers}]\n"), mustVersion(t, "1.3.0"))
	if err == nil || !strings.Contains(err.Error(), "no provider type inline::transformers") {
		t.Errorf("a removed provider type: %v", err)
	}
	if err := Fits([]byte("version: 2\n"), mustVersion(t, "2.0.0")); err == nil {
		t.Error("a version whose shape is not known fits nothing")
	}
	base, _ := LookupDistribution("starter")
	b, _ := base.Base()
	if err := Fits(b, mustVersion(t, base.ServerVersion)); err != nil {
		t.Errorf("the starter base: %v", err)
	}
}

// Ignored names each key an earlier version read that v drops, only from the version
// that drops it, and only when it says something.
func TestIgnored(t *testing.T) {
	const cfg = "version: 2\ntelemetry: {enabled: true}\nsafety: {default_shield_id: g}\n" +
		"registered_resources: {shields: [{shield_id: g}], datasets: [], benchmarks: [{benchmark_id: b}], connectors: [{connector_id: c}]}\n" +
		"server: {port: 8321, cors: false, quota: {kvstore: {backend: kv_default}}}\n"
	for version, want := range map[string][]string{
		"0.3.4": nil,
		"0.4.2": {"telemetry"},
		"0.7.1": {"telemetry", "registered_resources.connectors"},
		"0.8.0": {"telemetry", "registered_resources.connectors", "registered_resources.benchmarks"},
		"1.3.0": {"telemetry", "registered_resources.connectors", "registered_resources.benchmarks", "registered_resources.shields", "safety", "server.quota"},
	} {
		got := Ignored([]byte(cfg), mustVersion(t, version))
		var keys []string
		for _, g := range got {
			keys = append(keys, g[:strings.Index(g, ":")])
			if !strings.Contains(g, "server "+version+" ignores it (") {
				t.Errorf("%s: %q does not name the version and what replaced the key", version, g)
			}
		}
		if strings.Join(keys, ",") != strings.Join(want, ",") {
			t.Errorf("%s: ignored %v, want %v", version, keys, want)
		}
	}
	if got := Ignored([]byte("version: [2"), mustVersion(t, "1.3.0")); got != nil {
		t.Errorf("a config that does not parse: %v", got)
	}
}

func TestPreflight(t *testing.T) {
	v := mustVersion(t, "1.3.0")
	for name, tc := range map[string]struct {
		config, want string
	}{
		"a config that starts": {config: "version: 2\ndistro_name: mine\napis: [inference]\nproviders:\n  inference: [{provider_id: vllm, provider_type: remote::vllm, config: {base_url: 'http://v'}}]\n"},
		"an API the version lacks": {
			config: "version: 2\napis: [inference, safety]\nproviders:\n  inference: [{provider_id: vllm, provider_type: remote::vllm, config: {base_url: 'http://v'}}]\n  safety: [{provider_id: g, provider_type: inline::llama-guard}]\n",
			want:   "no safety API",
		},
		"a provider whose dependency the config lacks": {
			config: "version: 2\napis: [files, skills]\nproviders:\n  skills: [{provider_id: skills, provider_type: inline::builtin, config: {persistence: {backend: sql_default, table_name: skills}}}]\n",
			want:   "needs the files API",
		},
		"a provider without a required field": {
			config: "version: 2\napis: [files]\nproviders:\n  files: [{provider_id: fs, provider_type: inline::localfs, config: {}}]\n",
			want:   "providers.files[0] (fs, inline::localfs)",
		},
		"no distro_name nor image_name": {
			config: "version: 2\napis: [inference]\nproviders:\n  inference: [{provider_id: vllm, provider_type: remote::vllm, config: {base_url: 'http://v'}}]\n",
			want:   "neither distro_name nor image_name is set: server 1.3.0 requires one",
		},
		"no providers": {config: "version: 2\ndistro_name: mine\n", want: "providers is missing"},
		"keys 1.3 ignores": {config: "version: 2\ndistro_name: mine\napis: [inference]\nproviders:\n  inference: [{provider_id: vllm, provider_type: remote::vllm, config: {base_url: 'http://v'}}]\n" +
			"safety: {default_shield_id: g}\nregistered_resources: {shields: [{shield_id: g}], datasets: [{dataset_id: d}]}\nserver: {cors: true}\n"},
		"apis null": {
			config: "version: 2\napis: null\nproviders:\n  inference: [{provider_id: vllm, provider_type: remote::vllm, config: {base_url: 'http://v'}}]\n",
			want:   "apis is null",
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := Preflight([]byte(tc.config), v)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Preflight: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Preflight = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// The start-up checks of the older lines: MCP tool groups registered at start (to 0.6),
// the default shield (0.4 to 0.8), each only where the server runs it.
func TestPreflightStartupChecks(t *testing.T) {
	const mcp = "version: 2\nimage_name: t\napis: [tool_runtime]\nproviders:\n  tool_runtime: [{provider_id: mcp, provider_type: remote::model-context-protocol}]\n"
	const shield = "version: 2\nimage_name: t\napis: [inference, safety]\nproviders:\n  inference: [{provider_id: vllm, provider_type: remote::vllm, config: {url: 'http://v'}}]\n" +
		"  safety: [{provider_id: llama-guard, provider_type: inline::llama-guard}]\n"
	for name, tc := range map[string]struct {
		config, version, want, absent string
	}{
		"mcp tool group without endpoint at 0.6": {
			config: mcp + "registered_resources:\n  tool_groups: [{toolgroup_id: mcp::docs, provider_id: mcp}]\n", version: "0.6.1",
			want: "registered_resources.tool_groups[0] (mcp::docs): provider mcp is remote::model-context-protocol",
		},
		"mcp tool group with endpoint at 0.6": {
			config: mcp + "registered_resources:\n  tool_groups: [{toolgroup_id: mcp::docs, provider_id: mcp, mcp_endpoint: {uri: 'http://mcp:8000/sse'}}]\n", version: "0.6.1",
		},
		"mcp tool group without endpoint at 0.7 (not registered at start)": {
			config: mcp + "registered_resources:\n  tool_groups: [{toolgroup_id: mcp::docs, provider_id: mcp}]\n", version: "0.7.1",
		},
		"default shield not registered at 0.7": {
			config: shield + "registered_resources:\n  shields: [{shield_id: guard, provider_id: llama-guard}]\nsafety: {default_shield_id: other}\n", version: "0.7.1",
			want: "safety.default_shield_id other is not one of the shields the config registers (guard)",
		},
		"default shield registered at 0.7": {
			config: shield + "registered_resources:\n  shields: [{shield_id: guard, provider_id: llama-guard}]\nsafety: {default_shield_id: guard}\n", version: "0.7.1",
		},
		"default shield switched by env at 0.7": {
			config: shield + "registered_resources:\n  shields: [{shield_id: '${env.SAFETY_MODEL:+guard}', provider_id: llama-guard}]\nsafety: {default_shield_id: other}\n", version: "0.7.1",
		},
		"default shield without safety at 0.5": {
			config: "version: 2\nimage_name: t\napis: [inference]\nproviders:\n  inference: [{provider_id: vllm, provider_type: remote::vllm, config: {url: 'http://v'}}]\nsafety: {default_shield_id: guard}\n", version: "0.5.2",
			want: "needs the safety API",
		},
		"default shield at 0.3 (not checked)": {
			config: "version: 2\nimage_name: t\napis: [inference]\nproviders:\n  inference: [{provider_id: vllm, provider_type: remote::vllm, config: {url: 'http://v'}}]\nsafety: {default_shield_id: guard}\n", version: "0.3.4",
			want: "storage is missing: server 0.3.4 requires it", absent: "default_shield_id",
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := Preflight([]byte(tc.config), mustVersion(t, tc.version))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Preflight: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Preflight = %v, want an error with %q", err, tc.want)
			}
			if tc.absent != "" && strings.Contains(err.Error(), tc.absent) {
				t.Fatalf("Preflight = %v, want nothing about %q", err, tc.absent)
			}
		})
	}
}

// TestPreflightGolden judges the user configs of testdata/preflight/<case> as the
// controller does before a rollout: config.yaml at the case's server-version. A case
// with want-error.txt is refused, with each of its lines in the message; any other is
// rolled out, with exactly the lines of want-ignored.txt as what the version ignores
// (none when it has no such file). testdata/preflight/README.md records what the
// server's own start-up checks said of each case at its tag.
func TestPreflightGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/preflight/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, dir := range dirs {
		if filepath.Ext(dir) == ".md" {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			config, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			v := mustVersion(t, strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dir, "server-version"))))))
			perr := Preflight(config, v)
			if want := readLines(t, filepath.Join(dir, "want-error.txt")); want != nil {
				if perr == nil {
					t.Fatalf("Preflight accepted the config, want an error with %q", want)
				}
				for _, w := range want {
					if !strings.Contains(perr.Error(), w) {
						t.Errorf("Preflight = %v, want it to say %q", perr, w)
					}
				}
				return
			}
			if perr != nil {
				t.Fatalf("Preflight: %v", perr)
			}
			if d := cmp.Diff(readLines(t, filepath.Join(dir, "want-ignored.txt")), Ignored(config, v)); d != "" {
				t.Errorf("ignored (-want +got):\n%s", d)
			}
		})
	}
}

func must[T any](x T, err error) T {
	if err != nil {
		panic(err)
	}
	return x
}
