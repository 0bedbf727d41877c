package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCreateThenNoOp(t *testing.T) {
	f := newFixture(t, newLLSD("demo"))
	actions := f.sync("demo")
	t.Logf("%v", describe(actions))
	assert.Equal(t, []string{
		"get deployments demo",
		"get services demo-service",
		"patch deployments demo",
		"patch services demo-service",
		"update llamastackdistributions/status demo",
	}, describe(actions))
	second := f.sync("demo")
	require.Empty(t, describe(second))
}
