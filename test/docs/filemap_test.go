package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/development.md maps every file of pkg/controller to its concern: a file added,
// renamed or removed without the map changing fails here.
func TestControllerFileMap(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	files, err := filepath.Glob(filepath.Join(root, "pkg", "controller", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		listed[name] = true
		if !strings.Contains(page, "`"+name+"`") {
			t.Errorf("pkg/controller/%s is not in docs/development.md's map of the package", name)
		}
	}
	// And the map names no file that is gone.
	start := strings.Index(page, "`pkg/controller`, file by file")
	if start < 0 {
		t.Fatal("docs/development.md has no map of pkg/controller")
	}
	end := strings.Index(page[start:], "\n\n| ")
	table := page[start:]
	if end >= 0 {
		if next := strings.Index(page[start+end+2:], "\n\n"); next >= 0 {
			table = page[start : start+end+2+next]
		}
	}
	for _, field := range strings.Split(table, "`") {
		if strings.HasSuffix(field, ".go") && !strings.Contains(field, " ") && !listed[field] &&
			!strings.HasSuffix(field, "_test.go") && field != "<file>_test.go" {
			t.Errorf("docs/development.md's map names %s, which pkg/controller does not have", field)
		}
	}
}
