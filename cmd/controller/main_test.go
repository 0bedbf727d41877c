package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOperatorNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	assert.Equal(t, "from-flag", operatorNamespace("from-flag"))
	// No flag, no POD_NAMESPACE and (in a test) no in-cluster namespace file: the default.
	assert.Equal(t, defaultOperatorNamespace, operatorNamespace(""))
	t.Setenv("POD_NAMESPACE", "from-env")
	assert.Equal(t, "from-env", operatorNamespace(""))
	assert.Equal(t, "from-flag", operatorNamespace("from-flag"))
}

func TestOptionsValidate(t *testing.T) {
	good := options{workers: 4, qps: 50, burst: 100}
	assert.NoError(t, good.validate())
	tests := map[string]struct {
		edit func(*options)
		want string
	}{
		"no workers":    {func(o *options) { o.workers = 0 }, "--workers must be at least 1"},
		"zero qps":      {func(o *options) { o.qps = 0 }, "--kube-api-qps must be positive"},
		"no burst":      {func(o *options) { o.burst = 0 }, "--kube-api-burst must be at least 1"},
		"all of it bad": {func(o *options) { *o = options{} }, "--workers"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			assert.ErrorContains(t, o.validate(), tc.want)
		})
	}
}
