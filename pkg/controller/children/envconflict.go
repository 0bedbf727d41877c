package children

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// The user's variables (spec.workload.overrides.env, v1alpha1 containerSpec.env) follow
// the controller's and replace one of the same name (mergeEnv), as upstream's did. Most
// such replacements are the user's choice (HF_HOME, SSL_CERT_FILE, the workers). A few
// would silently undo what the CR asks for, and the pod would run something else than
// the CR says, or not serve where it is probed: those are reported, and nothing is
// rolled out (envConflict).

// envField is where the user's variables are, in both versions.
const envField = "spec.workload.overrides.env (v1alpha1 spec.server.containerSpec.env)"

// envConflict returns a problem when a user variable would shadow one the controller
// sets for what the CR asks: the port the probes and the Service use (unless set to
// that same port), the generated config's path and its Secret-sourced variables, and
// the certificate the server serves TLS with. A user config of the user's own
// (overrideConfig) may still be pointed elsewhere, as upstream allowed.
func envConflict(l *v1alpha2.LlamaStackDistribution, in revision.Inputs) *fault.Problem {
	user := llsd.Overrides(l).Env
	if len(user) == 0 {
		return nil
	}
	p := strconv.Itoa(int(llsd.Port(l)))
	generated := map[string]string{}
	for _, e := range in.ConfigEnv {
		generated[e.Name] = e.Name
	}
	for _, e := range user {
		switch name := e.Name; {
		case name == revision.EnvPort || name == EnvOGXPort:
			if e.ValueFrom != nil || strings.TrimSpace(e.Value) != p {
				return &fault.Problem{Reason: v1alpha2.ReasonResourceInvalid, Message: fmt.Sprintf(
					"%s sets %s, which the controller sets to the server's port %s (spec.networking.port), where the probes, the Service and the NetworkPolicy reach it: the server would listen elsewhere; remove it and set spec.networking.port",
					envField, name, p)}
			}
		case generated[name] != "":
			return &fault.Problem{Reason: v1alpha2.ReasonConfigInvalid, Message: fmt.Sprintf(
				"%s sets %s, which the generated config reads for a value the CR takes from a Secret (apiKey or secretRefs of a provider, or a storage password): it would replace that value; remove it and set the provider's apiKey or secretRefs",
				envField, name)}
		case revision.GeneratesConfig(l) && (name == revision.EnvLlamaStackConfig || name == EnvOGXConfig || name == EnvRunConfigPath):
			return &fault.Problem{Reason: v1alpha2.ReasonConfigInvalid, Message: fmt.Sprintf(
				"%s sets %s, which points the server at the config the controller generates (%s): the server would read another file than the CR describes; remove it (use overrideConfig to run a file of your own)",
				envField, name, revision.UserConfigPath)}
		case in.TLS != nil && (name == revision.EnvUvicornCertFile || name == revision.EnvUvicornKeyFile):
			return &fault.Problem{Reason: v1alpha2.ReasonResourceInvalid, Message: fmt.Sprintf(
				"%s sets %s, which tells the server where the certificate of spec.networking.tls.secretName is (%s): remove it",
				envField, name, revision.ServerTLSMountPath)}
		}
	}
	return nil
}
