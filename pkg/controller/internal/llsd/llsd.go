// Package llsd holds what the controller's packages read of a LlamaStackDistribution
// alike: the names, labels and annotations of its children, the server's defaults, and
// the spec's values with their defaults applied.
package llsd

import (
	"regexp"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// Controller is the controller's name: its field manager and the source of its Events.
const Controller = "llama-stack-controller"

// FieldManager is the server-side apply field manager of every write the controller makes.
const FieldManager = Controller

// ControllerKind is the group, version and kind of the children's controller
// reference. The controller reads v1alpha2, but the references keep naming v1alpha1,
// as they did before v1alpha2 was served: the garbage collector and isControlledBy go
// by group, kind and UID, and children made before the move stay byte for byte.
var ControllerKind = v1alpha1.SchemeGroupVersion.WithKind("LlamaStackDistribution")

// Labels and annotations shared with the upstream operator, so selectors and dashboards keep working.
const (
	LabelApp       = "app"
	LabelAppValue  = "llama-stack"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelComponent = "app.kubernetes.io/component"

	// ManagedByValue marks every child; the child informers select on it.
	ManagedByValue = "llama-stack-operator"
	PartOfValue    = "llama-stack"

	// AllowedNamespacesAnnotation on a ConfigMap lists (comma-separated, or "*") the namespaces
	// whose LlamaStackDistributions may use it from another namespace.
	AllowedNamespacesAnnotation = "llamastack.io/allowed-namespaces"

	AnnotationUserConfigHash = "configmap.hash/user-config"
	AnnotationCABundleHash   = "configmap.hash/ca-bundle"
	// AnnotationDistribution on the Deployment records the distribution its image was
	// resolved from, so a running image is kept only for the same distribution.
	AnnotationDistribution = "llamastack.io/distribution"
	// AnnotationImage on the Deployment records the image the controller chose for the
	// server, so that while the operator ConfigMap does not say which image to run, the
	// one the controller last chose is kept (not one edited into the pod template by hand).
	AnnotationImage = "llamastack.io/image"
	// AnnotationSourceHash on the managed copy of a cross-namespace ConfigMap records the
	// content hash of the source it was copied from.
	AnnotationSourceHash = "llamastack.io/source-hash"
)

// Defaults of the server, as upstream.
const (
	DefaultContainerName = "llama-stack"
	DefaultPort          = int32(8321)
	DefaultMountPath     = "/.llama"
	DefaultStorageSize   = "10Gi"
	DefaultMemory        = "1Gi"
	DefaultCPUTarget     = int32(80)

	UserConfigMountPath = "/etc/llama-stack/"
	UserConfigKey       = "config.yaml"
	VolumeStorage       = "lls-storage"
	VolumeUserConfig    = "user-config"
	VolumeCABundle      = "ca-bundle"
	// VolumeTmp is the writable /tmp of a server whose root filesystem is read-only.
	VolumeTmp      = "lls-tmp"
	TmpMountPath   = "/tmp"
	EnvSSLCertFile = "SSL_CERT_FILE"

	DefaultUID = int64(1001)
)

// Child names, exactly as upstream (which has no HTTPRoute).
func DeploymentName(l *v1alpha2.LlamaStackDistribution) string    { return l.Name }
func ServiceName(l *v1alpha2.LlamaStackDistribution) string       { return l.Name + "-service" }
func PVCName(l *v1alpha2.LlamaStackDistribution) string           { return l.Name + "-pvc" }
func HPAName(l *v1alpha2.LlamaStackDistribution) string           { return l.Name + "-hpa" }
func PDBName(l *v1alpha2.LlamaStackDistribution) string           { return l.Name + "-pdb" }
func IngressName(l *v1alpha2.LlamaStackDistribution) string       { return l.Name + "-ingress" }
func NetworkPolicyName(l *v1alpha2.LlamaStackDistribution) string { return l.Name + "-network-policy" }
func HTTPRouteName(l *v1alpha2.LlamaStackDistribution) string     { return l.Name + "-route" }
func RouteName(l *v1alpha2.LlamaStackDistribution) string         { return l.Name + "-route" }
func ServiceMonitorName(l *v1alpha2.LlamaStackDistribution) string {
	return l.Name + "-service-monitor"
}

// LegacyUserConfigCopyName is the copy of a cross-namespace user config that releases
// before the immutable copies kept (one per CR, rewritten in place); it is deleted once
// no pod template mounts it.
func LegacyUserConfigCopyName(l *v1alpha2.LlamaStackDistribution) string {
	return l.Name + "-user-config"
}

// userConfigCopySuffix starts the part of a user-config copy's name after the CR's.
const userConfigCopySuffix = "-user-config-"

// UserConfigCopyName is <name>-user-config-<hash>: the immutable copy, in the CR's
// namespace, of the user's config whose content hash is hash; at most 48+13+64
// characters.
func UserConfigCopyName(l *v1alpha2.LlamaStackDistribution, hash string) string {
	return l.Name + userConfigCopySuffix + hash
}

// IsUserConfigCopyName tells whether name is one of l's user-config copies.
func IsUserConfigCopyName(l *v1alpha2.LlamaStackDistribution, name string) bool {
	hash, ok := strings.CutPrefix(name, l.Name+userConfigCopySuffix)
	return ok && generatedHash.MatchString(hash)
}
func CABundleConfigMapName(l *v1alpha2.LlamaStackDistribution) string { return l.Name + "-ca-bundle" }

// BackendTLSPolicyName is the BackendTLSPolicy that has the Gateways of an HTTPRoute
// speak TLS to a server that serves it; BackendCAConfigMapName holds the CA they
// verify it with.
func BackendTLSPolicyName(l *v1alpha2.LlamaStackDistribution) string {
	return l.Name + "-backend-tls"
}
func BackendCAConfigMapName(l *v1alpha2.LlamaStackDistribution) string { return l.Name + "-backend-ca" }

// SelectorLabels select the server pods: the Deployment, Service, PDB and NetworkPolicy selector.
// They never change, so upstream's objects can be taken over.
func SelectorLabels(l *v1alpha2.LlamaStackDistribution) map[string]string {
	return map[string]string{LabelApp: LabelAppValue, LabelInstance: l.Name}
}

// ChildLabels are the metadata labels of every child object.
func ChildLabels(l *v1alpha2.LlamaStackDistribution) map[string]string {
	return map[string]string{
		LabelApp:       LabelAppValue,
		LabelInstance:  l.Name,
		LabelManagedBy: ManagedByValue,
		LabelPartOf:    PartOfValue,
	}
}

// Port is the port the CR asks its server to listen on (spec.networking.port), or the
// default.
func Port(l *v1alpha2.LlamaStackDistribution) int32 {
	if n := l.Spec.Networking; n != nil && n.Port != 0 {
		return n.Port
	}
	return DefaultPort
}

// ContainerName is the name of the server container: the override's, or the default.
func ContainerName(l *v1alpha2.LlamaStackDistribution) string {
	if n := Overrides(l).ContainerName; n != "" {
		return n
	}
	return DefaultContainerName
}

// DistributionLabel is the distribution name, or "custom" for an image given directly
// (status.distributionConfig.activeDistribution, as upstream).
func DistributionLabel(l *v1alpha2.LlamaStackDistribution) string {
	if n := l.Spec.Distribution.Name; n != "" {
		return n
	}
	return "custom"
}

// SpecReplicas is spec.workload.replicas; unset means the default, 1.
func SpecReplicas(l *v1alpha2.LlamaStackDistribution) int32 {
	return ptr.Deref(l.Spec.Workload.Replicas, 1)
}

// overrides is spec.workload.overrides, or an empty one; never nil, not to be modified.
func Overrides(l *v1alpha2.LlamaStackDistribution) *v1alpha2.WorkloadOverrides {
	if o := l.Spec.Workload.Overrides; o != nil {
		return o
	}
	return &v1alpha2.WorkloadOverrides{}
}

// networking is spec.networking, or an empty one; never nil, not to be modified.
func Networking(l *v1alpha2.LlamaStackDistribution) *v1alpha2.NetworkingSpec {
	if n := l.Spec.Networking; n != nil {
		return n
	}
	return &v1alpha2.NetworkingSpec{}
}

// TLSEnabled tells whether the CR asks its server to serve HTTPS.
func TLSEnabled(l *v1alpha2.LlamaStackDistribution) bool {
	t := Networking(l).TLS
	return t != nil && t.Enabled && t.SecretName != ""
}

// The server's certificate reaches the pods through a volume; a hash of it on the pod
// template rolls them when it is renewed.
const (
	VolumeServerTLS   = "server-tls"
	AnnotationTLSHash = "llamastack.io/tls-certificate-hash"
)

// generatedConfigSuffix starts the part of a generated ConfigMap's name after the CR's.
const generatedConfigSuffix = "-config-"

// generatedHash matches the hash part of a generated ConfigMap's name: configgen's
// SHA-256 in hex, whole, so two contents never share a name.
var generatedHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// GeneratedConfigMapName is <name>-config-<hash>: at most 48+8+64 characters.
func GeneratedConfigMapName(l *v1alpha2.LlamaStackDistribution, hash string) string {
	return l.Name + generatedConfigSuffix + hash
}

// IsGeneratedConfigMapName tells whether name is one of l's generated ConfigMaps.
func IsGeneratedConfigMapName(l *v1alpha2.LlamaStackDistribution, name string) bool {
	hash, ok := strings.CutPrefix(name, l.Name+generatedConfigSuffix)
	return ok && generatedHash.MatchString(hash)
}
