package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

const (
	// binaryPath is where the controller is in the image, and its entrypoint.
	binaryPath = "/llama-stack-controller"
	// caFile is where Go's crypto/x509 (and most other TLS stacks) look for roots on Linux.
	caFile = "etc/ssl/certs/ca-certificates.crt"
	// nonRoot is the user and group the controller runs as (distroless' nonroot).
	nonRoot = 65532
	// versionVar is the variable `make build` stamps with -X.
	versionVar = "github.com/llamastack/llama-stack-controller/cmd/controller/app.version"
)

// options say what to build; the same options on the same commit (and Go toolchain)
// give the same image index, byte for byte.
type options struct {
	// root is the controller module's directory.
	root string
	// goCmd is the go command that builds the binary.
	goCmd string
	// version is stamped into the binary and labels the image; "" leaves both out.
	version string
	// epoch is every timestamp in the image: config, history and file times.
	epoch time.Time
	// platforms to build, linux only.
	platforms []v1.Platform
}

// buildIndex builds the controller for each platform and returns the OCI image index
// that holds one image per platform.
func buildIndex(ctx context.Context, o options, work string) (v1.ImageIndex, error) {
	base, err := baseLayer(o.epoch)
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.platforms {
		bin := filepath.Join(work, p.OS+"-"+p.Architecture, "llama-stack-controller")
		if err := goBuild(ctx, o, p, bin); err != nil {
			return nil, err
		}
		img, err := image(o, p, base, bin)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", p.String(), err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}},
		})
	}
	return idx, nil
}

// goBuild builds cmd/controller as `make build` does (the same version stamp), static
// and without build paths or VCS details, so that only the commit decides the bytes.
func goBuild(ctx context.Context, o options, p v1.Platform, out string) error {
	ldflags := "-s -w"
	if o.version != "" {
		ldflags += " -X " + versionVar + "=" + o.version
	}
	cmd := exec.CommandContext(ctx, o.goCmd, "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "./cmd/controller")
	cmd.Dir = o.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOFLAGS=")
	if p.Architecture == "arm" && p.Variant != "" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %w", p.String(), err)
	}
	return nil
}

// image is the controller's image for one platform: the base layer, then the binary's.
func image(o options, p v1.Platform, base v1.Layer, bin string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	binLayer, err := layer([]file{{name: binaryPath[1:], mode: 0o755, data: data}}, o.epoch)
	if err != nil {
		return nil, err
	}
	cfg := &v1.ConfigFile{
		Created:      v1.Time{Time: o.epoch},
		OS:           p.OS,
		Architecture: p.Architecture,
		Variant:      p.Variant,
		Config: v1.Config{
			User:       fmt.Sprintf("%d:%d", nonRoot, nonRoot),
			Entrypoint: []string{binaryPath},
		},
	}
	if o.version != "" {
		cfg.Config.Labels = map[string]string{"org.opencontainers.image.version": o.version}
	}
	img, err := mutate.ConfigFile(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: o.epoch}, CreatedBy: "hack/image: CA certificates, nonroot user, /tmp",
		}},
		mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: o.epoch}, CreatedBy: "hack/image: " + binaryPath,
		}},
	)
}

// baseLayer is what every platform's image has besides the binary: the CA certificates,
// a nonroot user and group, its home and /tmp.
func baseLayer(epoch time.Time) (v1.Layer, error) {
	return layer(baseFiles(), epoch)
}

func baseFiles() []file {
	return []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: caFile, mode: 0o644, data: caBundle()},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, owner: nonRoot},
		{name: "tmp/", mode: 0o1777},
	}
}

// caBundle is the PEM bundle of the roots Mozilla's NSS trusts for TLS without
// constraints, as golang.org/x/crypto/x509roots/fallback ships them (its version is
// pinned by this module's go.sum, so the bundle changes only with it). Roots that NSS
// distrusts after a date cannot be said in a PEM file and are left out.
func caBundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			panic(err) // writing to a bytes.Buffer does not fail
		}
	}
	return b.Bytes()
}

// file is one tar entry; a name ending in / is a directory.
type file struct {
	name  string
	mode  int64
	owner int
	data  []byte
}

// layer is an OCI layer of files, sorted by name, each with the same time and owners
// fixed, so that it depends only on its contents.
func layer(files []file, epoch time.Time) (v1.Layer, error) {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			Uid:     f.owner,
			Gid:     f.owner,
			ModTime: epoch,
			Format:  tar.FormatUSTAR,
		}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
