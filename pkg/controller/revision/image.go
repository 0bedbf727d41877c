package revision

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
)

// serverImage is the image a CR's server runs, chosen once per sync (chooseImage) and
// read by everything that depends on it: the Deployment, the config generated for it,
// the check of a user config against its version.
type serverImage struct {
	// ref is the image reference.
	ref string
	// from says where ref came from.
	from imageSource
	// dist is the named distribution's entry; its zero value for spec.distribution.image.
	dist configgen.Distribution
}

// imageSource is where a CR's image came from.
type imageSource int

const (
	// imageFromSpec: spec.distribution.image, as given.
	imageFromSpec imageSource = iota
	// imageFromPin: the named distribution's pinned image.
	imageFromPin
	// imageFromOverride: the operator ConfigMap's image-overrides entry for the name.
	imageFromOverride
	// imageKept: the image the Deployment runs, kept while image-overrides does not
	// say clearly which image the distribution runs.
	imageKept
)

// chooseImage picks the server image: spec.distribution.image as given, or the image
// of the named distribution, overridden by the operator ConfigMap. While image-overrides
// does not say clearly which image a distribution runs (it is missing or does not parse,
// or its entry is invalid), a running Deployment keeps its image.
func (r *Resolver) chooseImage(l *v1alpha2.LlamaStackDistribution, cfg OperatorConfig) (serverImage, *fault.Problem) {
	dist := l.Spec.Distribution
	if dist.Image != "" {
		return serverImage{ref: dist.Image, from: imageFromSpec}, nil
	}
	if dist.Name == "" {
		return serverImage{}, &fault.Problem{Reason: v1alpha2.ReasonDistributionNotSupported, Message: "spec.distribution (v1alpha1 spec.server.distribution) needs a name or an image"}
	}
	image, ok := r.Distributions[dist.Name]
	if !ok {
		// Only the names with a published image are offered; the others are known but
		// report DistributionNotPublished.
		names := make([]string, 0, len(r.Distributions))
		for n, img := range r.Distributions {
			if img != "" {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		return serverImage{}, &fault.Problem{Reason: v1alpha2.ReasonDistributionNotSupported, Message: fmt.Sprintf(
			"distribution %q is not supported; supported distributions: %s (or set spec.distribution.image; v1alpha1 spec.server.distribution.image)",
			dist.Name, strings.Join(names, ", "))}
	}
	d, _ := configgen.LookupDistribution(dist.Name)
	if override, ok := cfg.ImageOverrides[dist.Name]; ok {
		return serverImage{ref: override, from: imageFromOverride, dist: d}, nil
	}
	if cfg.keepsImage(dist.Name) {
		if running := r.RunningImage(l); cfg.keepsRunningImage(dist.Name, running) {
			return serverImage{ref: running, from: imageKept, dist: d}, nil
		}
	}
	if image == "" {
		// Known, but no image is published: say what to use. What runs is kept, as
		// for every user error, so a Deployment is never moved to an image that
		// cannot be pulled.
		return serverImage{}, &fault.Problem{Reason: v1alpha2.ReasonDistributionNotPublished, Message: d.Note}
	}
	return serverImage{ref: image, from: imageFromPin, dist: d}, nil
}

// forConfig is the image a generated config is written for, and its server version:
// the shape of the config follows the version, so an image whose version is not known
// gets no config (a problem of the field that chose it). A running image kept while
// image-overrides cannot be read is kept only if its tag tells its version; otherwise
// the config is written for the pinned image, which the Deployment then runs.
func (img serverImage) forConfig() (image, version string, problem *fault.Problem) {
	d := img.dist
	switch {
	case img.from == imageFromSpec:
		v, ok := imageVersion(img.ref)
		if !ok {
			return "", "", baseConfigRequired("spec.distribution.image", fmt.Sprintf(
				"the tag of image %s is not a llama-stack version (major.minor.patch), so the shape of its config is not known: use an image tagged with its server version, name a distribution (%s), or use overrideConfig",
				img.ref, configgen.DistributionNames()))
		}
		return img.ref, v, nil
	case img.ref == d.Image || img.from == imageFromPin:
		return d.Image, d.ServerVersion, nil
	case img.from == imageKept:
		if v, ok := imageVersion(img.ref); ok {
			return img.ref, v, nil
		}
		return d.Image, d.ServerVersion, nil
	}
	v, ok := imageVersion(img.ref)
	if !ok {
		return "", "", baseConfigRequired("spec.distribution.name", fmt.Sprintf(
			"the operator ConfigMap's image-overrides runs image %s for distribution %s; its tag is not a llama-stack version (major.minor.patch), so the shape of its config is not known: give the override a tag with its server version, or use overrideConfig",
			img.ref, d.Name))
	}
	return img.ref, v, nil
}

// baseConfigRequired is the problem of a field whose image's config shape is not known.
func baseConfigRequired(field, message string) *fault.Problem {
	return &fault.Problem{Reason: v1alpha2.ReasonBaseConfigRequired, Message: field + ": " + message}
}

// imageVersion reads a server version from an image's tag (repo:0.7.1 or repo:v0.7.1,
// with or without a digest); ok is false when the tag is not one.
func imageVersion(image string) (string, bool) {
	ref, _, _ := strings.Cut(image, "@")
	slash := strings.LastIndex(ref, "/")
	colon := strings.LastIndex(ref, ":")
	if colon <= slash {
		return "", false
	}
	v, err := configgen.ParseVersion(ref[colon+1:])
	if err != nil {
		return "", false
	}
	return v.String(), true
}

// ImageServerVersion is the server version an image runs: the pinned version of a
// named distribution's image, else its tag's; "" when neither tells.
func ImageServerVersion(image string) string {
	for _, d := range configgen.Distributions() {
		if d.Image == image {
			return d.ServerVersion
		}
	}
	if v, ok := imageVersion(image); ok {
		return v
	}
	return ""
}

// ChooseImage is the image chooseImage picks for l under cfg, or the problem of the
// fields that choose it.
func (r *Resolver) ChooseImage(l *v1alpha2.LlamaStackDistribution, cfg OperatorConfig) (string, *fault.Problem) {
	img, problem := r.chooseImage(l, cfg)
	return img.ref, problem
}
