package app

import (
	"os"
	"runtime/debug"
	"strings"
)

// version is the controller's version stamped at build time, empty when it was not:
//
//	go build -ldflags "-X github.com/llamastack/llama-stack-controller/cmd/controller/app.version=v0.1.0"
//
// `make build` stamps the output of `git describe --tags --always --dirty`, and the
// Dockerfile its VERSION build argument.
var version string

// OperatorVersionEnv names the environment variable that, as in upstream's operator,
// sets the reported version. It wins over the stamped version, so that a Deployment can
// name its release without rebuilding the image.
const OperatorVersionEnv = "OPERATOR_VERSION"

// DefaultVersion is reported when nothing names a version.
const DefaultVersion = "unknown"

// Version is the version the controller reports in status.version.operatorVersion and
// its user agent: $OPERATOR_VERSION if set, else the stamped version, else the main
// module's version in the Go build information (`go install …@v0.1.0`, or the one Go
// derives from the git checkout), else DefaultVersion.
func Version() string {
	return resolveVersion(os.Getenv(OperatorVersionEnv), version, buildInfoVersion())
}

func resolveVersion(env, stamped, buildInfo string) string {
	for _, v := range []string{env, stamped, buildInfo} {
		if v = strings.TrimSpace(v); v != "" && v != "(devel)" {
			return v
		}
	}
	return DefaultVersion
}

// buildInfoVersion is the main module's version recorded by the Go toolchain, "" if none.
func buildInfoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}
