package configgen

import (
	"embed"
	"fmt"
	"slices"
	"sort"
	"strings"
)

//go:embed bases/*.yaml
var basesFS embed.FS

// Distribution is a named distribution: its pinned image, the server
// version in that image, and the base config written for that version.
type Distribution struct {
	// Name is the name spec.distribution.name uses.
	Name string
	// Image is the pinned image reference (never :latest); empty when no
	// image of this distribution is published (Note says what to use).
	Image string
	// ServerVersion is the server version the image runs.
	ServerVersion string
	// BaseFile is the file under bases/ holding the base config, named
	// <name>-<server version>.yaml; empty when the controller has none for
	// this distribution, in which case generating needs spec.baseConfig.
	BaseFile string
	// OlderBases are base files of earlier server versions of this
	// distribution (<name>-<version>.yaml), for a CR that image-overrides
	// keeps on one of those versions.
	OlderBases []string
	// Note says why a distribution has no image or no base, for messages
	// and docs.
	Note string
	// EarlierImages are the images earlier releases of the controller ran
	// for this name by default (their pins, and :latest before names were
	// pinned). When Image changes, the old one is added here. A Deployment
	// still running one moves to Image even while there is no operator
	// ConfigMap, which otherwise keeps running images (see pkg/controller).
	EarlierImages []string
}

// distributions is the one table of named distributions. SOURCES.md beside
// this file gives, for each row, the upstream tag and file it was read from.
// Changing an image means changing its ServerVersion and its base together:
// TestDistributionsPinned fails otherwise. Only starter and postgres-demo
// are published (docker.io/ogxai, since the llamastack organisation was
// removed from Docker Hub in June 2026); 1.3.0 is the newest tag a release
// of the successor operator tested (its v0.14.0).
var distributions = []Distribution{
	{
		Name:          "starter",
		Image:         "docker.io/ogxai/distribution-starter:1.3.0",
		ServerVersion: "1.3.0",
		BaseFile:      "starter-1.3.0.yaml",
		OlderBases:    []string{"starter-0.7.1.yaml"},
		EarlierImages: []string{"docker.io/llamastack/distribution-starter:latest", "docker.io/llamastack/distribution-starter:0.7.1"},
	},
	{
		Name:          "postgres-demo",
		Image:         "docker.io/ogxai/distribution-postgres-demo:1.3.0",
		ServerVersion: "1.3.0",
		BaseFile:      "postgres-demo-1.3.0.yaml",
		OlderBases:    []string{"postgres-demo-0.7.1.yaml"},
		EarlierImages: []string{"docker.io/llamastack/distribution-postgres-demo:latest", "docker.io/llamastack/distribution-postgres-demo:0.7.1"},
	},
	{
		// Removed from the server in 0.5; its images went with
		// docker.io/llamastack and were never published under ogxai.
		Name:          "meta-reference-gpu",
		OlderBases:    []string{"meta-reference-gpu-0.4.2.yaml"},
		Note:          "distribution meta-reference-gpu has no published image (it was removed from the server in 0.5, and its images went with docker.io/llamastack): use distribution starter with your inference provider in spec.providers.inference (v1alpha2), or set spec.distribution.image",
		EarlierImages: []string{"docker.io/llamastack/distribution-meta-reference-gpu:latest", "docker.io/llamastack/distribution-meta-reference-gpu:0.4.2"},
	},
	{
		// Folded into starter after 0.2.x; its images stopped being
		// published with 0.2.9 and went with docker.io/llamastack.
		Name:          "remote-vllm",
		Note:          "distribution remote-vllm has no published image (it was folded into starter after 0.2.x, and its images went with docker.io/llamastack): use distribution starter with a remote::vllm provider in spec.providers.inference (v1alpha2), or set spec.distribution.image",
		EarlierImages: []string{"docker.io/llamastack/distribution-remote-vllm:latest", "docker.io/llamastack/distribution-remote-vllm:0.2.9"},
	},
}

// Distributions returns the table of named distributions, sorted by name.
func Distributions() []Distribution {
	out := make([]Distribution, len(distributions))
	for i, d := range distributions {
		out[i] = d.clone()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupDistribution returns the named distribution.
func LookupDistribution(name string) (Distribution, bool) {
	for _, d := range distributions {
		if d.Name == name {
			return d.clone(), true
		}
	}
	return Distribution{}, false
}

func (d Distribution) clone() Distribution {
	d.EarlierImages = slices.Clone(d.EarlierImages)
	d.OlderBases = slices.Clone(d.OlderBases)
	return d
}

// Published reports whether an image of the distribution is published.
func (d Distribution) Published() bool { return d.Image != "" }

// DistributionNames lists the names of the table, sorted, for messages.
func DistributionNames() string {
	var names []string
	for _, d := range Distributions() {
		names = append(names, d.Name)
	}
	return strings.Join(names, ", ")
}

// Base returns the base config of the distribution, or an error naming why
// there is none.
func (d Distribution) Base() ([]byte, error) {
	if d.BaseFile == "" {
		return nil, fmt.Errorf("%s", d.Note)
	}
	return basesFS.ReadFile("bases/" + d.BaseFile)
}

// BaseVersions lists the server versions the distribution has base configs
// for, newest first.
func (d Distribution) BaseVersions() []string {
	var out []string
	if d.BaseFile != "" {
		out = append(out, d.ServerVersion)
	}
	for i := len(d.OlderBases) - 1; i >= 0; i-- {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(d.OlderBases[i], d.Name+"-"), ".yaml"))
	}
	return out
}

// BaseFor returns the distribution's base config for server version v: the
// pinned one, or one of OlderBases.
func (d Distribution) BaseFor(v string) ([]byte, bool) {
	if v == d.ServerVersion && d.BaseFile != "" {
		b, err := d.Base()
		return b, err == nil
	}
	want := d.Name + "-" + v + ".yaml"
	if slices.Contains(d.OlderBases, want) {
		b, err := basesFS.ReadFile("bases/" + want)
		return b, err == nil
	}
	return nil, false
}
