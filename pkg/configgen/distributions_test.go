package configgen

import (
	"io/fs"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDistributionsPinned fails when an image changes without its server
// version and base: the tag, the version and the base file name must agree.
// A published image is under docker.io/ogxai (docker.io/llamastack is gone);
// a name without one says what to use instead.
func TestDistributionsPinned(t *testing.T) {
	used := map[string]bool{}
	for _, d := range distributions {
		for _, earlier := range d.EarlierImages {
			if ref, _, _ := splitImageTag(earlier); !strings.HasSuffix(ref, "/distribution-"+d.Name) || earlier == d.Image {
				t.Errorf("%s: earlier image %q is not an earlier image of this distribution", d.Name, earlier)
			}
		}
		for _, f := range d.OlderBases {
			v, err := ParseVersion(strings.TrimSuffix(strings.TrimPrefix(f, d.Name+"-"), ".yaml"))
			if err != nil || !strings.HasPrefix(f, d.Name+"-") {
				t.Errorf("%s: older base %q is not named <name>-<version>.yaml", d.Name, f)
				continue
			}
			if ok, _ := v.supported(); !ok {
				t.Errorf("%s: older base %s for a server version whose shape is not supported", d.Name, f)
			}
			if _, ok := d.BaseFor(v.String()); !ok {
				t.Errorf("%s: BaseFor(%s) finds no base", d.Name, v)
			}
			used[f] = true
		}
		if !d.Published() {
			if d.ServerVersion != "" || d.BaseFile != "" {
				t.Errorf("%s: no published image, but a server version %q or base %q", d.Name, d.ServerVersion, d.BaseFile)
			}
			for _, want := range []string{"no published image", "use distribution starter", "spec.distribution.image"} {
				if !strings.Contains(d.Note, want) {
					t.Errorf("%s: the note %q does not say %q", d.Name, d.Note, want)
				}
			}
			continue
		}
		ref, tag, ok := splitImageTag(d.Image)
		if !ok {
			t.Errorf("%s: image %q has no tag", d.Name, d.Image)
			continue
		}
		if tag == "latest" {
			t.Errorf("%s: image %q is not pinned", d.Name, d.Image)
		}
		if tag != d.ServerVersion {
			t.Errorf("%s: image tag %q but server version %q: change both, and the base, together", d.Name, tag, d.ServerVersion)
		}
		if ref != "docker.io/ogxai/distribution-"+d.Name {
			t.Errorf("%s: image %q is not this distribution's under docker.io/ogxai", d.Name, d.Image)
		}
		v, err := ParseVersion(d.ServerVersion)
		if err != nil {
			t.Errorf("%s: %v", d.Name, err)
			continue
		}
		ok, _ = v.supported()
		if d.BaseFile == "" {
			if ok {
				t.Errorf("%s: server %s has a known shape but no base config", d.Name, v)
			}
			if d.Note == "" {
				t.Errorf("%s: no base and no note saying why", d.Name)
			}
			if _, err := d.Base(); err == nil {
				t.Errorf("%s: Base() without a base file should fail", d.Name)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: base %s for a server version whose shape is not supported", d.Name, d.BaseFile)
		}
		if want := d.Name + "-" + d.ServerVersion + ".yaml"; d.BaseFile != want {
			t.Errorf("%s: base file %q, want %q (named after the server version)", d.Name, d.BaseFile, want)
		}
		used[d.BaseFile] = true
	}
	for _, d := range distributions {
		files := append([]string(nil), d.OlderBases...)
		if d.BaseFile != "" {
			files = append(files, d.BaseFile)
		}
		for _, f := range files {
			raw, err := basesFS.ReadFile("bases/" + f)
			if err != nil {
				t.Errorf("%s: %v", d.Name, err)
				continue
			}
			var m map[string]any
			if err := yaml.Unmarshal(raw, &m); err != nil {
				t.Errorf("%s: base %s does not parse: %v", d.Name, f, err)
				continue
			}
			v, _ := ParseVersion(strings.TrimSuffix(strings.TrimPrefix(f, d.Name+"-"), ".yaml"))
			nameKey := "image_name"
			if v.atLeast(5) {
				nameKey = "distro_name"
			}
			if m[nameKey] != d.Name {
				t.Errorf("%s: base %s has %s %v, want %q", d.Name, f, nameKey, m[nameKey], d.Name)
			}
		}
	}
	entries, err := fs.ReadDir(basesFS, "bases")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !used[e.Name()] {
			t.Errorf("bases/%s is not used by any distribution", e.Name())
		}
	}
}

func TestLookupDistribution(t *testing.T) {
	d, ok := LookupDistribution("starter")
	if !ok || d.ServerVersion != "1.3.0" {
		t.Fatalf("starter: %+v %v", d, ok)
	}
	if _, ok := LookupDistribution("ollama"); ok {
		t.Fatal("ollama is not a named distribution")
	}
	if got, want := DistributionNames(), "meta-reference-gpu, postgres-demo, remote-vllm, starter"; got != want {
		t.Fatalf("names %q, want %q", got, want)
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{"0.7.1": "0.7.1", "v0.3.4": "0.3.4", "1.0.0": "1.0.0"} {
		v, err := ParseVersion(in)
		if err != nil || v.String() != want {
			t.Errorf("ParseVersion(%q) = %v, %v", in, v, err)
		}
	}
	for _, in := range []string{"", "latest", "0.7", "0.7.1rc2", "0.07.1", "0.7.1.2", "a.b.c", "-1.0.0"} {
		if _, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q) should fail", in)
		}
	}
	for in, want := range map[string]bool{"0.2.23": false, "0.3.0": true, "0.4.2": true, "0.7.1": true, "0.8.0": true, "1.0.0": true, "1.4.2": true, "1.5.0": true, "1.5.3": true, "1.6.0": false, "2.0.0": false} {
		v, _ := ParseVersion(in)
		if got, _ := v.supported(); got != want {
			t.Errorf("%s supported = %v, want %v", in, got, want)
		}
	}
}

// splitImageTag splits an image reference at the last ':' after the last
// '/', so that a registry port is not taken for the tag.
func splitImageTag(image string) (ref, tag string, ok bool) {
	i := strings.LastIndex(image, ":")
	if i < 0 || i < strings.LastIndex(image, "/") {
		return image, "", false
	}
	return image[:i], image[i+1:], true
}

func TestSplitImageTag(t *testing.T) {
	for _, c := range []struct{ image, ref, tag string }{
		{"docker.io/llamastack/distribution-starter:0.7.1", "docker.io/llamastack/distribution-starter", "0.7.1"},
		{"registry.local:5000/llamastack/distribution-starter:0.7.1", "registry.local:5000/llamastack/distribution-starter", "0.7.1"},
		{"registry.local:5000/llamastack/distribution-starter", "registry.local:5000/llamastack/distribution-starter", ""},
	} {
		ref, tag, _ := splitImageTag(c.image)
		if ref != c.ref || tag != c.tag {
			t.Errorf("%s: got %q %q, want %q %q", c.image, ref, tag, c.ref, c.tag)
		}
	}
}
