package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The parts of a GitHub Actions workflow the release checks read. yaml/v3 rather than
// sigs.k8s.io/yaml, whose YAML 1.1 reads the key `on` as the boolean true.
type workflow struct {
	On struct {
		Push struct {
			Tags     []string `yaml:"tags"`
			Branches []string `yaml:"branches"`
		} `yaml:"push"`
	} `yaml:"on"`
	Defaults struct {
		Run struct {
			Shell string `yaml:"shell"`
		} `yaml:"run"`
	} `yaml:"defaults"`
	Jobs map[string]job `yaml:"jobs"`
}

type job struct {
	Needs       stringList        `yaml:"needs"`
	Permissions map[string]string `yaml:"permissions"`
	Env         map[string]string `yaml:"env"`
	Steps       []step            `yaml:"steps"`
}

type step struct {
	Name  string            `yaml:"name"`
	Uses  string            `yaml:"uses"`
	With  map[string]any    `yaml:"with"`
	Run   string            `yaml:"run"`
	Shell string            `yaml:"shell"`
	Env   map[string]string `yaml:"env"`
}

// stringList is a workflow field that is one string or a list of them (needs).
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = []string{n.Value}
		return nil
	}
	return n.Decode((*[]string)(l))
}

func readReleaseWorkflow(t *testing.T) workflow {
	t.Helper()
	raw, err := os.ReadFile("../../.github/workflows/release.yaml")
	require.NoError(t, err)
	var w workflow
	require.NoError(t, yaml.Unmarshal(raw, &w))
	return w
}

// stepRunning is the index of the first step of j whose script runs the command that
// starts with words (make release, gh release create), or -1.
func stepRunning(j job, words ...string) int {
	for i, s := range j.Steps {
		for _, c := range commands(s.Run) {
			if len(c) >= len(words) && slices.Equal(c[:len(words)], words) {
				return i
			}
		}
	}
	return -1
}

// commands splits a step's script into its commands, each as its words (continued lines
// joined; split at newlines, ;, && and ||; quotes left as they are).
func commands(script string) [][]string {
	script = strings.ReplaceAll(script, "\\\n", " ")
	var out [][]string
	for _, c := range regexp.MustCompile(`\n|;|&&|\|\|`).Split(script, -1) {
		if words := strings.Fields(c); len(words) > 0 {
			out = append(out, words)
		}
	}
	return out
}

// runStep runs a step's script as GitHub runs a bash step (bash -eo pipefail) in dir,
// with env and with the commands in fake as shell functions that print their arguments,
// one a line; it returns the output and whether the script succeeded.
func runStep(t *testing.T, s step, dir string, env map[string]string, fake ...string) (string, bool) {
	t.Helper()
	var prelude strings.Builder
	for _, name := range fake {
		prelude.WriteString(name + "() { printf '%s\\n' " + name + ` "$@"; }` + "\n")
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", prelude.String()+s.Run)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); !ok {
		require.NoError(t, err)
	}
	return string(out), err == nil
}

