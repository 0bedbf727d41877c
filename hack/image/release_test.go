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

// makeEnv is the environment the tests run make in: without what the Makefile or the
// image tool would read from it (a REGISTRY exported for real work must never be pushed
// to, nor credentials sent to the loopback registry).
func makeEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains([]string{"REGISTRY", "VERSION", "IMAGE", "PUSH", "PUSH_IMAGE", "DIST_DIR", "BIN_DIR", "ALLOW_DIRTY",
			"ARCHIVE_PLATFORM", "SOURCE_DATE_EPOCH", "LLSC_PUSH_USERNAME", "LLSC_PUSH_PASSWORD", "MAKEFLAGS"}, name)
	})
}

// runMake runs make target in dir with vars and the Go the tests run with, and returns
// its output and error.
func runMake(t *testing.T, dir, target string, vars ...string) (string, error) {
	t.Helper()
	args := append([]string{"-C", dir, "--no-print-directory", target, "GO=" + testOptions(t).goCmd}, vars...)
	cmd := exec.Command("make", args...)
	cmd.Env = makeEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// makeTarget runs make target in the repository with vars and BIN_DIR in a fresh
// directory, and returns its output.
func makeTarget(t *testing.T, target string, vars ...string) string {
	t.Helper()
	out, err := runMake(t, testOptions(t).root, target, append([]string{"BIN_DIR=" + t.TempDir()}, vars...)...)
	if err != nil {
		t.Fatalf("make %s %s: %v\n%s", target, strings.Join(vars, " "), err, out)
	}
	return out
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
// platforms (checkPlatforms: user, entrypoint, CA certificates, the binary of this machine's architecture run with
// --version); the tag points at it too; the packaged chart names the same image.
func TestReleasePushPullRun(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(discardLogger())))
	defer srv.Close()
	registryOrg := strings.TrimPrefix(srv.URL, "http://") + "/org"
	repo := registryOrg + "/llama-stack-controller"

	release := func() string {
		dist := t.TempDir()
		// ALLOW_DIRTY: the tests run on a tree being worked on too (TestReleaseRefusesBadInput
		// checks the refusal of a dirty one).
		makeTarget(t, "release", "VERSION="+releaseVersion, "REGISTRY="+registryOrg+"/", "DIST_DIR="+dist, "SOURCE_DATE_EPOCH="+releaseEpoch, "ALLOW_DIRTY=1")
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

// make release refuses what is not a release before it builds or pushes anything: a
// VERSION not given (the Makefile's default, git describe), not semantic versioning's
// (as Helm checks a chart's version), no REGISTRY, or a working tree with changes.
func TestReleaseRefusesBadInput(t *testing.T) {
	root := testOptions(t).root
	registryVar := "REGISTRY=127.0.0.1:1/org"
	for _, c := range []struct {
		vars []string
		want string
	}{
		{[]string{registryVar}, "VERSION=vX.Y.Z[-pre] is needed"},
		{[]string{"VERSION=1.2.3", registryVar}, "got '1.2.3'"},
		{[]string{"VERSION=v1.2", registryVar}, "got 'v1.2'"},
		{[]string{"VERSION=v1.2.3-rc.01", registryVar}, "got 'v1.2.3-rc.01'"},
		{[]string{"VERSION=v1.2.3-rc..1", registryVar}, "got 'v1.2.3-rc..1'"},
		{[]string{"VERSION=v1.2.3", "REGISTRY="}, "REGISTRY=registry/org is needed"},
	} {
		out, err := runMake(t, root, "release", append([]string{"BIN_DIR=" + t.TempDir(), "DIST_DIR=" + t.TempDir(), "ALLOW_DIRTY=1"}, c.vars...)...)
		if err == nil || !strings.Contains(out, c.want) || strings.Contains(out, "image: wrote") {
			t.Errorf("make release %s: want a refusal (%q) before the build, got %v\n%s", strings.Join(c.vars, " "), c.want, err, out)
		}
	}

	// A clone of the commit with one file more.
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "-q", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(clone, "cmd", "controller", "extra.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The Makefile under test, which the commit may not have yet.
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "Makefile"), makefile, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runMake(t, clone, "release", "VERSION=v1.2.3", registryVar, "BIN_DIR="+t.TempDir(), "DIST_DIR="+t.TempDir())
	if err == nil || !strings.Contains(out, "the working tree has changes") || strings.Contains(out, "image: wrote") {
		t.Errorf("make release in a tree with changes: want a refusal before the build, got %v\n%s", err, out)
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

// Pushes take $LLSC_PUSH_USERNAME and $LLSC_PUSH_PASSWORD when both are set (a CI job's
// token), else the default keychain.
func TestKeychain(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	repo, _ := name.NewRepository("ghcr.io/org/llama-stack-controller")
	auth, err := keychain(env(map[string]string{"LLSC_PUSH_USERNAME": "bot", "LLSC_PUSH_PASSWORD": "token"})).Resolve(repo)
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
	for _, m := range []map[string]string{{}, {"LLSC_PUSH_USERNAME": "bot"}, {"LLSC_PUSH_PASSWORD": "token"}} {
		if k := keychain(env(m)); k != authn.DefaultKeychain {
			t.Errorf("with %v: %T, want the default keychain", m, k)
		}
	}
}
