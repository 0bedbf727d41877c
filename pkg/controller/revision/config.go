package revision

import (
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// Environment variables the controller sets on the server container.
const (
	EnvHFHome           = "HF_HOME"
	EnvWorkers          = "LLS_WORKERS"
	EnvPort             = "LLS_PORT"
	EnvLlamaStackConfig = "LLAMA_STACK_CONFIG"
)

// UserConfigPath is where the server finds the user's run configuration.
const UserConfigPath = llsd.UserConfigMountPath + llsd.UserConfigKey

// CA bundle: the managed ConfigMap of the certificates the server trusts, mounted into
// the server pod.
const (
	// CABundleKey is the key of the managed ConfigMap, and the default key read from an
	// explicitly referenced one.
	CABundleKey = "ca-bundle.crt"
	// CABundleMountPath is the directory the managed ConfigMap is mounted at.
	CABundleMountPath = "/etc/ssl/certs/ca-bundle"
	// CABundleFile is the mounted bundle, the value of SSL_CERT_FILE.
	CABundleFile = CABundleMountPath + "/" + CABundleKey
)

// GeneratesConfig is the gate: the CR sets one of the v1alpha2 fields that only
// generation reads, or serves TLS without a config of its own (the server has to be
// told where its certificate is, which only a config tells every version).
// overrideConfig (v1alpha1 userConfig) is the user's whole file.
func GeneratesConfig(l *v1alpha2.LlamaStackDistribution) bool {
	return GeneratesForFields(l) || (llsd.TLSEnabled(l) && l.Spec.OverrideConfig == nil)
}

// GeneratesForFields tells whether the CR sets a field that only generation reads.
func GeneratesForFields(l *v1alpha2.LlamaStackDistribution) bool {
	s := &l.Spec
	return s.Providers != nil || s.Resources != nil || s.Storage != nil || len(s.Disabled) > 0 || s.BaseConfig != nil
}
