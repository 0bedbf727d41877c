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

// Distribution is a named distribution: its pinned image, the llama-stack
// version in that image, and the base config written for that version.
type Distribution struct {
	// Name is the name spec.distribution.name uses.
	Name string
	// Image is the pinned image reference (never :latest).
	Image string
	// ServerVersion is the llama-stack version the image runs.
	ServerVersion string
	// BaseFile is the file under bases/ holding the base config, named
	// <name>-<server version>.yaml; empty when the controller has none for
	// this distribution, in which case generating needs spec.baseConfig.
	BaseFile string
	// Note says why a distribution has no base, for messages and docs.
	Note string
	// EarlierImages are the images earlier releases of the controller ran
	// for this name by default (until it was pinned: :latest). When Image
	// changes, the old one is added here. A Deployment still running one
	// moves to Image even while there is no operator ConfigMap, which
	// otherwise keeps running images (see pkg/controller).
	EarlierImages []string
}

// distributions is the one table of named distributions. SOURCES.md beside
// this file gives, for each row, the upstream tag and file it was read from.
// Changing an image means changing its ServerVersion and its base together:
// TestDistributionsPinned fails otherwise.
var distributions = []Distribution{
	{
		Name:          "starter",
		Image:         "docker.io/llamastack/distribution-starter:0.7.1",
		ServerVersion: "0.7.1",
		BaseFile:      "starter-0.7.1.yaml",
		EarlierImages: []string{"docker.io/llamastack/distribution-starter:latest"},
	},
	{
		Name:          "postgres-demo",
		Image:         "docker.io/llamastack/distribution-postgres-demo:0.7.1",
		ServerVersion: "0.7.1",
		BaseFile:      "postgres-demo-0.7.1.yaml",
		EarlierImages: []string{"docker.io/llamastack/distribution-postgres-demo:latest"},
	},
	{
		// The distribution was removed from llama-stack in 0.5: 0.4.x is
		// the last release with both an image and a config.
		Name:          "meta-reference-gpu",
		Image:         "docker.io/llamastack/distribution-meta-reference-gpu:0.4.2",
		ServerVersion: "0.4.2",
		BaseFile:      "meta-reference-gpu-0.4.2.yaml",
		EarlierImages: []string{"docker.io/llamastack/distribution-meta-reference-gpu:latest"},
	},
	{
		// Folded into starter after 0.2.x; its images stopped being
		// published with 0.2.9. That release reads the older config shape.
		Name:          "remote-vllm",
		Image:         "docker.io/llamastack/distribution-remote-vllm:0.2.9",
		ServerVersion: "0.2.9",
		Note:          "remote-vllm ends with llama-stack 0.2.x, whose config shape the controller does not generate: use distribution starter (vLLM through providers.inference) or a direct image with baseConfig",
		EarlierImages: []string{"docker.io/llamastack/distribution-remote-vllm:latest"},
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
	return d
}

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
