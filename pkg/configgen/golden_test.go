package configgen

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/ from what Generate returns")

// goldenEnv is one line of want-env.yaml: a variable and the Secret key it
// comes from.
type goldenEnv struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
	Key    string `json:"key"`
}

// A case's want-ignored.txt, when it has one, lists Output.Ignored one a line: what
// the CR asks that the version does not have (none when the file is absent).

// loadCase reads testdata/<dir>: cr.yaml, base.yaml when the case has
// one, and server-version when it names a distribution on another version
// than the pinned one. The server version is the named distribution's, or the tag of a
// direct image (a convention of these tests: the controller's way of
// knowing a direct image's version is not decided here); none for a digest.
func loadCase(t *testing.T, dir string) Input {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "cr.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cr v1alpha2.LlamaStackDistribution
	if err := yaml.UnmarshalStrict(raw, &cr); err != nil {
		t.Fatalf("cr.yaml: %v", err)
	}
	in := Input{Name: cr.Name, Spec: cr.Spec}
	// TLS as the controller passes it: the Secret is mounted there.
	if n := cr.Spec.Networking; n != nil && n.TLS != nil && n.TLS.Enabled {
		in.TLS = &TLSFiles{CertFile: "/etc/llama-stack-tls/tls.crt", KeyFile: "/etc/llama-stack-tls/tls.key"}
	}
	// server-version, when present, is the version the named distribution
	// runs (as image-overrides would make it: its base is the one the
	// table has for that version); else the pinned one.
	pinned := ""
	if b, err := os.ReadFile(filepath.Join(dir, "server-version")); err == nil {
		pinned = strings.TrimSpace(string(b))
	}
	if n := cr.Spec.Distribution.Name; n != "" {
		d, ok := LookupDistribution(n)
		if !ok {
			t.Fatalf("cr.yaml names unknown distribution %q", n)
		}
		in.ServerVersion = d.ServerVersion
		if pinned != "" {
			in.ServerVersion = pinned
		}
		if b, ok := d.BaseFor(in.ServerVersion); ok {
			in.Base = b
			in.BaseField = "spec.distribution.name"
		}
	} else if img := cr.Spec.Distribution.Image; !strings.Contains(img, "@") {
		if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
			in.ServerVersion = img[i+1:]
		}
	}
	if base, err := os.ReadFile(filepath.Join(dir, "base.yaml")); err == nil {
		in.Base = base
		in.BaseField = "spec.baseConfig"
	}
	return in
}

func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, dir := range dirs {
		if filepath.Base(dir) == "preflight" {
			continue // the user-config cases of TestPreflightGolden
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			in := loadCase(t, dir)
			out, err := Generate(in)
			wantConfig := filepath.Join(dir, "want-config.yaml")
			wantEnv := filepath.Join(dir, "want-env.yaml")
			wantErr := filepath.Join(dir, "want-error.txt")
			if *update {
				writeGolden(t, dir, out, err)
			}
			if b, rerr := os.ReadFile(wantErr); rerr == nil {
				lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", 3)
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("got %v, want an *Error", err)
				}
				if e.Field != lines[0] {
					t.Errorf("field %q, want %q (%v)", e.Field, lines[0], e)
				}
				if len(lines) > 1 && e.Reason != lines[1] {
					t.Errorf("reason %q, want %q", e.Reason, lines[1])
				}
				if len(lines) > 2 && !strings.Contains(e.Message, lines[2]) {
					t.Errorf("message %q does not contain %q", e.Message, lines[2])
				}
				return
			}
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			b, rerr := os.ReadFile(wantConfig)
			if rerr != nil {
				t.Fatalf("no want-config.yaml or want-error.txt: %v", rerr)
			}
			var got, want any
			if err := yaml.Unmarshal(out.Config, &got); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("config (-want +got):\n%s", d)
			}
			var wantVars []goldenEnv
			if b, err := os.ReadFile(wantEnv); err == nil {
				if err := yaml.UnmarshalStrict(b, &wantVars); err != nil {
					t.Fatal(err)
				}
			}
			if d := cmp.Diff(wantVars, envOf(out)); d != "" {
				t.Errorf("env (-want +got):\n%s", d)
			}
			if d := cmp.Diff(readLines(t, filepath.Join(dir, "want-ignored.txt")), out.Ignored); d != "" {
				t.Errorf("ignored (-want +got):\n%s", d)
			}
		})
	}
}

// readLines is the lines of a file, none when there is no file.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

func envOf(out *Output) []goldenEnv {
	var vars []goldenEnv
	for _, e := range out.Env {
		vars = append(vars, goldenEnv{Name: e.Name, Secret: e.ValueFrom.SecretKeyRef.Name, Key: e.ValueFrom.SecretKeyRef.Key})
	}
	return vars
}

func writeGolden(t *testing.T, dir string, out *Output, err error) {
	t.Helper()
	for _, f := range []string{"want-config.yaml", "want-env.yaml", "want-error.txt", "want-ignored.txt"} {
		_ = os.Remove(filepath.Join(dir, f))
	}
	var e *Error
	if errors.As(err, &e) {
		body := e.Field + "\n" + e.Reason + "\n" + e.Message + "\n"
		if werr := os.WriteFile(filepath.Join(dir, "want-error.txt"), []byte(body), 0o644); werr != nil {
			t.Fatal(werr)
		}
		return
	}
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if werr := os.WriteFile(filepath.Join(dir, "want-config.yaml"), out.Config, 0o644); werr != nil {
		t.Fatal(werr)
	}
	if len(out.Ignored) > 0 {
		if werr := os.WriteFile(filepath.Join(dir, "want-ignored.txt"), []byte(strings.Join(out.Ignored, "\n")+"\n"), 0o644); werr != nil {
			t.Fatal(werr)
		}
	}
	if vars := envOf(out); len(vars) > 0 {
		b, merr := yaml.Marshal(vars)
		if merr != nil {
			t.Fatal(merr)
		}
		if werr := os.WriteFile(filepath.Join(dir, "want-env.yaml"), b, 0o644); werr != nil {
			t.Fatal(werr)
		}
	}
}
