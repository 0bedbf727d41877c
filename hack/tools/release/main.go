// Command release writes what a release of the controller ships, for an image already
// pushed (make image PUSH=...):
//
//   - install.yaml: everything kubectl kustomize artifacts/ renders (the CRD and its
//     admission policy, RBAC, the namespace, the operator ConfigMap, the controller's
//     Deployment, its PodDisruptionBudget and the webhook Service), rendered with the same
//     kustomize kubectl embeds, with the controller's image replaced by -image;
//   - with -chart: the Helm chart of charts/llama-stack-controller packaged as
//     llama-stack-controller-<version>.tgz, its version and appVersion the release's, and
//     its image values naming the same image by digest.
//
// Every timestamp in the chart package is -source-date-epoch, so a commit gives the same
// files twice. make release and make manifests run it; see the Makefile.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/kustomize/api/filters/imagetag"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// imageName is the controller's image as artifacts/ names it (the images: entry of
// artifacts/controller/Kustomization).
const imageName = "llama-stack-controller"

// chartDir is the chart's directory in the repository.
const chartDir = "charts/llama-stack-controller"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	root := fs.String("root", ".", "The repository's top directory.")
	image := fs.String("image", "", "The controller's image: repository[:tag][@sha256:digest]; by digest for -chart.")
	version := fs.String("version", "", "The release, vX.Y.Z[-pre]: the chart's version (without the v) and appVersion.")
	out := fs.String("out", "dist", "The directory to write install.yaml (and the chart package) to.")
	withChart := fs.Bool("chart", false, "Package the Helm chart too.")
	epochFlag := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Seconds since 1970 for every timestamp in the chart package (default $SOURCE_DATE_EPOCH, else 0).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ref, err := parseImage(*image)
	if err != nil {
		return err
	}
	epoch, err := parseEpoch(*epochFlag)
	if err != nil {
		return err
	}
	if *withChart && ref.Digest == "" {
		return fmt.Errorf("-image %q: a release names its image by digest (repository@sha256:...)", *image)
	}
	if *withChart && !semver.MatchString(*version) {
		return fmt.Errorf("-version %q: a release is vX.Y.Z (or vX.Y.Z-pre)", *version)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	manifest, err := renderInstall(*root, ref, *version)
	if err != nil {
		return err
	}
	path := filepath.Join(*out, "install.yaml")
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		return err
	}
	fmt.Println(path)
	if !*withChart {
		return nil
	}
	pkg, err := packageChart(*root, ref, *version, epoch, *out)
	if err != nil {
		return err
	}
	fmt.Println(pkg)
	return nil
}

// semver is the form of a release's version: v, then semantic versioning's.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)` +
	`(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?$`)

// digest is the form of an image digest the release accepts.
var digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// parseImage reads repository[:tag][@digest] into kustomize's image replacement for the
// controller's image.
func parseImage(s string) (types.Image, error) {
	img := types.Image{Name: imageName}
	if s == "" {
		return img, fmt.Errorf("-image is required (repository[:tag][@sha256:digest])")
	}
	rest := s
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		img.Digest = rest[at+1:]
		rest = rest[:at]
		if !digest.MatchString(img.Digest) {
			return img, fmt.Errorf("-image %q: the digest is not sha256:<64 hex digits>", s)
		}
	}
	if colon := strings.LastIndex(rest, ":"); colon > strings.LastIndex(rest, "/") {
		img.NewTag = rest[colon+1:]
		rest = rest[:colon]
	}
	if rest == "" || strings.ContainsAny(rest, " \t\n") || img.NewTag == "" && strings.HasSuffix(s, ":") {
		return img, fmt.Errorf("-image %q is not repository[:tag][@sha256:digest]", s)
	}
	img.NewName = rest
	if img.Digest != "" {
		img.NewTag = "" // by digest alone: the tag would only be read, never trusted
	}
	return img, nil
}

// reference is img as it appears in a pod spec.
func reference(img types.Image) string {
	switch {
	case img.Digest != "":
		return img.NewName + "@" + img.Digest
	case img.NewTag != "":
		return img.NewName + ":" + img.NewTag
	}
	return img.NewName
}