// TestReleaseWorkflow checks what could break the release a tag vX.Y.Z makes
// (.github/workflows/release.yaml): what triggers it, that it releases only what passed
// the tests, the make release it runs with the tag and ghcr.io, the GitHub release with
// the files it writes, and that nothing needs Docker. Its scripts are run here by bash,
// make and gh replaced by functions that print what they were given.
func TestReleaseWorkflow(t *testing.T) {
	w := readReleaseWorkflow(t)
	assert.Equal(t, []string{"v*"}, w.On.Push.Tags, "the release runs on tags v*")
	assert.Empty(t, w.On.Push.Branches, "the release runs on tags alone, not on branch pushes")
	require.Contains(t, w.Jobs, "test")
	require.Contains(t, w.Jobs, "release")
	test, release := w.Jobs["test"], w.Jobs["release"]
	assert.Contains(t, release.Needs, "test", "the release job runs only once the test job has passed")

	t.Run("test job", func(t *testing.T) {
		assert.GreaterOrEqual(t, stepRunning(test, "make", "verify"), 0, "the test job runs make verify")
		assert.GreaterOrEqual(t, stepRunning(test, "make", "test"), 0, "the test job runs make test")
		checkout := slices.IndexFunc(test.Steps, func(s step) bool { return strings.HasPrefix(s.Uses, "actions/checkout@") })
		require.GreaterOrEqual(t, checkout, 0, "the test job checks the repository out")
		assert.EqualValues(t, 0, test.Steps[checkout].With["fetch-depth"],
			"a full clone: TestUpgradeFromThePreviousRelease builds an earlier release from the history")
	})

	t.Run("tag check", func(t *testing.T) {
		i := slices.IndexFunc(test.Steps, func(s step) bool { return strings.Contains(s.Run, "GITHUB_REF_NAME") })
		require.GreaterOrEqual(t, i, 0, "a step of the test job checks the tag")
		for tag, ok := range map[string]bool{
			"v0.1.0": true, "v1.2.3": true, "v10.20.30": true,
			"1.2.3": false, "v1.2": false, "v1.2.3.4": false, "v01.2.3": false, "v1.2.3-rc.1": false,
			"v1.2.3 ": false, "vX.Y.Z": false, "v": false,
		} {
			_, got := runStep(t, test.Steps[i], t.TempDir(), map[string]string{"GITHUB_REF_NAME": tag})
			assert.Equal(t, ok, got, "the tag check on %q", tag)
		}
	})

	t.Run("release job", func(t *testing.T) {
		assert.Equal(t, "write", release.Permissions["packages"], "the release job pushes to ghcr.io: packages: write")
		assert.Equal(t, "write", release.Permissions["contents"], "the release job creates the GitHub release: contents: write")
		assert.Equal(t, "${{ github.actor }}", release.Env["LLSC_PUSH_USERNAME"])
		assert.Equal(t, "${{ secrets.GITHUB_TOKEN }}", release.Env["LLSC_PUSH_PASSWORD"])

		make := stepRunning(release, "make", "release")
		require.GreaterOrEqual(t, make, 0, "the release job runs make release")
		env := map[string]string{"GITHUB_REF_NAME": "v1.2.3", "GITHUB_REPOSITORY_OWNER": "LlamaStack", "GITHUB_REPOSITORY": "LlamaStack/llama-stack-controller"}
		out, ok := runStep(t, release.Steps[make], t.TempDir(), env, "make")
		require.True(t, ok, out)
		assert.Equal(t, "make\nrelease\nVERSION=v1.2.3\nREGISTRY=ghcr.io/llamastack\n", out,
			"make release with VERSION the tag and REGISTRY ghcr.io/<owner in lower case>")

		gh := stepRunning(release, "gh", "release", "create")
		require.Greater(t, gh, make, "the release job creates the GitHub release after make release")
		assert.Equal(t, "${{ secrets.GITHUB_TOKEN }}", release.Steps[gh].Env["GH_TOKEN"])
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, "dist"), 0o755))
		for name, content := range map[string]string{
			// As the real file: the CRD's schema, with bare image: keys, comes before the Deployment.
			"install.yaml":                     "kind: CustomResourceDefinition\nspec:\n  properties:\n    image:\n      type: string\n---\nkind: Deployment\nspec:\n  containers:\n  - name: controller\n    image: ghcr.io/llamastack/llama-stack-controller@sha256:" + strings.Repeat("0a", 32) + "\n",
			"llama-stack-controller-1.2.3.tgz": "",
		} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "dist", name), []byte(content), 0o644))
		}
		out, ok = runStep(t, release.Steps[gh], dir, env, "gh")
		require.True(t, ok, out)
		args := strings.Split(out, "\n")
		require.GreaterOrEqual(t, len(args), 4, out)
		assert.Equal(t, []string{"gh", "release", "create", "v1.2.3"}, args[:4])
		assert.Contains(t, args, "dist/install.yaml")
		assert.Contains(t, args, "dist/llama-stack-controller-1.2.3.tgz")
		assert.Contains(t, args, "--generate-notes")
		assert.Contains(t, out, "kubectl apply --server-side -f https://github.com/LlamaStack/llama-stack-controller/releases/download/v1.2.3/install.yaml")
		assert.Contains(t, out, "Image: `ghcr.io/llamastack/llama-stack-controller@sha256:"+strings.Repeat("0a", 32)+"`", "the notes name the image by digest")
	})

	t.Run("scripts", func(t *testing.T) {
		for name, j := range w.Jobs {
			for _, s := range j.Steps {
				if s.Run == "" {
					continue
				}
				shell := s.Shell
				if shell == "" {
					shell = w.Defaults.Run.Shell
				}
				assert.Equal(t, "bash", shell, "job %s, step %q: runs in bash (${GITHUB_REPOSITORY_OWNER,,} is bash's)", name, s.Name)
				// Expressions go through env: pasted into a script, a tag name could be code.
				assert.NotContains(t, s.Run, "${{", "job %s, step %q: an expression in the script", name, s.Name)
				out, err := exec.Command("bash", "-n", "-c", s.Run).CombinedOutput()
				assert.NoError(t, err, "job %s, step %q: bash -n: %s", name, s.Name, out)
			}
		}
	})

	t.Run("no docker", func(t *testing.T) {
		for name, j := range w.Jobs {
			for _, s := range j.Steps {
				assert.False(t, strings.HasPrefix(s.Uses, "docker/") || strings.HasPrefix(s.Uses, "docker://"),
					"job %s uses %s: the image is built and pushed from Go alone (hack/image)", name, s.Uses)
				for _, c := range commands(s.Run) {
					if c[0] == "sudo" && len(c) > 1 {
						c = c[1:]
					}
					assert.NotEqual(t, "docker", c[0], "job %s, step %q runs docker", name, s.Name)
				}
			}
		}
	})
}
