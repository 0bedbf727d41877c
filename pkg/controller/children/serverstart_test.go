package children

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

func TestLineOf(t *testing.T) {
	for version, want := range map[string]serverLine{
		"0.3.0": lineLlamaStack, "0.7.1": lineLlamaStack, "0.7.99": lineLlamaStack,
		"0.8.0": lineOGX, "1.3.0": lineOGX, "2.0.0": lineOGX,
		"": lineUnknown, "latest": lineUnknown, "1.3": lineUnknown,
	} {
		assert.Equal(t, want, lineOf(version), version)
	}
}

func envMap(env []corev1.EnvVar) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return m
}

// Each line starts the way its images start: the variables the server reads, the
// command (or the image's entrypoint), and the data directory on the storage volume.
func TestServerStartByLine(t *testing.T) {
	storage := func(path string) func(*v1alpha1.LlamaStackDistribution) {
		return func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.Storage = &v1alpha1.StorageSpec{MountPath: path}
			l.Spec.Server.ContainerSpec.Port = 9000
			l.Spec.Server.Workers = ptr.To(int32(3))
		}
	}
	tests := map[string]struct {
		version  string
		config   bool
		distro   string
		mutate   func(*v1alpha1.LlamaStackDistribution)
		command  []string
		env      []string // in order
		values   map[string]string
		absentOf []string
	}{
		"llama-stack with a config runs the startup script": {
			version: "0.7.1", config: true, distro: "starter",
			command: []string{"/bin/sh", "-c", StartupScript},
			env:     []string{"HF_HOME", "LLS_WORKERS", "LLS_PORT", "LLAMA_STACK_CONFIG"},
		},
		"llama-stack without a config keeps the image's command": {
			version: "0.7.1", distro: "starter",
			env: []string{"HF_HOME", "LLS_WORKERS", "LLS_PORT", "LLAMA_STACK_CONFIG"},
		},
		"OGX with a config runs the image's entrypoint on the mounted file": {
			version: "1.3.0", config: true, distro: "starter",
			env: []string{"HF_HOME", "OGX_CONFIG_DIR", "OGX_WORKERS", "OGX_PORT", "RUN_CONFIG_PATH", "OGX_CONFIG",
				"OGX_METRICS_ENDPOINT_ENABLED", "OGX_METRICS_HOST", "OGX_METRICS_PORT", "SQLITE_STORE_DIR", "FILES_STORAGE_DIR"},
			values: map[string]string{
				"RUN_CONFIG_PATH": "/etc/llama-stack/config.yaml", "OGX_CONFIG": "/etc/llama-stack/config.yaml",
				"OGX_CONFIG_DIR": "/.llama", "SQLITE_STORE_DIR": "/.llama/distributions/starter",
				"FILES_STORAGE_DIR": "/.llama/distributions/starter/files", "OGX_PORT": "8321", "OGX_WORKERS": "1",
			},
		},
		"OGX port, workers and data follow the spec": {
			version: "0.8.0", config: true, distro: "postgres-demo", mutate: storage("/data"),
			env: []string{"HF_HOME", "OGX_CONFIG_DIR", "OGX_WORKERS", "OGX_PORT", "RUN_CONFIG_PATH", "OGX_CONFIG", "SQLITE_STORE_DIR", "FILES_STORAGE_DIR"},
			values: map[string]string{
				"HF_HOME": "/data", "OGX_CONFIG_DIR": "/data", "OGX_PORT": "9000", "OGX_WORKERS": "3",
				"SQLITE_STORE_DIR": "/data/distributions/postgres-demo",
			},
		},
		"OGX without a config or distribution runs the bundled config": {
			version: "1.3.0",
			env:     []string{"HF_HOME", "OGX_CONFIG_DIR", "OGX_WORKERS", "OGX_PORT", "OGX_METRICS_ENDPOINT_ENABLED", "OGX_METRICS_HOST", "OGX_METRICS_PORT"},
		},
		"unknown line with a config asks the image which package it has": {
			config:  true,
			command: []string{"/bin/sh", "-c", probeStartupScript},
			env:     []string{"HF_HOME", "LLS_WORKERS", "LLS_PORT", "LLAMA_STACK_CONFIG", "OGX_CONFIG_DIR", "OGX_WORKERS", "OGX_PORT", "RUN_CONFIG_PATH", "OGX_CONFIG"},
		},
		"unknown line without a config keeps the image's command": {
			env: []string{"HF_HOME", "LLS_WORKERS", "LLS_PORT", "LLAMA_STACK_CONFIG", "OGX_CONFIG_DIR", "OGX_WORKERS", "OGX_PORT"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := revision.Inputs{Image: "example.com/server:x", Replicas: ptr.To(int32(1)), ServerVersion: tc.version, Distro: tc.distro}
			if tc.config {
				in = withUserConfig(in)
			}
			c := serverOf(t, NewDeployment(hub(testLLSD(tc.mutate)), in))
			assert.Equal(t, tc.command, c.Command)
			assert.Equal(t, tc.env, envNames(c.Env))
			got := envMap(c.Env)
			for k, v := range tc.values {
				assert.Equal(t, v, got[k], k)
			}
		})
	}
}

