package configgen

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// The README's "Field by field" examples are checked here, so that what it
// shows stays what Generate writes. An example is the fenced blocks between
//
//	<!-- configgen-example: NAME -->
//	<!-- /configgen-example -->
//
// (prose between the blocks is free):
//
//  1. a ```yaml block with the CR's spec (top-level key spec:), which names
//     a distribution of the table; its base is the distribution's;
//  2. either a ```yaml block with what the config contains, or a ```text
//     block with the error (field: message; a trailing "..." shortens the
//     message, and line breaks count as spaces);
//  3. optionally a ```yaml block, env:, with the server container's
//     variables Generate returns (all of them). Without it there are none.
//
// A config fragment is a sub-tree of the generated config: a map shows
// some of its keys, a list shows all its entries in order (each entry a
// sub-tree of the generated one), a scalar its exact value; a key whose
// value is ~ (null) is one the generated config does not have.

// readmePath is the page of the user manual that shows the generator's examples
// (docs/config-generation.md, once the README's "Field by field" section).
const readmePath = "../../docs/config-generation.md"

// apiPagePath is the page with the table of named distributions.
const apiPagePath = "../../docs/api.md"

// readmeExample is one example of the README, as written.
type readmeExample struct {
	name   string
	line   int // of its opening marker
	blocks []readmeBlock
}

type readmeBlock struct {
	lang string
	line int // of its opening fence
	body string
}

const (
	exampleOpen  = "<!-- configgen-example:"
	exampleClose = "<!-- /configgen-example -->"
)

// readmeExamples reads the examples of a Markdown text, refusing a
// malformed one so that a typo cannot hide an example from the test.
func readmeExamples(text string) ([]readmeExample, error) {
	var (
		out   []readmeExample
		cur   *readmeExample
		fence *readmeBlock
		body  []string
	)
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if fence != nil {
			if strings.TrimSpace(line) == "```" {
				fence.body = strings.Join(body, "\n")
				cur.blocks = append(cur.blocks, *fence)
				fence, body = nil, nil
				continue
			}
			body = append(body, line)
			continue
		}
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, exampleOpen):
			if cur != nil {
				return nil, fmt.Errorf("README line %d: example %q opened inside example %q (line %d)", n, t, cur.name, cur.line)
			}
			name, ok := strings.CutSuffix(strings.TrimPrefix(t, exampleOpen), "-->")
			name = strings.TrimSpace(name)
			if !ok || name == "" {
				return nil, fmt.Errorf("README line %d: malformed marker %q", n, t)
			}
			cur = &readmeExample{name: name, line: n}
		case t == exampleClose:
			if cur == nil {
				return nil, fmt.Errorf("README line %d: %s without an opening marker", n, exampleClose)
			}
			out = append(out, *cur)
			cur = nil
		case cur != nil && strings.HasPrefix(t, "```"):
			fence = &readmeBlock{lang: strings.TrimSpace(strings.TrimPrefix(t, "```")), line: n}
		case cur != nil && strings.HasPrefix(t, "#"):
			return nil, fmt.Errorf("README line %d: a heading inside example %q (line %d): close it with %s", n, cur.name, cur.line, exampleClose)
		}
	}
	if fence != nil {
		return nil, fmt.Errorf("README line %d: code block never closed", fence.line)
	}
	if cur != nil {
		return nil, fmt.Errorf("README line %d: example %q never closed", cur.line, cur.name)
	}
	return out, nil
}

