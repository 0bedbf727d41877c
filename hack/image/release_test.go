package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The release the tests make: its version and every timestamp in it.
const (
	releaseVersion = "v0.0.0-releasetest"
	releaseEpoch   = "1700000000"
)

// makeTarget runs make target in the repository with vars, the Go the tests run with,
// and BIN_DIR in a fresh directory, and returns its output.
func makeTarget(t *testing.T, target string, vars ...string) string {
	t.Helper()
	o := testOptions(t)
	args := append([]string{"-C", o.root, "--no-print-directory", target, "GO=" + o.goCmd, "BIN_DIR=" + t.TempDir()}, vars...)
	cmd := exec.Command("make", args...)
	// No credentials from the environment: the loopback registry takes none.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "REGISTRY_USERNAME=") || strings.HasPrefix(kv, "REGISTRY_PASSWORD=")
	})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// deploymentImage is the controller Deployment's image in an install manifest.
func deploymentImage(t *testing.T, manifest string) string {
	t.Helper()
	imageLine := regexp.MustCompile(`(?m)^        image: (\S+)$`)
	var images []string
	for _, doc := range strings.Split(manifest, "\n---\n") {
		if strings.Contains(doc, "\nkind: Deployment\n") && strings.Contains(doc, "\n  name: llama-stack-controller\n") {
			for _, m := range imageLine.FindAllStringSubmatch(doc, -1) {
				images = append(images, m[1])
			}
		}
	}
	if len(images) != 1 {
		t.Fatalf("the controller's Deployment has images %q, want one", images)
	}
	return images[0]
}

// chartFiles reads a packaged chart's files.
func chartFiles(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = string(data)
	}
}

