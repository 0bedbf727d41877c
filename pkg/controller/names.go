package controller

import (
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// controllerName is the field manager of every write and the source of every Event.
const controllerName = "llama-stack-controller"

// FieldManager is the server-side apply field manager of every write the controller makes.
const FieldManager = controllerName

// controllerKind is the group, version and kind of the children's controller
// reference. The controller reads v1alpha2, but the references keep naming v1alpha1,
// as they did before v1alpha2 was served: the garbage collector and isControlledBy go
// by group, kind and UID, and children made before the move stay byte for byte.
var controllerKind = v1alpha1.SchemeGroupVersion.WithKind("LlamaStackDistribution")

// Labels and annotations shared with the upstream operator, so selectors and dashboards keep working.
const (
	labelApp       = "app"
	labelAppValue  = "llama-stack"
	labelInstance  = "app.kubernetes.io/instance"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelPartOf    = "app.kubernetes.io/part-of"
	labelComponent = "app.kubernetes.io/component"

	// ManagedByValue marks every child; the child informers select on it.
	ManagedByValue = "llama-stack-operator"
	partOfValue    = "llama-stack"

	// AllowedNamespacesAnnotation on a ConfigMap lists (comma-separated, or "*") the namespaces
	// whose LlamaStackDistributions may use it from another namespace.
	AllowedNamespacesAnnotation = "llamastack.io/allowed-namespaces"

	annotationUserConfigHash = "configmap.hash/user-config"
	annotationCABundleHash   = "configmap.hash/ca-bundle"
	// annotationDistribution on the Deployment records the distribution its image was
	// resolved from, so a running image is kept only for the same distribution.
	annotationDistribution = "llamastack.io/distribution"
	// annotationImage on the Deployment records the image the controller chose for the
	// server, so that while the operator ConfigMap does not say which image to run, the
	// one the controller last chose is kept (not one edited into the pod template by hand).
	annotationImage = "llamastack.io/image"
	// annotationSourceHash on the managed copy of a cross-namespace ConfigMap records the
	// content hash of the source it was copied from.
	annotationSourceHash = "llamastack.io/source-hash"
)

// Defaults of the server, as upstream.
const (
	defaultContainerName = "llama-stack"
	defaultPort          = int32(8321)
	defaultMountPath     = "/.llama"
	defaultStorageSize   = "10Gi"
	defaultMemory        = "1Gi"
	defaultCPUTarget     = int32(80)

	userConfigMountPath = "/etc/llama-stack/"
	userConfigKey       = "config.yaml"
	volumeStorage       = "lls-storage"
	volumeUserConfig    = "user-config"
	volumeCABundle      = "ca-bundle"
	envSSLCertFile      = "SSL_CERT_FILE"

	defaultUID = int64(1001)
)

// Child names, exactly as upstream (which has no HTTPRoute).
func deploymentName(l *v1alpha2.LlamaStackDistribution) string    { return l.Name }
func serviceName(l *v1alpha2.LlamaStackDistribution) string       { return l.Name + "-service" }
func pvcName(l *v1alpha2.LlamaStackDistribution) string           { return l.Name + "-pvc" }
func hpaName(l *v1alpha2.LlamaStackDistribution) string           { return l.Name + "-hpa" }
func pdbName(l *v1alpha2.LlamaStackDistribution) string           { return l.Name + "-pdb" }
func ingressName(l *v1alpha2.LlamaStackDistribution) string       { return l.Name + "-ingress" }
func networkPolicyName(l *v1alpha2.LlamaStackDistribution) string { return l.Name + "-network-policy" }
func httpRouteName(l *v1alpha2.LlamaStackDistribution) string     { return l.Name + "-route" }
func routeName(l *v1alpha2.LlamaStackDistribution) string         { return l.Name + "-route" }
func serviceMonitorName(l *v1alpha2.LlamaStackDistribution) string {
	return l.Name + "-service-monitor"
}
func userConfigCopyName(l *v1alpha2.LlamaStackDistribution) string {
	return l.Name + "-user-config"
}
func caBundleConfigMapName(l *v1alpha2.LlamaStackDistribution) string { return l.Name + "-ca-bundle" }

// selectorLabels select the server pods: the Deployment, Service, PDB and NetworkPolicy selector.
// They never change, so upstream's objects can be taken over.
func selectorLabels(l *v1alpha2.LlamaStackDistribution) map[string]string {
	return map[string]string{labelApp: labelAppValue, labelInstance: l.Name}
}

// childLabels are the metadata labels of every child object.
func childLabels(l *v1alpha2.LlamaStackDistribution) map[string]string {
	return map[string]string{
		labelApp:       labelAppValue,
		labelInstance:  l.Name,
		labelManagedBy: ManagedByValue,
		labelPartOf:    partOfValue,
	}
}

func port(l *v1alpha2.LlamaStackDistribution) int32 {
	if n := l.Spec.Networking; n != nil && n.Port != 0 {
		return n.Port
	}
	return defaultPort
}

func containerName(l *v1alpha2.LlamaStackDistribution) string {
	if n := overrides(l).ContainerName; n != "" {
		return n
	}
	return defaultContainerName
}

// distributionLabel is the distribution name, or "custom" for an image given directly
// (status.distributionConfig.activeDistribution, as upstream).
func distributionLabel(l *v1alpha2.LlamaStackDistribution) string {
	if n := l.Spec.Distribution.Name; n != "" {
		return n
	}
	return "custom"
}

// specReplicas is spec.workload.replicas; unset means the default, 1.
func specReplicas(l *v1alpha2.LlamaStackDistribution) int32 {
	return ptr.Deref(l.Spec.Workload.Replicas, 1)
}

// overrides is spec.workload.overrides, or an empty one; never nil, not to be modified.
func overrides(l *v1alpha2.LlamaStackDistribution) *v1alpha2.WorkloadOverrides {
	if o := l.Spec.Workload.Overrides; o != nil {
		return o
	}
	return &v1alpha2.WorkloadOverrides{}
}

// networking is spec.networking, or an empty one; never nil, not to be modified.
func networking(l *v1alpha2.LlamaStackDistribution) *v1alpha2.NetworkingSpec {
	if n := l.Spec.Networking; n != nil {
		return n
	}
	return &v1alpha2.NetworkingSpec{}
}
