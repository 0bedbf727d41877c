package revision

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
)

// The image is chosen once per sync; a generated config is written for it, or for the
// pin when the kept running image does not tell its version.
func TestServerImageForConfig(t *testing.T) {
	starter, ok := configgen.LookupDistribution("starter")
	require.True(t, ok)
	for name, tc := range map[string]struct {
		img            serverImage
		image, version string
		problemField   string
	}{
		"spec image with a version tag": {img: serverImage{ref: "quay.io/me/ogx:v1.2.0", from: imageFromSpec},
			image: "quay.io/me/ogx:v1.2.0", version: "1.2.0"},
		"spec image without one": {img: serverImage{ref: "quay.io/me/ogx:latest", from: imageFromSpec},
			problemField: "spec.distribution.image"},
		"the pin": {img: serverImage{ref: starter.Image, from: imageFromPin, dist: starter},
			image: starter.Image, version: starter.ServerVersion},
		"an override with a version tag": {img: serverImage{ref: "mirror.example/starter:0.7.1", from: imageFromOverride, dist: starter},
			image: "mirror.example/starter:0.7.1", version: "0.7.1"},
		"an override naming the pin": {img: serverImage{ref: starter.Image, from: imageFromOverride, dist: starter},
			image: starter.Image, version: starter.ServerVersion},
		"an override without a version tag": {img: serverImage{ref: "mirror.example/starter:latest", from: imageFromOverride, dist: starter},
			problemField: "spec.distribution.name"},
		"a kept image with a version tag": {img: serverImage{ref: "mirror.example/starter:1.1.0", from: imageKept, dist: starter},
			image: "mirror.example/starter:1.1.0", version: "1.1.0"},
		"a kept image without one: the pin": {img: serverImage{ref: "mirror.example/starter:latest", from: imageKept, dist: starter},
			image: starter.Image, version: starter.ServerVersion},
	} {
		t.Run(name, func(t *testing.T) {
			image, version, problem := tc.img.forConfig()
			if tc.problemField != "" {
				require.NotNil(t, problem)
				assert.Equal(t, v1alpha2.ReasonBaseConfigRequired, problem.Reason)
				assert.Contains(t, problem.Message, tc.problemField+": ")
				return
			}
			require.Nil(t, problem)
			assert.Equal(t, tc.image, image)
			assert.Equal(t, tc.version, version)
		})
	}
}

func TestImageServerVersion(t *testing.T) {
	assert.Equal(t, "0.7.1", ImageServerVersion("docker.io/llamastack/distribution-starter:0.7.1"))
	assert.Equal(t, "1.3.0", ImageServerVersion("quay.io/me/ogx:v1.3.0"))
	assert.Equal(t, "", ImageServerVersion("quay.io/me/ogx:latest"))
	assert.Equal(t, "", ImageServerVersion("quay.io/me/ogx"))
}

func TestImageVersion(t *testing.T) {
	for image, want := range map[string]string{
		"docker.io/llamastack/distribution-starter:0.7.1":              "0.7.1",
		"localhost:5000/stack:v0.4.2":                                  "0.4.2",
		"localhost:5000/stack:0.4.2@sha256:" + strings.Repeat("a", 64): "0.4.2",
		"localhost:5000/stack":                                         "",
		"docker.io/x/y:latest":                                         "",
		"docker.io/x/y:0.7.1rc1":                                       "",
		"docker.io/x/y@sha256:abcdef":                                  "",
	} {
		got, ok := imageVersion(image)
		assert.Equal(t, want, got, image)
		assert.Equal(t, want != "", ok, image)
	}
}