func TestReadmeExamples(t *testing.T) {
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	examples, err := readmeExamples(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	// The section has an example for each field; losing most of them (a
	// renamed marker) must not pass quietly.
	if len(examples) < 15 {
		t.Fatalf("found %d configgen examples in the README, want at least 15", len(examples))
	}
	seen := map[string]int{}
	for _, ex := range examples {
		if prev, dup := seen[ex.name]; dup {
			t.Errorf("README line %d: example name %q also used at line %d", ex.line, ex.name, prev)
		}
		seen[ex.name] = ex.line
		t.Run(ex.name, func(t *testing.T) { checkReadmeExample(t, ex) })
	}
}

func checkReadmeExample(t *testing.T, ex readmeExample) {
	t.Helper()
	where := func(b readmeBlock) string { return fmt.Sprintf("README line %d", b.line) }
	if len(ex.blocks) < 2 || len(ex.blocks) > 3 {
		t.Fatalf("README line %d: %d code blocks, want 2 or 3 (spec, config or error, env)", ex.line, len(ex.blocks))
	}
	specBlock, wantBlock := ex.blocks[0], ex.blocks[1]
	if specBlock.lang != "yaml" {
		t.Fatalf("%s: the spec block is %q, want yaml", where(specBlock), specBlock.lang)
	}
	var cr struct {
		Spec v1alpha2.LlamaStackDistributionSpec `json:"spec"`
	}
	if err := yaml.UnmarshalStrict([]byte(specBlock.body), &cr); err != nil {
		t.Fatalf("%s: the spec block does not read as a v1alpha2 spec: %v", where(specBlock), err)
	}
	d, ok := LookupDistribution(cr.Spec.Distribution.Name)
	if !ok || d.BaseFile == "" {
		t.Fatalf("%s: the spec must name a distribution with a base (%s), not %q", where(specBlock), DistributionNames(), cr.Spec.Distribution.Name)
	}
	base, err := d.Base()
	if err != nil {
		t.Fatal(err)
	}
	out, genErr := Generate(Input{Name: "my-llsd", Spec: cr.Spec, ServerVersion: d.ServerVersion, Base: base, BaseField: "spec.distribution.name"})

	switch wantBlock.lang {
	case "text":
		if genErr == nil {
			t.Fatalf("%s: want the error %q, but Generate succeeded", where(wantBlock), wantBlock.body)
		}
		var e *Error
		if !errors.As(genErr, &e) {
			t.Fatalf("Generate returned %v, not an *Error", genErr)
		}
		want, got := collapseSpace(wantBlock.body), collapseSpace(e.Error())
		if prefix, short := strings.CutSuffix(want, "..."); short {
			if !strings.HasPrefix(got, prefix) {
				t.Errorf("%s: error\n%s\ndoes not start with\n%s", where(wantBlock), got, prefix)
			}
		} else if got != want {
			t.Errorf("%s: error\n%s\nwant\n%s", where(wantBlock), got, want)
		}
		if len(ex.blocks) == 3 {
			t.Errorf("%s: an error example has no env block", where(ex.blocks[2]))
		}
		return
	case "yaml":
	default:
		t.Fatalf("%s: the second block is %q, want yaml (config) or text (error)", where(wantBlock), wantBlock.lang)
	}
	if genErr != nil {
		t.Fatalf("%s: Generate: %v", where(specBlock), genErr)
	}
	var want, got any
	if err := yaml.Unmarshal([]byte(wantBlock.body), &want); err != nil {
		t.Fatalf("%s: %v", where(wantBlock), err)
	}
	if err := yaml.Unmarshal(out.Config, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := want.(map[string]any); !ok {
		t.Fatalf("%s: the config block is not a mapping", where(wantBlock))
	}
	if problems := subtree("", want, got); len(problems) > 0 {
		shown, _ := yaml.Marshal(pick(want, got))
		t.Errorf("%s: the config fragment is not what Generate writes:\n  %s\nGenerate wrote (the part the fragment shows):\n%s",
			where(wantBlock), strings.Join(problems, "\n  "), shown)
	}

	var wantEnv []corev1.EnvVar
	if len(ex.blocks) == 3 {
		envBlock := ex.blocks[2]
		var e struct {
			Env []corev1.EnvVar `json:"env"`
		}
		if envBlock.lang != "yaml" {
			t.Fatalf("%s: the env block is %q, want yaml", where(envBlock), envBlock.lang)
		}
		if err := yaml.UnmarshalStrict([]byte(envBlock.body), &e); err != nil || len(e.Env) == 0 {
			t.Fatalf("%s: the env block is not a non-empty env: list (%v)", where(envBlock), err)
		}
		wantEnv = e.Env
	}
	if len(wantEnv) == 0 && len(out.Env) == 0 {
		return
	}
	if d := cmp.Diff(wantEnv, out.Env); d != "" {
		t.Errorf("README line %d: env (-README +Generate):\n%s", ex.line, d)
	}
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// subtree reports where want is not a sub-tree of got: every key of a
// want map in got's, every list as long as got's with each entry a
// sub-tree of got's entry at that place, every scalar equal.
func subtree(path string, want, got any) []string {
	at := path
	if at == "" {
		at = "(top)"
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: the README has a mapping, Generate wrote %s", at, describe(got))}
		}
		var problems []string
		for _, k := range sortedKeys(w) {
			p := k
			if path != "" {
				p = path + "." + k
			}
			gv, ok := g[k]
			if w[k] == nil {
				if ok {
					problems = append(problems, fmt.Sprintf("%s: the README marks it absent (~), Generate wrote %s", p, describe(gv)))
				}
				continue
			}
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: not in the generated config", p))
				continue
			}
			problems = append(problems, subtree(p, w[k], gv)...)
		}
		return problems
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: the README has a list, Generate wrote %s", at, describe(got))}
		}
		if len(w) != len(g) {
			return []string{fmt.Sprintf("%s: the README lists %d entries, Generate wrote %d", at, len(w), len(g))}
		}
		var problems []string
		for i := range w {
			problems = append(problems, subtree(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return problems
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: the README has %s, Generate wrote %s", at, describe(want), describe(got))}
		}
		return nil
	}
}

func describe(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%#v", v)
}

// pick returns the part of got that want shows (a list whose length
// differs whole), for a failure message.
func pick(want, got any) any {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return got
		}
		out := map[string]any{}
		for _, k := range sortedKeys(w) {
			if v, ok := g[k]; ok {
				out[k] = pick(w[k], v)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return got
		}
		out := make([]any, len(g))
		for i := range g {
			out[i] = pick(w[i], g[i])
		}
		return out
	}
	return got
}

// The checker itself: a fragment that Generate does not write fails.
func TestSubtree(t *testing.T) {
	got := map[string]any{
		"a":   map[string]any{"b": "x", "c": []any{map[string]any{"id": "p", "t": "q"}, "s"}},
		"nil": nil,
		"num": float64(2),
	}
	pass := []string{
		"a: {b: x}",
		"num: 2",
		"a: {c: [{id: p}, s]}",
		"a: {c: [{id: p, t: q}, s]}",
		"{a: {e: ~}, z: ~}",
	}
	fail := []string{
		"a: {b: y}",            // another value
		"a: {d: x}",            // a key Generate does not write
		"a: {c: [{id: p}]}",    // a list shown in part
		"a: {c: [s, {id: p}]}", // entries in another order
		"a: {c: [{id: p, t: r}, s]}",
		"num: '2'",  // a string for a number
		"a: x",      // a scalar for a mapping
		"a: {b: ~}", // absent, but written
		"nil: ~",    // written, as null
	}
	for _, s := range pass {
		var w any
		if err := yaml.Unmarshal([]byte(s), &w); err != nil {
			t.Fatal(err)
		}
		if p := subtree("", w, got); len(p) > 0 {
			t.Errorf("%s: %v, want a sub-tree", s, p)
		}
	}
	for _, s := range fail {
		var w any
		if err := yaml.Unmarshal([]byte(s), &w); err != nil {
			t.Fatal(err)
		}
		if p := subtree("", w, got); len(p) == 0 {
			t.Errorf("%s: passed, want a difference", s)
		}
	}
}

// The reader refuses malformed examples rather than skip them.
func TestReadmeExamplesMalformed(t *testing.T) {
	bad := map[string]string{
		"unclosed":    "<!-- configgen-example: a -->\n```yaml\nspec: {}\n```\n",
		"nested":      "<!-- configgen-example: a -->\n<!-- configgen-example: b -->\n<!-- /configgen-example -->\n",
		"stray close": "<!-- /configgen-example -->\n",
		"no name":     "<!-- configgen-example: -->\n<!-- /configgen-example -->\n",
		"fence open":  "<!-- configgen-example: a -->\n```yaml\nspec: {}\n<!-- /configgen-example -->\n",
		"heading":     "<!-- configgen-example: a -->\n## next\n<!-- /configgen-example -->\n",
	}
	for name, text := range bad {
		if _, err := readmeExamples(text); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
	ex, err := readmeExamples("x\n<!-- configgen-example: a -->\nprose\n```yaml\nspec: {}\n```\nmore\n```text\nerr\n```\n<!-- /configgen-example -->\n```yaml\nignored: 1\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) != 1 || ex[0].name != "a" || len(ex[0].blocks) != 2 || ex[0].blocks[1].lang != "text" || ex[0].blocks[1].body != "err" {
		t.Errorf("read %+v", ex)
	}
}
