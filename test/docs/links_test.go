// Package docs checks the project's Markdown: every relative link and anchor resolves,
// and every page under docs/ is linked from the README or another page.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the repository root, from this package's directory.
const root = "../.."

// pages are the Markdown files checked: the top level and everything under docs/.
func pages(t *testing.T) []string {
	t.Helper()
	var out []string
	top, err := filepath.Glob(filepath.Join(root, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, top...)
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

var (
	// link is an inline Markdown link or image: [text](target) or [text](target "title").
	link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// heading is an ATX heading.
	heading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	// fence opens or closes a code block.
	fence = regexp.MustCompile("^\\s*(```|~~~)")
	// codeSpan is inline code, where no link is.
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// anchor is the fragment GitHub gives a heading: lower case, punctuation but hyphens and
// underscores dropped, spaces made hyphens; repeats get -1, -2, ...
func anchor(text string) string {
	text = codeSpan.ReplaceAllStringFunc(text, func(s string) string { return strings.Trim(s, "`") })
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// parsed is a page's anchors and links, code blocks left out.
type parsed struct {
	anchors map[string]bool
	links   []struct {
		line   int
		target string
	}
}

func parse(t *testing.T, path string) parsed {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := parsed{anchors: map[string]bool{}}
	seen := map[string]int{}
	inCode := false
	for i, line := range strings.Split(string(raw), "\n") {
		if fence.MatchString(line) {
			inCode = !inCode
			continue
		}
		if inCode {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			a := anchor(m[2])
			if n := seen[a]; n > 0 {
				p.anchors[a+"-"+itoa(n)] = true
			} else {
				p.anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			p.links = append(p.links, struct {
				line   int
				target string
			}{i + 1, m[1]})
		}
	}
	return p
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestLinksResolve: every relative link of every page names a file of the repository,
// and every anchor a heading of the page it points into.
func TestLinksResolve(t *testing.T) {
	all := map[string]parsed{}
	for _, p := range pages(t) {
		all[filepath.Clean(p)] = parse(t, p)
	}
	for page, p := range all {
		for _, l := range p.links {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Clean(filepath.Join(filepath.Dir(page), file))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: no file %s", page, l.line, target, dest)
					continue
				}
			}
			if frag == "" {
				continue
			}
			d, ok := all[dest]
			if !ok {
				t.Errorf("%s:%d: link %q: an anchor into a file that is not a checked page", page, l.line, target)
				continue
			}
			if !d.anchors[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", page, l.line, target, dest, frag)
			}
		}
	}
}

// TestEveryPageIsLinked: every page under docs/ is reachable from the README.
func TestEveryPageIsLinked(t *testing.T) {
	all := map[string]parsed{}
	for _, p := range pages(t) {
		all[filepath.Clean(p)] = parse(t, p)
	}
	start := filepath.Clean(filepath.Join(root, "README.md"))
	reached := map[string]bool{start: true}
	queue := []string{start}
	for len(queue) > 0 {
		page := queue[0]
		queue = queue[1:]
		for _, l := range all[page].links {
			file, _, _ := strings.Cut(l.target, "#")
			if file == "" || strings.Contains(file, "://") {
				continue
			}
			dest := filepath.Clean(filepath.Join(filepath.Dir(page), file))
			if _, ok := all[dest]; ok && !reached[dest] {
				reached[dest] = true
				queue = append(queue, dest)
			}
		}
	}
	for page := range all {
		if strings.Contains(page, string(filepath.Separator)+"docs"+string(filepath.Separator)) && !reached[page] {
			t.Errorf("%s is linked from no page the README leads to", page)
		}
	}
}

// TestAnchors pins the heading anchors the checks rely on.
func TestAnchors(t *testing.T) {
	for text, want := range map[string]string{
		"Serving TLS (v1alpha2)":      "serving-tls-v1alpha2",
		"Install in a cluster":        "install-in-a-cluster",
		"Generated config (v1alpha2)": "generated-config-v1alpha2",
		"`make run` and `make test`":  "make-run-and-make-test",
		"Why these defaults?":         "why-these-defaults",
	} {
		if got := anchor(text); got != want {
			t.Errorf("anchor(%q) = %q, want %q", text, got, want)
		}
	}
}

// exampleFile marks a code block of a page as a copy of a repository file.
var exampleFile = regexp.MustCompile(`^<!-- example-file: (\S+) -->$`)

// TestExampleFilesAreCopies: a code block marked with example-file is that file, as it
// is (the files are admitted and converged by the CRD and e2e tests).
func TestExampleFilesAreCopies(t *testing.T) {
	found := 0
	for _, page := range pages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		for i, line := range lines {
			m := exampleFile.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			found++
			if i+1 >= len(lines) || !fence.MatchString(lines[i+1]) {
				t.Errorf("%s:%d: example-file %s is not followed by a code block", page, i+1, m[1])
				continue
			}
			var block []string
			j := i + 2
			for ; j < len(lines) && !fence.MatchString(lines[j]); j++ {
				block = append(block, lines[j])
			}
			want, err := os.ReadFile(filepath.Join(root, m[1]))
			if err != nil {
				t.Errorf("%s:%d: %v", page, i+1, err)
				continue
			}
			if got := strings.Join(block, "\n") + "\n"; got != string(want) {
				t.Errorf("%s:%d: the block is not %s as it is:\n%s", page, i+1, m[1], got)
			}
		}
	}
	if found < 2 {
		t.Errorf("found %d example-file blocks, want the README's two at least", found)
	}
}
