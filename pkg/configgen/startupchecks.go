package configgen

import (
	"fmt"
	"strings"
)

// mcpProviderType is the tool_runtime provider of MCP servers.
const mcpProviderType = "remote::model-context-protocol"

// Tool groups at start-up. Up to 0.6 the server registers registered_resources.tool_groups
// when it starts (core/stack.py RESOURCES; 0.7 dropped them from it), and registering a
// group without an mcp_endpoint lists its tools at once (routing_tables/toolgroups.py
// register_tool_group, unchanged to 1.3). The model-context-protocol provider cannot list
// tools without an endpoint ("mcp_endpoint is required"): the server stops. Read at
// v0.3.0 to v0.6.1 of the server.

// toolGroupProblem is a tool group the server would fail to register at start-up.
type toolGroupProblem struct {
	index      int
	toolgroup  string
	providerID string
}

func (p toolGroupProblem) String() string {
	return fmt.Sprintf("registered_resources.tool_groups[%d] (%s): provider %s is %s, which lists a tool group's tools at start-up from its mcp_endpoint, and the group has none",
		p.index, p.toolgroup, p.providerID, mcpProviderType)
}

// checkToolGroups returns the tool groups of cfg the server at v would fail to register
// when it starts.
func checkToolGroups(cfg map[string]any, v Version) []toolGroupProblem {
	if v.atLeast(7) {
		return nil
	}
	rr, _ := cfg["registered_resources"].(map[string]any)
	groups, _ := rr["tool_groups"].([]any)
	if len(groups) == 0 {
		return nil
	}
	types := map[string]string{}
	prov, _ := cfg["providers"].(map[string]any)
	runtimes, _ := prov["tool_runtime"].([]any)
	for _, e := range runtimes {
		if m, ok := e.(map[string]any); ok {
			id, _ := m["provider_id"].(string)
			t, _ := m["provider_type"].(string)
			types[id] = t
		}
	}
	var out []toolGroupProblem
	for i, e := range groups {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		pid, _ := m["provider_id"].(string)
		if types[pid] != mcpProviderType || m["mcp_endpoint"] != nil {
			continue
		}
		id, _ := m["toolgroup_id"].(string)
		out = append(out, toolGroupProblem{index: i, toolgroup: id, providerID: pid})
	}
	return out
}

// checkAPIsShape says why the server would refuse the config's apis key: it wants a
// list (StackRunConfig.apis: list[str], empty for every API of the providers), and
// refuses null or another type. "" when it is a list, or left out.
func checkAPIsShape(cfg map[string]any) string {
	a, present := cfg["apis"]
	if !present {
		return ""
	}
	switch a.(type) {
	case []any:
		return ""
	case nil:
		return "apis is null: the server wants a list of APIs (leave apis out, or list at least one)"
	default:
		return fmt.Sprintf("apis is a %T: the server wants a list of APIs", a)
	}
}

// checkDefaultShield says why the server would stop on the config's
// safety.default_shield_id, or "". From 0.4 to 0.8 the server checks it at start-up
// (core/stack.py validate_safety_config): it needs the safety API, and, when the config
// registers any shield, one of that id. Only what the file says literally is judged: a
// ${env...} in the id, a shield or a safety provider may resolve either way.
func checkDefaultShield(cfg map[string]any, v Version) string {
	if !v.atLeast(4) || v.from(1, 0) {
		return ""
	}
	sc, _ := cfg["safety"].(map[string]any)
	id, _ := sc["default_shield_id"].(string)
	if id == "" || hasEnvRef(id) {
		return ""
	}
	prov, _ := cfg["providers"].(map[string]any)
	safety, _ := prov["safety"].([]any)
	live := false
	for _, e := range safety {
		m, _ := e.(map[string]any)
		pid, _ := m["provider_id"].(string)
		if hasEnvRef(pid) {
			return ""
		}
		live = live || (pid != "" && pid != "__disabled__")
	}
	if !live {
		return fmt.Sprintf("safety.default_shield_id %s: server %s needs the safety API for it, and the config has no safety provider", id, v)
	}
	rr, _ := cfg["registered_resources"].(map[string]any)
	shields, _ := rr["shields"].([]any)
	var ids []string
	for _, e := range shields {
		m, _ := e.(map[string]any)
		sid, _ := m["shield_id"].(string)
		pid, _ := m["provider_id"].(string)
		if hasEnvRef(sid) || hasEnvRef(pid) {
			return ""
		}
		if sid == id {
			return ""
		}
		if sid != "" && pid != "" && pid != "__disabled__" {
			ids = append(ids, sid)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return fmt.Sprintf("safety.default_shield_id %s is not one of the shields the config registers (%s): server %s refuses to start", id, strings.Join(ids, ", "), v)
}

// hasEnvRef tells whether a value holds a ${env...} reference.
func hasEnvRef(s string) bool { return strings.Contains(s, "${") }

// checkTopLevel returns the top-level keys the server at v requires that the config
// lacks (read with the server's own models at v0.3.0 to v0.8.0 and the fork's
// v1.0.0 to v1.3.0): providers always; image_name to 0.4, then distro_name or
// image_name (a validator from 0.5); storage in 0.3.
func checkTopLevel(cfg map[string]any, v Version) []string {
	var out []string
	if _, ok := cfg["providers"]; !ok {
		out = append(out, fmt.Sprintf("providers is missing: server %s requires it", v))
	}
	named := func(k string) bool { _, ok := cfg[k].(string); return ok }
	switch {
	case !v.atLeast(5) && !named("image_name"):
		out = append(out, fmt.Sprintf("image_name is missing: server %s requires it", v))
	case v.atLeast(5) && !named("distro_name") && !named("image_name"):
		out = append(out, fmt.Sprintf("neither distro_name nor image_name is set: server %s requires one", v))
	}
	if _, ok := cfg["storage"]; !ok && !v.atLeast(4) {
		out = append(out, fmt.Sprintf("storage is missing: server %s requires it", v))
	}
	return out
}
