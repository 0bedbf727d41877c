package configgen

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// publishedBeforeTheRename are pre-rename tags the ogxai organisation is seen to
// publish (SOURCES.md): the ones the docs may show for holding a
// server on the llama-stack line.
var publishedBeforeTheRename = []string{"0.5.2", "0.6.1"}

var distributionImage = regexp.MustCompile(`docker\.io/([a-z0-9-]+)/distribution-([a-z0-9-]+):([A-Za-z0-9._-]+)`)

// TestArtifactsAgreeWithThePins: what artifacts/ installs and shows names only images
// that exist: no docker.io/llamastack image (that organisation is gone), a
// docker.io/ogxai one only of a published distribution, at its pin or at a
// pre-rename tag that is published.
func TestArtifactsAgreeWithThePins(t *testing.T) {
	seen := 0
	err := filepath.WalkDir("../../artifacts", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range distributionImage.FindAllStringSubmatch(string(raw), -1) {
			seen++
			org, name, tag := m[1], m[2], m[3]
			dist, ok := LookupDistribution(name)
			switch {
			case org != "ogxai":
				t.Errorf("%s: %s is not under docker.io/ogxai, where the distributions are published", path, m[0])
			case !ok || !dist.Published():
				t.Errorf("%s: %s: distribution %s has no published image", path, m[0], name)
			case tag != dist.ServerVersion && !slices.Contains(publishedBeforeTheRename, tag):
				t.Errorf("%s: %s: neither the pin (%s) nor a published pre-rename tag", path, m[0], dist.Image)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("no distribution image in artifacts/: the test reads the wrong directory")
	}
}