// renderInstall renders artifacts/ with kustomize and replaces the controller's image.
func renderInstall(root string, img types.Image, version string) ([]byte, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified // the order is artifacts/kustomization.yaml's sortOptions
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "artifacts"))
	if err != nil {
		return nil, fmt.Errorf("rendering artifacts/: %w", err)
	}
	if err := m.ApplyFilter(imagetag.LegacyFilter{ImageTag: img}); err != nil {
		return nil, fmt.Errorf("setting the image: %w", err)
	}
	body, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	// The image must have been found: a renamed images: entry would leave it behind.
	if !bytes.Contains(body, []byte("image: "+reference(img)+"\n")) {
		return nil, fmt.Errorf("the rendered artifacts have no container image %q: the images: entry of artifacts/controller/Kustomization no longer names %s", reference(img), imageName)
	}
	release := "the controller"
	if version != "" {
		release = "llama-stack-controller " + version
	}
	header := fmt.Sprintf(`# %s: what kubectl kustomize artifacts/ renders (the CRD and its
# admission policy, RBAC, the namespace, the operator ConfigMap, the controller's
# Deployment, its PodDisruptionBudget and the conversion webhook's Service), the image
#   %s
# Install it server-side (the CRD is larger than client-side apply's annotation allows):
#   kubectl apply --server-side -f install.yaml
`, release, reference(img))
	return append([]byte(header), body...), nil
}

// packageChart packages the chart with the release's version and image, and returns the
// package's path.
func packageChart(root string, img types.Image, version string, epoch time.Time, out string) (string, error) {
	c, err := loader.Load(filepath.Join(root, chartDir))
	if err != nil {
		return "", fmt.Errorf("loading the chart: %w", err)
	}
	c.Metadata.Version = strings.TrimPrefix(version, "v")
	c.Metadata.AppVersion = version
	found := false
	for _, f := range c.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		found = true
		if f.Data, err = setImageValues(f.Data, img, version); err != nil {
			return "", err
		}
		values := map[string]any{}
		if err := yaml.Unmarshal(f.Data, &values); err != nil {
			return "", err
		}
		c.Values = values
	}
	if !found {
		return "", fmt.Errorf("the chart has no %s", chartutil.ValuesfileName)
	}
	stamp(c, epoch)
	return chartutil.Save(c, out)
}

// setImageValues sets image.repository, image.tag and image.digest in a values file,
// line by line, so that its comments and layout stay as written; it then reads the
// result back to check that it says what was set.
func setImageValues(values []byte, img types.Image, version string) ([]byte, error) {
	want := map[string]string{"repository": img.NewName, "tag": version, "digest": img.Digest}
	lines := strings.Split(string(values), "\n")
	inImage := false
	set := map[string]bool{}
	for i, line := range lines {
		switch {
		case line == "image:":
			inImage = true
			continue
		case inImage && line != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "#"):
			inImage = false
		}
		if !inImage {
			continue
		}
		for key, v := range want {
			if strings.HasPrefix(line, "  "+key+":") {
				lines[i] = fmt.Sprintf("  %s: %q", key, v)
				set[key] = true
			}
		}
	}
	out := []byte(strings.Join(lines, "\n"))
	var got struct {
		Image map[string]string `json:"image"`
	}
	if err := yaml.Unmarshal(out, &got); err != nil {
		return nil, fmt.Errorf("reading the chart's values back: %w", err)
	}
	for key, v := range want {
		if !set[key] || got.Image[key] != v {
			return nil, fmt.Errorf("the chart's values.yaml has no line image.%s to set (a top-level image: map, two-space indented)", key)
		}
	}
	return out, nil
}

// stamp sets every timestamp the package writes to epoch.
func stamp(c *chart.Chart, epoch time.Time) {
	c.ModTime = epoch
	c.SchemaModTime = epoch
	for _, files := range [][]*common.File{c.Raw, c.Templates, c.Files} {
		for _, f := range files {
			f.ModTime = epoch
		}
	}
	if c.Lock != nil {
		c.Lock.Generated = epoch
	}
	for _, dep := range c.Dependencies() {
		stamp(dep, epoch)
	}
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