// make release, as a maintainer runs it, pushing to a registry on loopback: run twice,
// into two output directories, it pushes one digest and writes the same files; the
// image that install.yaml names by that digest, pulled back, is the controller for both
// platforms (checkPlatforms: user, entrypoint, CA certificates, the amd64 binary run with
// --version); the tag points at it too; the packaged chart names the same image.
func TestReleasePushPullRun(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(discardLogger())))
	defer srv.Close()
	registryOrg := strings.TrimPrefix(srv.URL, "http://") + "/org"
	repo := registryOrg + "/llama-stack-controller"

	release := func() string {
		dist := t.TempDir()
		makeTarget(t, "release", "VERSION="+releaseVersion, "REGISTRY="+registryOrg, "DIST_DIR="+dist, "SOURCE_DATE_EPOCH="+releaseEpoch)
		return dist
	}
	first, second := release(), release()
	chartName := "llama-stack-controller-" + strings.TrimPrefix(releaseVersion, "v") + ".tgz"
	for _, f := range []string{"install.yaml", chartName} {
		a, errA := os.ReadFile(filepath.Join(first, f))
		b, errB := os.ReadFile(filepath.Join(second, f))
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", f, errA, errB)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("two releases of one commit wrote different %s", f)
		}
	}
	manifest, err := os.ReadFile(filepath.Join(first, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	image := deploymentImage(t, string(manifest))
	if !strings.HasPrefix(image, repo+"@sha256:") {
		t.Fatalf("install.yaml runs %s, want %s by digest", image, repo)
	}
	ref, err := name.NewDigest(image)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	if d, _ := idx.Digest(); d.String() != ref.DigestStr() {
		t.Fatalf("pulled index %s, want %s", d, ref.DigestStr())
	}
	epoch, _ := parseEpoch(releaseEpoch)
	checkPlatforms(t, idx, releaseVersion, epoch)
	tagged, err := remote.Head(ref.Context().Tag(releaseVersion))
	if err != nil {
		t.Fatal(err)
	}
	if tagged.Digest.String() != ref.DigestStr() {
		t.Errorf("tag %s is %s, install.yaml runs %s", releaseVersion, tagged.Digest, ref.DigestStr())
	}

	files := chartFiles(t, filepath.Join(first, chartName))
	values := files["llama-stack-controller/values.yaml"]
	for _, want := range []string{`  repository: "` + repo + `"`, `  tag: "` + releaseVersion + `"`, `  digest: "` + ref.DigestStr() + `"`} {
		if !strings.Contains(values, "\n"+want+"\n") {
			t.Errorf("the chart's values.yaml has no line %s:\n%s", want, values)
		}
	}
	meta := files["llama-stack-controller/Chart.yaml"]
	for _, want := range []string{"version: " + strings.TrimPrefix(releaseVersion, "v"), "appVersion: " + releaseVersion} {
		if !strings.Contains(meta, "\n"+want+"\n") {
			t.Errorf("the chart's Chart.yaml has no line %s:\n%s", want, meta)
		}
	}
}

// make release refuses what is not a release before it builds or pushes anything.
func TestReleaseRefusesBadInput(t *testing.T) {
	o := testOptions(t)
	for _, vars := range [][]string{
		{"VERSION=1.2.3", "REGISTRY=127.0.0.1:1/org"},
		{"VERSION=v1.2", "REGISTRY=127.0.0.1:1/org"},
		{"VERSION=v1.2.3"},
	} {
		args := append([]string{"-C", o.root, "--no-print-directory", "release", "GO=" + o.goCmd, "BIN_DIR=" + t.TempDir(), "DIST_DIR=" + t.TempDir()}, vars...)
		out, err := exec.Command("make", args...).CombinedOutput()
		if err == nil {
			t.Errorf("make release %s succeeded", strings.Join(vars, " "))
		}
		if !strings.Contains(string(out), "release: ") || strings.Contains(string(out), "image: wrote") {
			t.Errorf("make release %s: want a refusal before the build, got\n%s", strings.Join(vars, " "), out)
		}
	}
}

// make image-archive writes one platform's image as a docker-archive tarball with the
// tag asked for: the image of the index, layer for layer.
func TestImageArchive(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t)
	tag := "llama-stack-controller:archive-test"
	work := t.TempDir()
	o.platforms = o.platforms[:1] // linux/amd64
	path := filepath.Join(dir, "image.tar")
	if err := writeArchive(t.Context(), o, work, path, tag); err != nil {
		t.Fatal(err)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{tag}) {
		t.Fatalf("the archive's manifest %+v, want one image tagged %s", m, tag)
	}
	t2, _ := name.NewTag(tag)
	img, err := tarball.ImageFromPath(path, &t2)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != "amd64" || cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Entrypoint, []string{binaryPath}) {
		t.Errorf("archive config: %s, user %q, entrypoint %q", cfg.Architecture, cfg.Config.User, cfg.Config.Entrypoint)
	}
	idx, _ := built(t)
	want, err := idx.Image(mustDigestFor(t, idx, "amd64"))
	if err != nil {
		t.Fatal(err)
	}
	wantCfg, _ := want.ConfigFile()
	if !slices.Equal(cfg.RootFS.DiffIDs, wantCfg.RootFS.DiffIDs) {
		t.Errorf("the archive's layers %v, the index's amd64 image's %v", cfg.RootFS.DiffIDs, wantCfg.RootFS.DiffIDs)
	}
}

// Pushes take $REGISTRY_USERNAME and $REGISTRY_PASSWORD when both are set (a CI job's
// token), else the default keychain.
func TestKeychain(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	repo, _ := name.NewRepository("ghcr.io/org/llama-stack-controller")
	auth, err := keychain(env(map[string]string{"REGISTRY_USERNAME": "bot", "REGISTRY_PASSWORD": "token"})).Resolve(repo)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := auth.Authorization()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Username != "bot" || cfg.Password != "token" {
		t.Errorf("credentials %q/%q, want bot/token", cfg.Username, cfg.Password)
	}
	for _, m := range []map[string]string{{}, {"REGISTRY_USERNAME": "bot"}, {"REGISTRY_PASSWORD": "token"}} {
		if k := keychain(env(m)); k != authn.DefaultKeychain {
			t.Errorf("with %v: %T, want the default keychain", m, k)
		}
	}
}
