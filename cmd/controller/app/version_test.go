package app

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestResolveVersion(t *testing.T) {
	tests := map[string]struct {
		env, stamped, buildInfo string
		want                    string
	}{
		"the environment wins":               {"v9.9.9", "v0.2.0-3-gabc1234", "v0.0.0-2026-abc", "v9.9.9"},
		"then the stamp":                     {"", "v0.2.0-3-gabc1234-dirty", "v0.0.0-2026-abc", "v0.2.0-3-gabc1234-dirty"},
		"then the build information":         {"", "", "v0.0.0-20261130120000-abcdef123456+dirty", "v0.0.0-20261130120000-abcdef123456+dirty"},
		"a blank environment does not count": {"  ", "v0.2.0", "", "v0.2.0"},
		"(devel) is no version":              {"", "", "(devel)", DefaultVersion},
		"nothing at all":                     {"", "", "", DefaultVersion},
		"surrounding space is dropped":       {" v1.0.0\n", "", "", "v1.0.0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, resolveVersion(tc.env, tc.stamped, tc.buildInfo))
		})
	}
}

// Version reads $OPERATOR_VERSION at each call and prefers it to the stamped version.
func TestVersionReadsTheEnvironment(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v0.3.0"
	t.Setenv(OperatorVersionEnv, "")
	assert.Equal(t, "v0.3.0", Version())
	t.Setenv(OperatorVersionEnv, "v0.3.0-rc1")
	assert.Equal(t, "v0.3.0-rc1", Version())
}
