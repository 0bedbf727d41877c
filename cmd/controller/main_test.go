package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llamastack/llama-stack-controller/cmd/controller/app"
	"github.com/llamastack/llama-stack-controller/pkg/webhook"
)

// parse parses args as the controller does and returns the options.
func parse(t *testing.T, args ...string) (app.Options, error) {
	t.Helper()
	var o app.Options
	var kubeconfig, master string
	fs := flag.NewFlagSet("llama-stack-controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	registerFlags(fs, &o, &kubeconfig, &master)
	return o, fs.Parse(args)
}

func TestWebhookCertificateTimingFlags(t *testing.T) {
	// Unset, they are the defaults, which fit.
	o, err := parse(t, "--webhook-bind-address=:9443")
	require.NoError(t, err)
	assert.Equal(t, webhook.DefaultCAValidity, o.WebhookCAValidity)
	assert.Equal(t, webhook.DefaultServingValidity, o.WebhookServingValidity)
	assert.Equal(t, webhook.DefaultCAPropagation, o.WebhookCAPropagation)
	require.NoError(t, o.Validate())

	// The renewal test's timing.
	o, err = parse(t, "--webhook-bind-address=:9443", "--webhook-ca-validity=70s", "--webhook-serving-validity=20s", "--webhook-ca-propagation=6s")
	require.NoError(t, err)
	assert.Equal(t, 70*time.Second, o.WebhookCAValidity)
	assert.Equal(t, 20*time.Second, o.WebhookServingValidity)
	assert.Equal(t, 6*time.Second, o.WebhookCAPropagation)
	require.NoError(t, o.Validate())

	// Not a duration: the flag package says so.
	_, err = parse(t, "--webhook-serving-validity=20")
	require.ErrorContains(t, err, `invalid value "20" for flag -webhook-serving-validity`)

	// Combinations that do not rotate safely name the flags, their values and the rule.
	tests := map[string]struct {
		args []string
		want []string
	}{
		"a short serving certificate with the default propagation": {
			[]string{"--webhook-serving-validity=20s"},
			[]string{"--webhook-ca-validity=26280h0m0s, --webhook-serving-validity=20s and --webhook-ca-propagation=1h0m0s do not fit",
				"the CA propagation delay (1h0m0s) must be at most a third of the serving certificate validity (20s)"},
		},
		"a short CA with the default serving certificate": {
			[]string{"--webhook-ca-validity=720h"},
			[]string{"the serving certificate validity (2160h0m0s) must be at most a third of the CA validity (720h0m0s)"},
		},
		"too short a serving certificate": {
			[]string{"--webhook-ca-validity=1m", "--webhook-serving-validity=5s", "--webhook-ca-propagation=1s"},
			[]string{"the serving certificate validity (5s) must be at least 10s"},
		},
		"negative": {
			[]string{"--webhook-ca-propagation=-1s"},
			[]string{"the CA propagation delay must not be negative, got -1s"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := parse(t, append([]string{"--webhook-bind-address=:9443"}, tc.args...)...)
			require.NoError(t, err)
			err = o.Validate()
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}

	// Checked only where they apply: with the webhook on, in self mode.
	o, err = parse(t, "--webhook-serving-validity=20s")
	require.NoError(t, err)
	require.NoError(t, o.Validate(), "no webhook")
	o, err = parse(t, "--webhook-bind-address=:9443", "--webhook-cert-mode=files", "--webhook-cert-dir=/certs", "--webhook-serving-validity=20s")
	require.NoError(t, err)
	require.NoError(t, o.Validate(), "files mode: cert-manager times the certificates")
}
