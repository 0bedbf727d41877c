package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"debug/elf"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The stamp and time the tests build with: neither the default nor the commit's.
const testVersion = "v0.0.0-imagetest"

var testEpoch = time.Unix(1700000000, 0).UTC()

func testOptions(t *testing.T) options {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		goCmd = "go"
	}
	ps, err := parsePlatforms("linux/amd64,linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	return options{root: root, goCmd: goCmd, version: testVersion, epoch: testEpoch, platforms: ps}
}

var (
	firstOnce   sync.Once
	firstDigest v1.Hash
	firstIndex  v1.ImageIndex
	firstErr    error
	firstDir    string
)

// built is the index the first build wrote to an OCI layout, read back from it; the
// tests share it, since a build takes seconds even with the Go build cache warm.
func built(t *testing.T) (v1.ImageIndex, v1.Hash) {
	t.Helper()
	firstOnce.Do(func() {
		if firstDir, firstErr = os.MkdirTemp("", "llsc-image-test-"); firstErr == nil {
			firstIndex, firstDigest, firstErr = buildToLayout(t, firstDir)
		}
	})
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	return firstIndex, firstDigest
}

// buildToLayout builds the index with the test options into a fresh layout at dir and
// returns it as read from the layout.
func buildToLayout(t *testing.T, dir string) (v1.ImageIndex, v1.Hash, error) {
	t.Helper()
	o := testOptions(t)
	work := t.TempDir()
	idx, err := buildIndex(context.Background(), o, work)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	d, err := writeLayout(dir, idx, o.version)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	outer, err := p.ImageIndex()
	if err != nil {
		return nil, v1.Hash{}, err
	}
	inner, err := outer.ImageIndex(d)
	return inner, d, err
}

// Two builds of the same tree with the same stamp and time, a second or more apart and
// into different directories, give the same index digest.
func TestImageReproducible(t *testing.T) {
	_, first := built(t)
	time.Sleep(1100 * time.Millisecond) // a timestamp taken from the clock would differ
	_, second, err := buildToLayout(t, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Fatalf("two builds of the same tree: index %s, then %s", first, second)
	}
	t.Logf("index digest, twice: %s", first)
}

// The index pushed to a registry and pulled back by digest has an image for each
// platform: OCI media types, user 65532, the controller as entrypoint, the epoch as
// every time, CA certificates, the nonroot user, and a binary for its architecture;
// the amd64 one runs here and prints the stamped version.
func TestImagePushPullRun(t *testing.T) {
	idx, digest := built(t)
	srv := httptest.NewServer(registry.New(registry.Logger(discardLogger())))
	defer srv.Close()
	repo := strings.TrimPrefix(srv.URL, "http://") + "/llama-stack-controller"

	pushed, err := pushIndex(context.Background(), repo+":"+testVersion, idx)
	if err != nil {
		t.Fatal(err)
	}
	if want := repo + "@" + digest.String(); pushed.String() != want {
		t.Fatalf("pushed %s, want %s", pushed, want)
	}
	ref, err := name.NewDigest(pushed.String())
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := pulled.Digest(); d != digest {
		t.Fatalf("pulled index %s, want %s", d, digest)
	}
	checkPlatforms(t, pulled, testVersion, testEpoch)
}

// checkPlatforms checks that idx, built with version and epoch, is an OCI index of the
// linux/amd64 and linux/arm64 images, and checks each (checkImage).
func checkPlatforms(t *testing.T, idx v1.ImageIndex, version string, epoch time.Time) {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", im.MediaType, types.OCIImageIndex)
	}
	var platforms []string
	for _, desc := range im.Manifests {
		if desc.Platform == nil {
			t.Fatalf("manifest %s has no platform", desc.Digest)
		}
		p := *desc.Platform
		platforms = append(platforms, p.String())
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(p.Architecture, func(t *testing.T) { checkImage(t, img, p, version, epoch) })
	}
	if got := strings.Join(platforms, ","); got != "linux/amd64,linux/arm64" {
		t.Errorf("platforms %s, want linux/amd64,linux/arm64", got)
	}
}

