package children

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// How the server container starts, by server line. llama-stack (up to 0.7) and OGX
// (the same server renamed, from 0.8) read different variables and start differently:
//   - llama-stack: the controller runs StartupScript when a config is mounted, which
//     asks the installed llama_stack for its version and starts it the way that
//     version starts; LLS_PORT, LLS_WORKERS and LLAMA_STACK_CONFIG tell it the rest.
//   - OGX: the image's own entrypoint runs (no command): it starts `ogx stack run
//     "$RUN_CONFIG_PATH"` when that file exists, else the bundled config; the CLI
//     puts the file in OGX_CONFIG for the server and listens on OGX_PORT. No
//     LLAMA_STACK_* variable is read. The server keeps its data under OGX_CONFIG_DIR
//     (else ~/.ogx, into which it moves an existing ~/.llama), so the controller points
//     it at the storage volume, and points the distributions' SQLITE_STORE_DIR and
//     FILES_STORAGE_DIR at the paths a llama-stack server of the same distribution
//     used on that volume: a server moving across the rename finds its data.
//   - unknown (an image whose tag is no version): both sets of variables, and, with a
//     config, probeStartupScript, which asks the image's Python for either package.

// serverLine is the line of server an image runs.
type serverLine int

const (
	lineUnknown serverLine = iota
	lineLlamaStack
	lineOGX
)

// lineOf is the line of a server version ("" or not a version: unknown).
func lineOf(version string) serverLine {
	v, err := configgen.ParseVersion(version)
	switch {
	case err != nil:
		return lineUnknown
	case v.OGX():
		return lineOGX
	}
	return lineLlamaStack
}

// Variables of the OGX line.
const (
	EnvOGXPort       = "OGX_PORT"
	EnvOGXWorkers    = "OGX_WORKERS"
	EnvOGXConfig     = "OGX_CONFIG"
	EnvOGXConfigDir  = "OGX_CONFIG_DIR"
	EnvRunConfigPath = "RUN_CONFIG_PATH"
	EnvSQLiteDir     = "SQLITE_STORE_DIR"
	EnvFilesDir      = "FILES_STORAGE_DIR"
)

// ogxEntrypoint is the entrypoint of the OGX images (containers/Containerfile).
const ogxEntrypoint = "/usr/local/bin/ogx-entrypoint.sh"

// probeStartupScript starts a server of an unknown line with the mounted config: an
// image with the ogx package through its entrypoint (or `ogx stack run` when it has
// none), any other the way StartupScript starts llama-stack. Every branch execs.
const probeStartupScript = `if python3 -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('ogx') is None)" 2>/dev/null; then
  if [ -x ` + ogxEntrypoint + ` ]; then
    exec ` + ogxEntrypoint + `
  fi
  exec ogx stack run "$` + EnvRunConfigPath + `"
fi
` + StartupScript

// serverCommand is the command the controller sets on the server container, nil for
// the image's own.
func serverCommand(line serverLine, in revision.Inputs) []string {
	if in.UserConfigMap == "" {
		return nil
	}
	switch line {
	case lineLlamaStack:
		return []string{"/bin/sh", "-c", StartupScript}
	case lineUnknown:
		return []string{"/bin/sh", "-c", probeStartupScript}
	}
	return nil
}

// controllerEnv is the controller's own environment of the server: upstream's
// variables in upstream's order for llama-stack, OGX's for OGX, both for an unknown
// line; then the generated config's Secret-sourced variables.
func controllerEnv(l *v1alpha2.LlamaStackDistribution, in revision.Inputs) []corev1.EnvVar {
	line := lineOf(in.ServerVersion)
	mount := storageMountPath(l)
	workers := strconv.Itoa(int(serverWorkers(l)))
	port := strconv.Itoa(int(llsd.Port(l)))
	env := []corev1.EnvVar{{Name: revision.EnvHFHome, Value: mount}}
	if in.CABundleHash != "" {
		env = append(env, corev1.EnvVar{Name: llsd.EnvSSLCertFile, Value: revision.CABundleFile})
	}
	if line != lineOGX {
		env = append(env,
			corev1.EnvVar{Name: revision.EnvWorkers, Value: workers},
			corev1.EnvVar{Name: revision.EnvPort, Value: port},
			corev1.EnvVar{Name: revision.EnvLlamaStackConfig, Value: revision.UserConfigPath},
		)
		if in.TLS != nil {
			// The uvicorn the controller's script starts reads its TLS from these.
			env = append(env,
				corev1.EnvVar{Name: revision.EnvUvicornCertFile, Value: revision.ServerCertFile},
				corev1.EnvVar{Name: revision.EnvUvicornKeyFile, Value: revision.ServerKeyFile},
			)
		}
	}
	if line != lineLlamaStack {
		env = append(env,
			corev1.EnvVar{Name: EnvOGXConfigDir, Value: mount},
			corev1.EnvVar{Name: EnvOGXWorkers, Value: workers},
			corev1.EnvVar{Name: EnvOGXPort, Value: port},
		)
		if in.UserConfigMap != "" {
			env = append(env,
				corev1.EnvVar{Name: EnvRunConfigPath, Value: revision.UserConfigPath},
				corev1.EnvVar{Name: EnvOGXConfig, Value: revision.UserConfigPath},
			)
		}
		if MetricsOn(l, in.ServerVersion) {
			env = append(env, MetricsEnv()...)
		}
		if in.Distro != "" {
			// Where a llama-stack server of this distribution kept them on the
			// volume mounted at /.llama (~/.llama/distributions/<name>).
			dir := mount + "/distributions/" + in.Distro
			env = append(env,
				corev1.EnvVar{Name: EnvSQLiteDir, Value: dir},
				corev1.EnvVar{Name: EnvFilesDir, Value: dir + "/files"},
			)
		}
	}
	for _, e := range in.ConfigEnv {
		env = append(env, *e.DeepCopy())
	}
	return env
}
