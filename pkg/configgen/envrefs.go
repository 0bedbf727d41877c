package configgen

import (
	"fmt"
	"regexp"
	"sort"
)

// envRef is a reference the server's replace_env_vars (core/stack.py)
// resolves: ${env.X}, ${env.X:=default} or ${env.X:+value}.
var envRef = regexp.MustCompile(`\$\{env\.([A-Z0-9_]+)(?::([=+])([^}]*))?\}`)

// podVar is a variable of the server container: its value, or known false
// when it comes from a Secret or ConfigMap key.
type podVar struct {
	value string
	known bool
}

// podEnv is what the generator knows of the server container's variables:
// the config's Secret-sourced ones and spec.workload.overrides.env, which
// replaces a controller variable of the same name, the last entry of a name
// winning (as the Deployment merges them). The container has no envFrom
// (the CRD has no such field), so any other variable is taken as unset; the
// controller's own (HF_HOME, SQLITE_STORE_DIR and the like) are paths and
// ports that no base refers to without a default. The server takes an
// empty value as unset.
func (g *gen) podEnv() map[string]podVar {
	env := map[string]podVar{}
	for n := range g.env.byName {
		env[n] = podVar{}
	}
	if o := g.spec.Workload.Overrides; o != nil {
		for _, e := range o.Env {
			switch {
			case e.ValueFrom != nil:
				env[e.Name] = podVar{}
			case e.Value != "":
				env[e.Name] = podVar{value: e.Value, known: true}
			default:
				delete(env, e.Name)
			}
		}
	}
	return env
}

// expand resolves s as the server does with env. known is false when the
// result depends on a value the generator does not know (one from a
// Secret, taken as not empty); missing is the first variable s refers to
// without a default that env does not set, which stops the server.
func expand(s string, env map[string]podVar) (out string, known bool, missing string) {
	known = true
	out = envRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := envRef.FindStringSubmatch(ref)
		v, set := env[m[1]]
		switch m[2] {
		case "=":
			if !set {
				return m[3]
			}
		case "+":
			if set {
				return m[3]
			}
			return ""
		default:
			if !set {
				if missing == "" {
					missing = m[1]
				}
				return ""
			}
		}
		known = known && v.known
		return v.value
	})
	return out, known, missing
}

// resolvesEmpty reports whether s certainly resolves to the empty string.
func resolvesEmpty(s string, env map[string]podVar) bool {
	out, known, missing := expand(s, env)
	return missing == "" && known && out == ""
}

// resourceIDFields are the id fields of a list entry the server skips,
// without expanding the rest of it, when one resolves empty
// (RESOURCE_ID_FIELDS, from 0.4.1).
func resourceIDFields(v Version) []string {
	switch {
	case v.less(Version{0, 4, 1}):
		return nil
	case !v.atLeast(7):
		return []string{"vector_store_id", "model_id", "shield_id", "dataset_id", "scoring_fn_id", "benchmark_id", "toolgroup_id"}
	case !v.atLeast(8):
		return []string{"vector_store_id", "model_id", "shield_id", "dataset_id", "scoring_fn_id", "benchmark_id"}
	case !v.from(1, 0):
		return []string{"vector_store_id", "model_id", "shield_id"}
	}
	return []string{"vector_store_id", "model_id"}
}

// unsetRef finds, in the order of the written file (sorted keys), the first
// ${env.X} without a default that the server expands while X is unset: the
// path (as the server names it, registered_resources.models[0].model_id)
// and X. What the server does not expand is skipped: a list entry whose
// provider_id resolves to __disabled__, one whose resource id resolves
// empty, and from 0.6 server.auth.provider_config when its type resolves
// empty. An entry is skipped only when it certainly is: a value from a
// Secret is taken as set, and as none that skips.
func (g *gen) unsetRef(node any, path string, env map[string]podVar) (string, string) {
	switch n := node.(type) {
	case map[string]any:
		skip := ""
		if path == "server.auth" && g.v.atLeast(6) {
			if pc, ok := n["provider_config"].(map[string]any); ok {
				if t, ok := pc["type"].(string); ok && resolvesEmpty(t, env) {
					skip = "provider_config"
				}
			}
		}
		keys := make([]string, 0, len(n))
		for k := range n {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == skip {
				continue
			}
			p := k
			if path != "" {
				p = path + "." + k
			}
			if at, name := g.unsetRef(n[k], p, env); name != "" {
				return at, name
			}
		}
	case []any:
		for i, e := range n {
			if m, ok := e.(map[string]any); ok && g.skipsEntry(m, env) {
				continue
			}
			if at, name := g.unsetRef(e, fmt.Sprintf("%s[%d]", path, i), env); name != "" {
				return at, name
			}
		}
	case string:
		if _, _, missing := expand(n, env); missing != "" {
			return path, missing
		}
	}
	return "", ""
}

// skipsEntry reports whether the server certainly skips a list entry
// without expanding it.
func (g *gen) skipsEntry(m map[string]any, env map[string]podVar) bool {
	if pid, ok := m["provider_id"].(string); ok {
		if out, known, missing := expand(pid, env); missing == "" && known && out == "__disabled__" {
			return true
		}
	}
	for _, f := range resourceIDFields(g.v) {
		if s, ok := m[f].(string); ok && resolvesEmpty(s, env) {
			return true
		}
	}
	return false
}

// checkEnv refuses a config that refers to a variable without a default
// which the server container does not have: the server stops at start
// (EnvVarError). Only the CR can give the container that variable.
func (g *gen) checkEnv() error {
	at, name := g.unsetRef(g.cfg, "", g.podEnv())
	if name == "" {
		return nil
	}
	return invalid("spec.workload.overrides.env", "the config's %s refers to ${env.%s}, which has no default: the server does not start unless %s is set; set it in spec.workload.overrides.env (a value, or valueFrom a Secret or ConfigMap key)",
		at, name, name)
}
