package configgen

import (
	"errors"
	"strings"
	"testing"
)

func TestEnvName(t *testing.T) {
	cases := []struct{ id, field, want string }{
		{"vllm", "api_key", "LLSD_VLLM_API_KEY"},
		{"vllm-primary", "api_key", "LLSD_VLLM_PRIMARY_API_KEY"},
		{"my.provider_2", "api_token", "LLSD_MY_PROVIDER_2_API_TOKEN"},
		{"a--b..c", "x", "LLSD_A_B_C_X"},
		{"1st", "password", "LLSD__1ST_PASSWORD"},
		{"storage-kv", "password", "LLSD_STORAGE_KV_PASSWORD"},
		{"Ünïcode", "key", "LLSD__N_CODE_KEY"},
		{"p", "9lives", "LLSD_P__9LIVES"},
	}
	for _, c := range cases {
		if got := EnvName(c.id, c.field); got != c.want {
			t.Errorf("EnvName(%q, %q) = %q, want %q", c.id, c.field, got, c.want)
		}
		for _, r := range EnvName(c.id, c.field) {
			if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
				t.Errorf("EnvName(%q, %q) has %q, which ${env.NAME} does not accept", c.id, c.field, r)
			}
		}
	}
}

func TestEnvNameCollisions(t *testing.T) {
	// Pairs that differ only in what upper-casing and folding erase.
	pairs := [][2][2]string{
		{{"a-b", "api_key"}, {"a_b", "api_key"}},
		{{"a.b", "api_key"}, {"a-b", "api_key"}},
		{{"a", "b_api_key"}, {"a_b", "api_key"}},
		{{"vllm", "api_key"}, {"vllm", "api-key"}},
	}
	for _, p := range pairs {
		s := newEnvSet()
		if _, err := s.add(EnvName(p[0][0], p[0][1]), "first", "s", "k"); err != nil {
			t.Fatal(err)
		}
		_, err := s.add(EnvName(p[1][0], p[1][1]), "second", "s", "k")
		var e *Error
		if !errors.As(err, &e) || e.Field != "second" || !strings.Contains(e.Message, "first") {
			t.Errorf("%v and %v: got %v, want a collision naming both fields", p[0], p[1], err)
		}
	}
	s := newEnvSet()
	for _, n := range []string{"LLSD_B_X", "LLSD_A_X"} {
		if _, err := s.add(n, n, "sec-"+n, "key"); err != nil {
			t.Fatal(err)
		}
	}
	vars := s.vars()
	if len(vars) != 2 || vars[0].Name != "LLSD_A_X" || vars[0].Value != "" || vars[0].ValueFrom.SecretKeyRef.Name != "sec-LLSD_A_X" {
		t.Fatalf("vars not sorted or not from Secrets: %+v", vars)
	}
}

func TestEndpointAndKeyFields(t *testing.T) {
	v03, v04, v07 := mustVersion(t, "0.3.4"), mustVersion(t, "0.4.2"), mustVersion(t, "0.7.1")
	cases := []struct {
		api, ptype    string
		v             Version
		endpoint, key string
	}{
		{"inference", "remote::vllm", v03, "url", "api_token"},
		{"inference", "remote::vllm", v04, "base_url", "api_token"},
		{"inference", "remote::vllm", v07, "base_url", "api_token"},
		{"inference", "remote::openai", v03, "base_url", "api_key"},
		{"inference", "remote::azure", v03, "api_base", "api_key"},
		{"inference", "remote::azure", v07, "base_url", "api_key"},
		{"inference", "remote::bedrock", v03, "", ""},
		{"inference", "remote::bedrock", v07, "", "api_key"},
		{"inference", "remote::ollama", v07, "base_url", ""},
		{"inference", "inline::sentence-transformers", v07, "", ""},
		{"safety", "remote::nvidia", v07, "guardrails_service_url", ""},
		{"inference", "remote::nvidia", v07, "base_url", "api_key"},
		{"vector_io", "remote::milvus", v07, "uri", "token"},
		{"vector_io", "remote::pgvector", v07, "", ""},
		{"tool_runtime", "remote::tavily-search", v07, "", "api_key"},
		{"vector_io", "remote::vllm", v07, "", ""},
		{"inference", "remote::my-gateway", v07, "", ""},
	}
	for _, c := range cases {
		if got := endpointField(c.api, c.ptype, c.v); got != c.endpoint {
			t.Errorf("%s %s at %s: endpoint field %q, want %q", c.api, c.ptype, c.v, got, c.endpoint)
		}
		if got := keyField(c.api, c.ptype, c.v); got != c.key {
			t.Errorf("%s %s at %s: key field %q, want %q", c.api, c.ptype, c.v, got, c.key)
		}
	}
	for in, want := range map[string]string{"vllm": "remote::vllm", "inline::faiss": "inline::faiss", "remote::openai": "remote::openai"} {
		if got := ProviderType(in); got != want {
			t.Errorf("ProviderType(%q) = %q, want %q", in, got, want)
		}
	}
}
