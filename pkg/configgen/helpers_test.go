package configgen

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// overlay replaces top-level keys of base with those of edit (a null value
// removes the key).
func overlay(t testing.TB, base, edit string) []byte {
	t.Helper()
	var b, e map[string]any
	if err := yaml.Unmarshal([]byte(base), &b); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(edit), &e); err != nil {
		t.Fatal(err)
	}
	for k, v := range e {
		if v == nil {
			delete(b, k)
			continue
		}
		b[k] = v
	}
	out, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
