package configgen

import (
	"fmt"
	"strings"
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

// The server's start-up checks of this package as one error each, for tests that
// assert a generated config passes them.

func (p unknownProvider) String() string {
	return fmt.Sprintf("providers.%s[%d]: server has no provider type %s", p.api, p.index, p.ptype)
}

// registryErrors is checkRegistry on config.yaml, as one error: what the
// server would refuse at start although the model admits it.
func registryErrors(configYAML []byte, v Version) error {
	var cfg map[string]any
	if err := yaml.Unmarshal(configYAML, &cfg); err != nil {
		return err
	}
	unknown, deps := checkRegistry(cfg, v)
	var msgs []string
	for _, u := range unknown {
		msgs = append(msgs, u.String())
	}
	for _, d := range deps {
		msgs = append(msgs, d.String())
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

// requiredErrors is checkRequiredAll on config.yaml, as one error.
func requiredErrors(configYAML []byte, v Version) error {
	var cfg map[string]any
	if err := yaml.Unmarshal(configYAML, &cfg); err != nil {
		return err
	}
	var msgs []string
	for _, p := range checkRequiredAll(cfg, v) {
		msgs = append(msgs, p.String())
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}
