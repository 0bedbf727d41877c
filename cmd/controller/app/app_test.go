package app

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOperatorNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	assert.Equal(t, "from-flag", ResolveOperatorNamespace("from-flag"))
	// No flag, no POD_NAMESPACE and (in a test) no in-cluster namespace file: the default.
	assert.Equal(t, DefaultOperatorNamespace, ResolveOperatorNamespace(""))
	t.Setenv("POD_NAMESPACE", "from-env")
	assert.Equal(t, "from-env", ResolveOperatorNamespace(""))
	assert.Equal(t, "from-flag", ResolveOperatorNamespace("from-flag"))
}

func TestOptionsValidate(t *testing.T) {
	good := Options{Workers: 4, QPS: 50, Burst: 100}
	assert.NoError(t, good.Validate())
	tests := map[string]struct {
		edit func(*Options)
		want string
	}{
		"no workers":    {func(o *Options) { o.Workers = 0 }, "--workers must be at least 1"},
		"zero qps":      {func(o *Options) { o.QPS = 0 }, "--kube-api-qps must be positive"},
		"no burst":      {func(o *Options) { o.Burst = 0 }, "--kube-api-burst must be at least 1"},
		"all of it bad": {func(o *Options) { *o = Options{} }, "--workers"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			assert.ErrorContains(t, o.Validate(), tc.want)
		})
	}
}