// checkImage checks img, the image for p, built with version and epoch.
func checkImage(t *testing.T, img v1.Image, p v1.Platform, version string, epoch time.Time) {
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s", mt)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != p.OS || cfg.Architecture != p.Architecture {
		t.Errorf("config platform %s/%s, index says %s", cfg.OS, cfg.Architecture, p)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.Config.User)
	}
	if got := strings.Join(cfg.Config.Entrypoint, " "); got != "/llama-stack-controller" {
		t.Errorf("entrypoint %q", got)
	}
	if !cfg.Created.Time.Equal(epoch) {
		t.Errorf("created %s, want %s", cfg.Created.Time, epoch)
	}
	for _, h := range cfg.History {
		if !h.Created.Time.Equal(epoch) {
			t.Errorf("history %q created %s, want %s", h.CreatedBy, h.Created.Time, epoch)
		}
	}

	files := imageFiles(t, img)
	for _, want := range []string{"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", caFile, "home/", "home/nonroot/", "llama-stack-controller", "tmp/"} {
		if _, ok := files[want]; !ok {
			t.Errorf("%s is not in the image", want)
		}
	}
	if f := files["home/nonroot/"]; f.hdr != nil && (f.hdr.Uid != nonRoot || f.hdr.Gid != nonRoot) {
		t.Errorf("/home/nonroot owned by %d:%d", f.hdr.Uid, f.hdr.Gid)
	}
	if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot 65532:\n%s", files["etc/passwd"].data)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(files[caFile].data) || len(pool.Subjects()) < 100 { //nolint:staticcheck // counting roots
		t.Errorf("/%s holds %d certificates, want the NSS roots", caFile, len(pool.Subjects())) //nolint:staticcheck
	}

	bin := files["llama-stack-controller"]
	if bin.hdr == nil {
		return
	}
	if bin.hdr.Mode != 0o755 {
		t.Errorf("binary mode %o", bin.hdr.Mode)
	}
	ef, err := elf.NewFile(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("binary: %v", err)
	}
	if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Architecture]; ef.Machine != want {
		t.Errorf("binary for %s, want %s", ef.Machine, want)
	}
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("binary is dynamically linked")
		}
	}
	if p.Architecture != runtime.GOARCH || runtime.GOOS != "linux" {
		return
	}
	path := filepath.Join(t.TempDir(), "llama-stack-controller")
	if err := os.WriteFile(path, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "--version")
	cmd.Env = []string{} // no $OPERATOR_VERSION: the stamp speaks
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", path, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != version {
		t.Errorf("--version printed %q, want %q", got, version)
	}
}

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }

type entry struct {
	hdr  *tar.Header
	data []byte
}

// imageFiles is the image's file system, every layer in order, checking that each
// entry has the epoch as its time and a fixed owner.
func imageFiles(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]entry{}
	for _, l := range layers {
		if mt, _ := l.MediaType(); mt != types.OCILayer {
			t.Errorf("layer media type %s", mt)
		}
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		prev := ""
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name <= prev {
				t.Errorf("layer entries out of order: %s after %s", h.Name, prev)
			}
			prev = h.Name
			if !h.ModTime.Equal(testEpoch) {
				t.Errorf("%s: time %s, want %s", h.Name, h.ModTime, testEpoch)
			}
			if h.Uname != "" || h.Gname != "" || (h.Uid != 0 && h.Uid != nonRoot) {
				t.Errorf("%s: owner %d(%s):%d(%s)", h.Name, h.Uid, h.Uname, h.Gid, h.Gname)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = entry{hdr: h, data: data}
		}
		rc.Close()
	}
	return files
}

// -rootfs writes the files of the image (what the Dockerfile copies onto scratch), with
// the same contents and modes.
func TestRootFSMatchesImage(t *testing.T) {
	idx, _ := built(t)
	img, err := idx.Image(mustDigestFor(t, idx, "amd64"))
	if err != nil {
		t.Fatal(err)
	}
	want := imageFiles(t, img)

	o := testOptions(t)
	o.platforms = o.platforms[:1]
	dir := t.TempDir()
	if err := writeRootFS(context.Background(), o, dir); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		got[rel] = true
		w, ok := want[rel]
		if !ok {
			t.Errorf("%s is written but not in the image", rel)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if perm := int64(info.Mode().Perm()); perm != w.hdr.Mode&0o777 {
			t.Errorf("%s: mode %o, image %o", rel, perm, w.hdr.Mode)
		}
		if (info.Mode()&os.ModeSticky != 0) != (w.hdr.Mode&0o1000 != 0) {
			t.Errorf("%s: sticky bit differs from the image's", rel)
		}
		if !d.IsDir() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if !bytes.Equal(data, w.data) {
				t.Errorf("%s differs from the image's", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		if !got[name] {
			t.Errorf("%s is in the image but not written", name)
		}
	}
}

func mustDigestFor(t *testing.T, idx v1.ImageIndex, arch string) v1.Hash {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.Architecture == arch {
			return d.Digest
		}
	}
	t.Fatalf("no %s image", arch)
	return v1.Hash{}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if firstDir != "" {
		os.RemoveAll(firstDir)
	}
	os.Exit(code)
}