// The user's command still wins on every line.
func TestServerStartUserCommandWins(t *testing.T) {
	l := testLLSD(func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Command = []string{"my-server"} })
	for _, v := range []string{"0.7.1", "1.3.0", ""} {
		in := withUserConfig(revision.Inputs{Image: testImage, ServerVersion: v})
		assert.Equal(t, []string{"my-server"}, serverOf(t, NewDeployment(hub(l), in)).Command, v)
	}
}

// probeTools writes a python3 that finds the ogx package when $FAKE_OGX is "yes" (and
// otherwise answers the llama_stack version probe with uvicorn), an ogx CLI, a uvicorn
// and, when entrypoint is set, an OGX image's entrypoint; each prints its PID and
// arguments.
func probeTools(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	python := `#!/bin/sh
if [ "$1" = "-c" ]; then
  case "$2" in
  *find_spec*) [ "$FAKE_OGX" = yes ] && exit 0; exit 1 ;;
  esac
  echo uvicorn
  exit 0
fi
echo "$$ python3 $*"
`
	for name, body := range map[string]string{
		"python3": python,
		"ogx":     "#!/bin/sh\necho \"$$ ogx $*\"\n",
		"uvicorn": "#!/bin/sh\necho \"$$ uvicorn $*\"\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755))
	}
	return dir
}

func TestProbeStartupScriptRuns(t *testing.T) {
	require.True(t, strings.HasSuffix(probeStartupScript, StartupScript), "the llama-stack branch is StartupScript")
	dir := probeTools(t)
	entry := filepath.Join(t.TempDir(), "ogx-entrypoint.sh")
	require.NoError(t, os.WriteFile(entry, []byte("#!/bin/sh\necho \"$$ entrypoint $*\"\n"), 0o755))
	script := strings.ReplaceAll(probeStartupScript, ogxEntrypoint, entry)
	tests := map[string]struct {
		ogx, entrypoint bool
		want            string
	}{
		"ogx with the image's entrypoint": {ogx: true, entrypoint: true, want: "entrypoint "},
		"ogx without an entrypoint":       {ogx: true, want: "ogx stack run /etc/llama-stack/config.yaml"},
		"llama-stack":                     {want: "uvicorn llama_stack.core.server.server:create_app --host 0.0.0.0 --port 8321 --workers 1 --factory"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := script
			if !tc.entrypoint {
				s = strings.ReplaceAll(probeStartupScript, ogxEntrypoint, filepath.Join(t.TempDir(), "none"))
			}
			cmd := exec.Command("/bin/sh", "-c", s)
			ogx := "no"
			if tc.ogx {
				ogx = "yes"
			}
			cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "FAKE_OGX=" + ogx, "RUN_CONFIG_PATH=" + revision.UserConfigPath}
			var out strings.Builder
			cmd.Stdout = &out
			require.NoError(t, cmd.Run())
			assert.Equal(t, fmt.Sprintf("%d %s\n", cmd.Process.Pid, tc.want), out.String())
		})
	}
}
