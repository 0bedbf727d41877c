// Command image builds the controller's OCI image from Go alone, with no container
// engine: for each platform (linux/amd64 and linux/arm64 by default) the static binary
// of cmd/controller, stamped with -version as `make build` stamps it, on an empty base
// with the CA certificates of golang.org/x/crypto/x509roots/fallback and the nonroot
// user 65532. Every timestamp is -source-date-epoch, so the same commit (and Go
// toolchain) gives the same index digest.
//
// It writes an OCI image layout to -out, its index.json naming the image index, and
// prints the index digest; with -push it also pushes the index there (credentials from
// $LLSC_PUSH_USERNAME and $LLSC_PUSH_PASSWORD when both are set, else the default
// keychain, as docker login or crane auth login left them) and prints the pushed
// reference by digest (and writes it to -ref-file). With -rootfs it writes the image's
// files for one platform to a directory instead (what the Dockerfile copies onto
// scratch); with -archive the image of one platform as a docker-archive tarball.
//
//	make image                            # bin/image/oci
//	make image PUSH=ghcr.io/org/llama-stack-controller:v0.2.0
//	make image-archive                    # bin/image/llama-stack-controller.tar
//	make release VERSION=v0.2.0 REGISTRY=ghcr.io/org
//
// A module of its own, so that go-containerregistry stays out of the controller's.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	root := fs.String("root", ".", "The controller module's directory.")
	goCmd := fs.String("go", "go", "The go command.")
	version := fs.String("version", "", "The version stamped into the binary (app.version) and the image's label.")
	epochFlag := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Seconds since 1970 for every timestamp in the image (default $SOURCE_DATE_EPOCH, else 0); `make image` passes the commit's time.")
	platformsFlag := fs.String("platforms", "linux/amd64,linux/arm64", "Comma-separated os/arch[/variant] to build.")
	out := fs.String("out", "bin/image/oci", "The OCI image layout to write (replaced).")
	push := fs.String("push", "", "Push the index to this repository[:tag] too.")
	rootfs := fs.String("rootfs", "", "Write the image's files for the single platform of -platforms to this directory instead of a layout.")
	refFile := fs.String("ref-file", "", "With -push: write the pushed reference by digest to this file too.")
	archive := fs.String("archive", "", "Write the image of the single platform of -platforms to this docker-archive tarball instead of a layout (for kind load image-archive, minikube image load).")
	archiveTag := fs.String("archive-tag", "llama-stack-controller:dev", "The tag the -archive tarball carries.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	epoch, err := parseEpoch(*epochFlag)
	if err != nil {
		return err
	}
	platforms, err := parsePlatforms(*platformsFlag)
	if err != nil {
		return err
	}
	o := options{root: *root, goCmd: *goCmd, version: *version, epoch: epoch, platforms: platforms}

	work, err := os.MkdirTemp("", "llsc-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	if *rootfs != "" {
		if len(platforms) != 1 {
			return fmt.Errorf("-rootfs needs a single platform, got %q", *platformsFlag)
		}
		return writeRootFS(ctx, o, *rootfs)
	}
	if *archive != "" {
		if len(platforms) != 1 {
			return fmt.Errorf("-archive needs a single platform, got %q", *platformsFlag)
		}
		return writeArchive(ctx, o, work, *archive, *archiveTag)
	}
	if *refFile != "" && *push == "" {
		return fmt.Errorf("-ref-file needs -push")
	}
	idx, err := buildIndex(ctx, o, work)
	if err != nil {
		return err
	}
	digest, err := writeLayout(*out, idx, o.version)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "image: wrote %s\n", *out)
	fmt.Println(digest)
	if *push != "" {
		pushed, err := pushIndex(ctx, *push, idx)
		if err != nil {
			return err
		}
		fmt.Println(pushed)
		if *refFile != "" {
			if err := os.WriteFile(*refFile, []byte(pushed.String()+"\n"), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseEpoch reads SOURCE_DATE_EPOCH: whole seconds, "" meaning 0.
func parseEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("source date epoch %q is not a whole number of seconds since 1970", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func parsePlatforms(s string) ([]v1.Platform, error) {
	var ps []v1.Platform
	for _, f := range strings.Split(s, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if p.OS != "linux" || p.Architecture == "" {
			return nil, fmt.Errorf("platform %q: only linux/<arch>[/<variant>] is built", f)
		}
		ps = append(ps, *p)
	}
	return ps, nil
}

// writeLayout replaces dir with an OCI image layout whose index.json names idx, and
// returns idx's digest.
func writeLayout(dir string, idx v1.ImageIndex, version string) (v1.Hash, error) {
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err == nil {
		if err := os.RemoveAll(dir); err != nil {
			return v1.Hash{}, err
		}
	} else if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return v1.Hash{}, fmt.Errorf("%s is not empty and not an OCI image layout: not replacing it", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	var opts []layout.Option
	if version != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": version}))
	}
	if err := p.AppendIndex(idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("writing %s: %w", dir, err)
	}
	return idx.Digest()
}

// pushIndex pushes idx to ref (a repository, with or without a tag) and returns the
// pushed reference by digest.
func pushIndex(ctx context.Context, ref string, idx v1.ImageIndex, opts ...remote.Option) (name.Digest, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return name.Digest{}, err
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain(os.Getenv))}, opts...)
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing to %s: %w", r, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(d.String()), nil
}

// keychain is where pushes find credentials: $LLSC_PUSH_USERNAME and $LLSC_PUSH_PASSWORD
// when both are set (a CI job's token), else the default keychain (what docker login or
// crane auth login wrote).
func keychain(getenv func(string) string) authn.Keychain {
	user, password := getenv("LLSC_PUSH_USERNAME"), getenv("LLSC_PUSH_PASSWORD")
	if user == "" || password == "" {
		return authn.DefaultKeychain
	}
	return staticKeychain{authn.FromConfig(authn.AuthConfig{Username: user, Password: password})}
}

// staticKeychain gives every registry the same credentials.
type staticKeychain struct{ auth authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.auth, nil }

// writeArchive writes the image of o's single platform to path as a docker-archive
// tarball tagged tag, what kind load image-archive and minikube image load read.
func writeArchive(ctx context.Context, o options, work, path, tag string) error {
	t, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("-archive-tag: %w", err)
	}
	idx, err := buildIndex(ctx, o, work)
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := tarball.WriteToFile(path, t, img); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Fprintf(os.Stderr, "image: wrote %s (%s, %s)\n", path, o.platforms[0].String(), t)
	return nil
}

// writeRootFS writes the files of o's single platform image to dir: the base layer's
// and the binary (modes as in the image; owners are the caller's to set).
func writeRootFS(ctx context.Context, o options, dir string) error {
	p := o.platforms[0]
	bin := filepath.Join(dir, binaryPath[1:])
	for _, f := range baseFiles() {
		path := filepath.Join(dir, filepath.FromSlash(f.name))
		if strings.HasSuffix(f.name, "/") {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		} else if err := os.WriteFile(path, f.data, 0o644); err != nil {
			return err
		}
		if err := os.Chmod(path, os.FileMode(f.mode&0o777)|modeBits(f.mode)); err != nil {
			return err
		}
	}
	return goBuild(ctx, o, p, bin)
}

// modeBits maps the sticky bit of a tar mode to Go's.
func modeBits(mode int64) os.FileMode {
	if mode&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}
