package configgen

import (
	"os"
	"strings"
	"testing"
)

// TestREADMENamedDistributions: the README's table of named distributions is this
// table, row for row (sorted by name), so the two cannot drift.
func TestREADMENamedDistributions(t *testing.T) {
	raw, err := os.ReadFile(apiPagePath)
	if err != nil {
		t.Fatal(err)
	}
	const header = "| `distribution.name` | image | server | base config | earlier releases ran |"
	lines := strings.Split(string(raw), "\n")
	start := -1
	for i, l := range lines {
		if l == header {
			if start >= 0 {
				t.Fatalf("docs/api.md has the table header twice (lines %d and %d)", start+1, i+1)
			}
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("docs/api.md has no line %q", header)
	}
	var rows [][]string
	for _, l := range lines[start+2:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(l, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	want := Distributions()
	if len(rows) != len(want) {
		t.Fatalf("docs/api.md lists %d named distributions, the table has %d", len(rows), len(want))
	}
	unquote := func(s string) string { return strings.Trim(s, "`") }
	for i, d := range want {
		r := rows[i]
		if len(r) != 5 {
			t.Errorf("README row %d: %d cells, want 5: %q", i+1, len(r), r)
			continue
		}
		if unquote(r[0]) != d.Name || unquote(r[1]) != d.Image || r[2] != d.ServerVersion {
			t.Errorf("README row %d: %s %s %s, want %s %s %s", i+1, r[0], r[1], r[2], d.Name, d.Image, d.ServerVersion)
		}
		if hasBase := r[3] == "built in"; hasBase != (d.BaseFile != "") || !hasBase && !strings.HasPrefix(r[3], "none") {
			t.Errorf("README row %d (%s): base %q, but the table's base file is %q", i+1, d.Name, r[3], d.BaseFile)
		}
		var earlier []string
		for _, e := range strings.Split(r[4], ",") {
			earlier = append(earlier, unquote(strings.TrimSpace(e)))
		}
		if strings.Join(earlier, ",") != strings.Join(d.EarlierImages, ",") {
			t.Errorf("README row %d (%s): earlier images %q, want %q", i+1, d.Name, earlier, d.EarlierImages)
		}
	}
}
