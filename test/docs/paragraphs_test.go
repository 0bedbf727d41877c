package docs

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// maxParagraph is the most characters a prose paragraph of the docs may hold: the
// pages aim at about 1,000, and this leaves some room.
const maxParagraph = 1200

// listItem opens a list item; an item is a paragraph of its own.
var listItem = regexp.MustCompile(`^\s*([-*+]|\d+\.)\s`)

// paragraph is one prose paragraph of a page: its first line and its text, its
// lines joined by spaces.
type paragraph struct {
	line int
	text string
}

// paragraphs splits a page into prose paragraphs: blank lines, headings, list items and
// HTML comments end one; code blocks and tables are not prose and are left out.
func paragraphs(page string) []paragraph {
	var (
		out   []paragraph
		cur   []string
		first int
		code  bool
	)
	flush := func() {
		if len(cur) > 0 {
			out = append(out, paragraph{first, strings.Join(cur, " ")})
		}
		cur = nil
	}
	for i, line := range strings.Split(page, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case fence.MatchString(line):
			flush()
			code = !code
			continue
		case code:
			continue
		case t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "|") || strings.HasPrefix(t, "<!--"):
			flush()
			continue
		case listItem.MatchString(line):
			flush()
		}
		if len(cur) == 0 {
			first = i + 1
		}
		cur = append(cur, t)
	}
	flush()
	return out
}

// TestParagraphsAreShort: no prose paragraph of the README, the top-level pages or
// docs/ is over maxParagraph characters, so that the pages stay ones a reader finishes.
func TestParagraphsAreShort(t *testing.T) {
	for _, page := range pages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paragraphs(string(raw)) {
			if n := len([]rune(p.text)); n > maxParagraph {
				t.Errorf("%s:%d: a paragraph of %d characters (at most %d): break it into shorter ones or a list: %.80s...",
					page, p.line, n, maxParagraph, p.text)
			}
		}
	}
}

// TestParagraphsSplitting pins what counts as a paragraph.
func TestParagraphsSplitting(t *testing.T) {
	page := strings.Join([]string{
		"# Title",
		"one",
		"two",
		"",
		"- item",
		"  more",
		"- next",
		"```",
		"code " + strings.Repeat("x", 2000),
		"```",
		"| table | " + strings.Repeat("y", 2000) + " |",
		"last",
	}, "\n")
	var got []string
	for _, p := range paragraphs(page) {
		got = append(got, p.text)
	}
	want := []string{"one two", "- item more", "- next", "last"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("paragraphs = %q, want %q", got, want)
	}
}

// TestBenchmarksPageIsShort: BENCHMARKS.md holds the method and the latest runs; older
// runs and their stories go to docs/benchmarks/, so the page stays at most 250 lines.
func TestBenchmarksPageIsShort(t *testing.T) {
	raw, err := os.ReadFile(root + "/BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n > 250 {
		t.Errorf("BENCHMARKS.md has %d lines, at most 250: move older runs to docs/benchmarks/", n)
	}
}
