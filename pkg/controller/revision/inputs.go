package revision

import (
	corev1 "k8s.io/api/core/v1"
)

// Inputs are the facts the Deployment depends on beyond the CR.
type Inputs struct {
	Image          string // resolved container image
	UserConfigMap  string // ConfigMap mounted at /etc/llama-stack/ ("" = no user config)
	UserConfigHash string // content hash of that ConfigMap's data, for the pod-template annotation
	Replicas       *int32 // nil: leave spec.replicas unset (an HPA owns it)
	CABundleHash   string // content hash of the managed CA bundle ("" = no CA bundle mounted)
	OpenShift      bool   // the cluster is OpenShift: its SCC assigns the pod's user and fsGroup
	// ConfigEnv are the variables of a generated config, each from a Secret key.
	ConfigEnv []corev1.EnvVar
	// ServerVersion is the server version the image runs ("" when not known): it
	// decides how the server starts (children/serverstart.go).
	ServerVersion string
	// Distro is the distribution whose data the server keeps ("" when not known).
	Distro string
	// TLS is the server's certificate when it serves HTTPS; nil for plain HTTP.
	TLS *TLS
	// LegacySpread leaves the default spreading out, as releases before this one did
	// at one replica: for a running Deployment without it that nothing else changes
	// (pkg/controller's desiredDeployment), so that upgrading the controller rolls no pod.
	LegacySpread bool
}
