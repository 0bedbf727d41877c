package configgen

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// TestExamplesGenerate: every v1alpha2 example that names a distribution and asks for a
// generated config (without a baseConfig of its own) generates one on that
// distribution's pinned base, so the examples always fit the server a newcomer runs.
func TestExamplesGenerate(t *testing.T) {
	files, err := filepath.Glob("../../artifacts/examples/v1alpha2/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---")) {
			var cr v1alpha2.LlamaStackDistribution
			if err := yaml.Unmarshal(doc, &cr); err != nil || cr.Kind != "LlamaStackDistribution" {
				continue
			}
			s := cr.Spec
			generates := s.Providers != nil || s.Resources != nil || s.Storage != nil || len(s.Disabled) > 0
			if !generates || s.BaseConfig != nil || s.Distribution.Name == "" {
				continue
			}
			d, ok := LookupDistribution(s.Distribution.Name)
			if !ok || !d.Published() {
				t.Errorf("%s#%d: distribution %q is not a published one", filepath.Base(f), i, s.Distribution.Name)
				continue
			}
			base, err := d.Base()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Generate(Input{Name: cr.Name, Spec: s, ServerVersion: d.ServerVersion, Base: base, BaseField: "spec.distribution.name"}); err != nil {
				t.Errorf("%s#%d: %v", filepath.Base(f), i, err)
			}
			checked++
		}
	}
	if checked < 3 {
		t.Fatalf("only %d examples generate a config", checked)
	}
}

// TestExampleUserConfigsStart: the config.yaml of every ConfigMap in the examples (v1alpha1
// and v1alpha2) passes the pre-flight check at the pinned starter version, which the
// examples' CRs run: the controller would otherwise refuse to roll them out.
func TestExampleUserConfigsStart(t *testing.T) {
	d, ok := LookupDistribution("starter")
	if !ok {
		t.Fatal("no starter")
	}
	v, err := ParseVersion(d.ServerVersion)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, g := range []string{"../../artifacts/examples/*.yaml", "../../artifacts/examples/v1alpha2/*.yaml"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---")) {
			var cm struct {
				Kind string            `json:"kind"`
				Data map[string]string `json:"data"`
			}
			if err := yaml.Unmarshal(doc, &cm); err != nil || cm.Kind != "ConfigMap" || cm.Data["config.yaml"] == "" {
				continue
			}
			if filepath.Base(f) == "base-config.yaml" {
				continue // a base, checked by TestExamplesGenerate through the CR that names it
			}
			if err := Preflight([]byte(cm.Data["config.yaml"]), v); err != nil {
				t.Errorf("%s#%d: %v", filepath.Base(f), i, err)
			}
			checked++
		}
	}
	if checked < 4 {
		t.Fatalf("only %d example configs checked", checked)
	}
}
