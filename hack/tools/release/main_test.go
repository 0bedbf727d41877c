package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

var testDigest = "sha256:" + strings.Repeat("ab", 32)

func TestParseImage(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "ghcr.io/org/llama-stack-controller@" + testDigest, want: "ghcr.io/org/llama-stack-controller@" + testDigest},
		{in: "ghcr.io/org/llama-stack-controller:v1.2.3@" + testDigest, want: "ghcr.io/org/llama-stack-controller@" + testDigest},
		{in: "127.0.0.1:5000/org/llama-stack-controller:v1.2.3", want: "127.0.0.1:5000/org/llama-stack-controller:v1.2.3"},
		{in: "127.0.0.1:5000/org/llama-stack-controller", want: "127.0.0.1:5000/org/llama-stack-controller"},
		{in: "llama-stack-controller:dev", want: "llama-stack-controller:dev"},
		{in: "", err: "-image is required"},
		{in: "repo@sha256:abc", err: "the digest is not"},
		{in: "repo@latest", err: "the digest is not"},
		{in: "repo:", err: "is not repository"},
		{in: "re po:1", err: "is not repository"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			img, err := parseImage(tc.in)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, imageName, img.Name)
			assert.Equal(t, tc.want, reference(img))
		})
	}
}

// install.yaml is what artifacts/ renders, with the controller's image (and nothing
// else) replaced.
func TestRenderInstall(t *testing.T) {
	img, err := parseImage("ghcr.io/org/llama-stack-controller@" + testDigest)
	require.NoError(t, err)
	out, err := renderInstall("../../..", img, "v1.2.3")
	require.NoError(t, err)
	kinds := map[string]int{}
	var order []string
	images := 0
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj struct {
			Kind string `json:"kind"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		kinds[obj.Kind]++
		order = append(order, obj.Kind)
		images += strings.Count(doc, "image: ghcr.io/org/llama-stack-controller@"+testDigest+"\n")
	}
	assert.Equal(t, 1, images, "the controller's container, by digest")
	assert.NotContains(t, string(out), "llama-stack-controller:latest")
	for _, kind := range []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
		"ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		assert.NotZero(t, kinds[kind], "install.yaml has a %s", kind)
	}
	// kubectl applies a file's objects in order: on a fresh cluster the Namespace and
	// the CRD must come before what needs them.
	require.NotEmpty(t, order)
	assert.Equal(t, []string{"Namespace", "CustomResourceDefinition"}, order[:2])
	assert.True(t, strings.HasPrefix(string(out), "# llama-stack-controller v1.2.3:"), "a header says what it is")
	assert.Contains(t, string(out), "kubectl apply --server-side -f install.yaml")
}

// An images: entry that no longer names the controller's image fails the render.
func TestRenderInstallFindsTheImage(t *testing.T) {
	_, err := renderInstall("../../..", types.Image{Name: "llama-stack-controller-renamed", NewName: "x", NewTag: "1"}, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no container image")
}

func TestSetImageValues(t *testing.T) {
	img := types.Image{Name: imageName, NewName: "ghcr.io/org/llama-stack-controller", Digest: testDigest}
	values, err := os.ReadFile(filepath.Join("../../..", chartDir, "values.yaml"))
	require.NoError(t, err)
	out, err := setImageValues(values, img, "v1.2.3")
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, yaml.Unmarshal(out, &got))
	assert.Equal(t, map[string]any{"repository": img.NewName, "tag": "v1.2.3", "digest": testDigest}, got["image"])
	var before map[string]any
	require.NoError(t, yaml.Unmarshal(values, &before))
	delete(got, "image")
	delete(before, "image")
	assert.Equal(t, before, got, "nothing else changes")
	assert.Equal(t, strings.Count(string(values), "\n#"), strings.Count(string(out), "\n#"), "the comments stay")

	for name, bad := range map[string]string{
		"no digest line": "image:\n  repository: x\n  tag: y\n",
		"no image map":   "replicas: 2\n",
		"nested deeper":  "controller:\n  image:\n    repository: x\n    tag: y\n    digest: \"\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := setImageValues([]byte(bad), img, "v1.2.3")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "has no line image.")
		})
	}
}

// A release's version is one Helm takes for a chart: refused before anything is written.
func TestRunRefusesAVersionHelmRefuses(t *testing.T) {
	for _, v := range []string{"1.2.3", "v1.2", "v1.2.3-rc.01", "v1.2.3-rc..1", "v01.2.3"} {
		out := t.TempDir()
		err := run([]string{"-root", "../../..", "-image", "r/x@" + testDigest, "-version", v, "-chart", "-out", out})
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), "a release is vX.Y.Z")
		entries, _ := os.ReadDir(out)
		assert.Empty(t, entries, "%s: nothing written", v)
	}
	out := t.TempDir()
	require.NoError(t, run([]string{"-root", "../../..", "-image", "r/x@" + testDigest, "-version", "v1.2.3-rc.1", "-chart", "-out", out}))
	_, err := os.Stat(filepath.Join(out, "llama-stack-controller-1.2.3-rc.1.tgz"))
	assert.NoError(t, err)
}
