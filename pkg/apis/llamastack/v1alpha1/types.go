package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=llsd
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Operator Version",type=string,JSONPath=`.status.version.operatorVersion`
// +kubebuilder:printcolumn:name="Server Version",type=string,JSONPath=`.status.version.llamaStackServerVersion`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.spec.server.userConfig.configMapName`
// +kubebuilder:selectablefield:JSONPath=`.spec.server.userConfig.configMapNamespace`
// +kubebuilder:selectablefield:JSONPath=`.spec.server.tlsConfig.caBundle.configMapName`
// +kubebuilder:selectablefield:JSONPath=`.spec.server.tlsConfig.caBundle.configMapNamespace`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 48",message="metadata.name must be at most 48 characters, so that every child name (such as <name>-network-policy) fits in 63 characters"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter and ending with a letter or digit"

// LlamaStackDistribution runs a llama-stack server: a Deployment, its Service
// and, when asked for, storage, autoscaling, a disruption budget, an Ingress
// and a NetworkPolicy.
type LlamaStackDistribution struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   LlamaStackDistributionSpec   `json:"spec"`
	Status LlamaStackDistributionStatus `json:"status,omitempty"`
}

// LlamaStackDistributionSpec defines the desired state of LlamaStackDistribution.
type LlamaStackDistributionSpec struct {
	// Replicas is the number of server pods. It is ignored while autoscaling is set:
	// the HorizontalPodAutoscaler then owns the replica count.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Server configures the llama-stack server.
	// +required
	Server ServerSpec `json:"server"`

	// Network defines network access controls for the LlamaStack service.
	// +optional
	Network *NetworkSpec `json:"network,omitempty"`
}

// NetworkSpec defines network access controls for the LlamaStack service.
type NetworkSpec struct {
	// ExposeRoute when true, creates an Ingress for external access.
	// Default is false (internal access only).
	// +kubebuilder:default=false
	// +optional
	ExposeRoute bool `json:"exposeRoute,omitempty"`

	// Ingress configures the Ingress created for exposeRoute: class, host, TLS and annotations.
	// Without it, exposeRoute makes the same Ingress as upstream (no class, host or TLS).
	// +optional
	Ingress *IngressSpec `json:"ingress,omitempty"`

	// AllowedFrom defines which namespaces are allowed to access the LlamaStack service.
	// By default, only the LLSD namespace and the operator namespace are allowed.
	// +optional
	AllowedFrom *AllowedFromSpec `json:"allowedFrom,omitempty"`
}

// IngressSpec configures the Ingress of a LlamaStackDistribution.
type IngressSpec struct {
	// ClassName is the IngressClass to use; unset leaves the cluster's default class in charge.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ClassName *string `json:"className,omitempty"`

	// Host is the host name the Ingress serves; unset serves every host.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Host string `json:"host,omitempty"`

	// TLSSecretName names a Secret (type kubernetes.io/tls) in the CR's namespace that
	// terminates TLS for Host; status.routeURL then uses https.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	TLSSecretName string `json:"tlsSecretName,omitempty"`

	// Annotations are added to the Ingress, e.g. for the ingress controller or cert-manager.
	// Keys are qualified names, as for every annotation.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="annotation keys must be qualified names: an optional DNS subdomain prefix and '/', then at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// AllowedFromSpec lists the namespaces allowed to reach the server when the
// NetworkPolicy feature is on.
type AllowedFromSpec struct {
	// Namespaces is an explicit list of namespace names allowed to access the service.
	// Use "*" to allow all namespaces.
	// +kubebuilder:validation:items:MaxLength=63
	// Each entry is matched against the namespaces' kubernetes.io/metadata.name label, so
	// it must be a valid label value (upstream's samples use names such as "nsA").
	// +kubebuilder:validation:items:Pattern=`^(\*|[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$`
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// Labels is a list of namespace label keys that are allowed to access the service.
	// A namespace matching any of these labels will be granted access (OR semantics).
	// Example: ["myproject/lls-allowed", "team/authorized"]
	// +optional
	Labels []LabelKey `json:"labels,omitempty"`
}

// LabelKey is a Kubernetes label key: an optional DNS subdomain prefix and '/',
// then a name of at most 63 alphanumerics, '-', '_' or '.', starting and ending
// with an alphanumeric.
// +kubebuilder:validation:MaxLength=317
// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
type LabelKey string

// ServerSpec defines the desired state of llama server.
type ServerSpec struct {
	// Distribution selects the server image, by distribution name or directly.
	// +required
	Distribution DistributionType `json:"distribution"`

	// ContainerSpec defines the llama-stack server container configuration.
	// +optional
	ContainerSpec ContainerSpec `json:"containerSpec,omitempty"`

	// Workers configures the number of uvicorn worker processes to run.
	// When set, the operator will launch llama-stack using uvicorn with the specified worker count.
	// Ref: https://fastapi.tiangolo.com/deployment/server-workers/
	// CPU requests are set to the number of workers when set, otherwise 1 full core
	// +kubebuilder:validation:Minimum=1
	// +optional
	Workers *int32 `json:"workers,omitempty"`

	// PodOverrides allows advanced pod-level customization.
	// +optional
	PodOverrides *PodOverrides `json:"podOverrides,omitempty"`

	// PodDisruptionBudget controls voluntary disruption tolerance for the server pods.
	// +optional
	PodDisruptionBudget *PodDisruptionBudgetSpec `json:"podDisruptionBudget,omitempty"`

	// TopologySpreadConstraints defines fine-grained spreading rules. When empty and
	// replicas > 1, the pods are spread over regions, zones and hosts.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// Autoscaling configures HorizontalPodAutoscaler for the server pods.
	// +optional
	Autoscaling *AutoscalingSpec `json:"autoscaling,omitempty"`

	// Storage defines the persistent storage configuration. When absent the
	// server keeps its data in an emptyDir.
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`

	// UserConfig defines the user configuration for the llama-stack server.
	// +optional
	UserConfig *UserConfigSpec `json:"userConfig,omitempty"`

	// TLSConfig defines the TLS configuration for the llama-stack server.
	// +optional
	TLSConfig *TLSConfig `json:"tlsConfig,omitempty"`
}

// DistributionType defines the distribution configuration for llama-stack.
// Exactly one of name and image is set.
// +kubebuilder:validation:XValidation:rule="!(has(self.name) && has(self.image))",message="Only one of name or image can be specified"
// +kubebuilder:validation:XValidation:rule="has(self.name) || has(self.image)",message="One of name or image must be specified"
type DistributionType struct {
	// Name is the distribution name that maps to supported distributions.
	// +kubebuilder:validation:MinLength=1
	// +optional
	Name string `json:"name,omitempty"`

	// Image is the direct container image reference to use, without whitespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[^\s\v\x{85}\p{Z}]+$`
	// +optional
	Image string `json:"image,omitempty"` // the pattern is unicode.IsSpace: \s alone misses \v, U+0085 and U+00A0

}

// ContainerSpec defines the llama-stack server container configuration.
type ContainerSpec struct {
	// Name of the server container: a DNS-1123 label.
	// +kubebuilder:default="llama-stack"
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Name string `json:"name,omitempty"`

	// Port the server listens on; also the Service, probe and NetworkPolicy port. Defaults to 8321.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// Resources of the server container. Requests default to one CPU per worker and 1Gi of memory.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Env is added after the controller's own variables; a variable named like one
	// of those replaces it.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Command replaces the container command when not empty.
	// +optional
	Command []string `json:"command,omitempty"`

	// Args replaces the container arguments when not empty.
	// +optional
	Args []string `json:"args,omitempty"`

	// SecurityContext replaces the container security context. By default the
	// container meets the Pod Security "restricted" profile.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}

// PodOverrides allows advanced pod-level customization.
type PodOverrides struct {
	// ServiceAccountName allows users to specify their own ServiceAccount.
	// If not specified, the pod runs as the namespace's default ServiceAccount
	// without a mounted API token.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// TerminationGracePeriodSeconds is the time allowed for graceful pod shutdown.
	// If not specified, Kubernetes' default (30 seconds) applies.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// Volumes are added to the pod after the controller's own.
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// VolumeMounts are added to the server container after the controller's own.
	// Each mountPath must be absolute. Paths are compared as directories (/data and
	// /data/ are one): a mount at the directory of another volume is an error; one
	// inside the directory of one of the controller's volumes, or holding one, is
	// reported by the VolumeMountWarning condition.
	// +kubebuilder:validation:items:XValidation:rule="self.mountPath.startsWith('/')",message="mountPath must be an absolute path, starting with '/'",fieldPath=".mountPath"
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// SecurityContext replaces the pod security context. By default the pod meets
	// the Pod Security "restricted" profile (non-root user and group 1001,
	// RuntimeDefault seccomp profile).
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
}

// PodDisruptionBudgetSpec controls voluntary disruption tolerance for the server pods.
// Each budget is a non-negative number of pods or a percentage from 0% to 100%.
// +kubebuilder:validation:XValidation:rule="!has(self.minAvailable) || (type(self.minAvailable) == int ? self.minAvailable >= 0 : self.minAvailable.matches('^(100|[1-9]?[0-9])%$'))",message="minAvailable must be a non-negative integer or a percentage from 0% to 100%"
// +kubebuilder:validation:XValidation:rule="!has(self.maxUnavailable) || (type(self.maxUnavailable) == int ? self.maxUnavailable >= 0 : self.maxUnavailable.matches('^(100|[1-9]?[0-9])%$'))",message="maxUnavailable must be a non-negative integer or a percentage from 0% to 100%"
// +kubebuilder:validation:XValidation:rule="!(has(self.minAvailable) && has(self.maxUnavailable))",message="Only one of minAvailable or maxUnavailable can be specified"
type PodDisruptionBudgetSpec struct {
	// MinAvailable is the minimum number of pods that must remain available.
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`

	// MaxUnavailable is the maximum number of pods that can be disrupted simultaneously.
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// AutoscalingSpec configures HorizontalPodAutoscaler for the server pods.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must be less than or equal to maxReplicas"
type AutoscalingSpec struct {
	// MinReplicas is the lower bound replica count maintained by the HPA.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the upper bound replica count maintained by the HPA.
	// +kubebuilder:validation:Minimum=1
	// +required
	MaxReplicas int32 `json:"maxReplicas"`

	// TargetCPUUtilizationPercentage configures CPU based scaling.
	// +kubebuilder:validation:Minimum=1
	// +optional
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`

	// TargetMemoryUtilizationPercentage configures memory based scaling.
	// +kubebuilder:validation:Minimum=1
	// +optional
	TargetMemoryUtilizationPercentage *int32 `json:"targetMemoryUtilizationPercentage,omitempty"`
}

// StorageSpec defines the persistent storage configuration.
type StorageSpec struct {
	// Size is the size of the persistent volume claim created for holding persistent data
	// of the llama-stack server. Defaults to 10Gi. It must be more than zero.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="storage.size must be more than zero"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// MountPath is the path where the storage will be mounted in the container.
	// Defaults to /.llama. It must be absolute.
	// +kubebuilder:validation:XValidation:rule="self == '' || self.startsWith('/')",message="storage.mountPath must be an absolute path, starting with '/'"
	// +optional
	MountPath string `json:"mountPath,omitempty"`

	// StorageClassName is the StorageClass of the claim; unset uses the cluster's default.
	// It is fixed once the claim exists. "" asks for a volume without a class.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$`
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// AccessModes of the claim; default [ReadWriteOnce]. They are fixed once the claim exists.
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="self.all(m, m in ['ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany', 'ReadWriteOncePod'])",message="accessModes may hold ReadWriteOnce, ReadOnlyMany, ReadWriteMany and ReadWriteOncePod"
	// +listType=atomic
	// +optional
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
}

// UserConfigSpec defines the user configuration for the llama-stack server.
type UserConfigSpec struct {
	// ConfigMapName is the name of the ConfigMap containing user configuration
	// (key config.yaml).
	// +kubebuilder:validation:MinLength=1
	// +required
	ConfigMapName string `json:"configMapName"`

	// ConfigMapNamespace is the namespace of the ConfigMap (defaults to the same namespace as the CR).
	// A ConfigMap in another namespace is used only if it carries the annotation
	// llamastack.io/allowed-namespaces listing this CR's namespace (or "*").
	// +optional
	ConfigMapNamespace string `json:"configMapNamespace,omitempty"`
}

// TLSConfig defines the TLS configuration for the llama-stack server.
type TLSConfig struct {
	// CABundle defines the CA bundle configuration for custom certificates.
	// +optional
	CABundle *CABundleConfig `json:"caBundle,omitempty"`
}

// CABundleConfig defines the CA bundle configuration for custom certificates.
type CABundleConfig struct {
	// ConfigMapName is the name of the ConfigMap containing CA bundle certificates.
	// +kubebuilder:validation:MinLength=1
	// +required
	ConfigMapName string `json:"configMapName"`

	// ConfigMapNamespace is the namespace of the ConfigMap (defaults to the same namespace as the CR).
	// +optional
	ConfigMapNamespace string `json:"configMapNamespace,omitempty"`

	// ConfigMapKeys specifies multiple keys within the ConfigMap containing CA bundle data.
	// All certificates from these keys will be concatenated into a single CA bundle file.
	// Defaults to ["ca-bundle.crt"].
	// +kubebuilder:validation:MaxItems=50
	// +optional
	ConfigMapKeys []ConfigMapKey `json:"configMapKeys,omitempty"`
}

// ConfigMapKey is a key of a ConfigMap: alphanumerics, '-', '_' and '.', starting and
// ending with an alphanumeric, without "..", at most 253 characters.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]([a-zA-Z0-9\-_.]*[a-zA-Z0-9])?$`
// +kubebuilder:validation:XValidation:rule="!self.contains('..')",message="a ConfigMap key must not contain '..'"
type ConfigMapKey string

// Phase is the lifecycle phase of a LlamaStackDistribution.
// +kubebuilder:validation:Enum=Pending;Initializing;Ready;Failed;Terminating
type Phase string

// The phases of a LlamaStackDistribution.
const (
	PhasePending      Phase = "Pending"
	PhaseInitializing Phase = "Initializing"
	PhaseReady        Phase = "Ready"
	PhaseFailed       Phase = "Failed"
	PhaseTerminating  Phase = "Terminating"
)

// LlamaStackDistributionStatus defines the observed state of LlamaStackDistribution.
type LlamaStackDistributionStatus struct {
	// ObservedGeneration is the metadata.generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase represents the current phase of the distribution.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Version contains version information for both operator and deployment.
	// +optional
	Version VersionInfo `json:"version,omitempty"`

	// DistributionConfig contains the configuration information from the providers endpoint.
	// +optional
	DistributionConfig DistributionConfig `json:"distributionConfig,omitempty"`

	// Conditions represent the latest available observations of the distribution's current state.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// AvailableReplicas is the number of available replicas.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// Replicas is the number of server pods (the Deployment's status.replicas), for the
	// scale subresource: kubectl scale, and an HPA or KEDA targeting the CR.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Selector is the label selector of the server pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// ServiceURL is the internal Kubernetes service URL where the distribution is exposed.
	// +optional
	ServiceURL string `json:"serviceURL,omitempty"`

	// RouteURL is the external URL where the distribution is exposed (when exposeRoute is true).
	// +optional
	RouteURL *string `json:"routeURL,omitempty"`
}

// VersionInfo contains version information for both operator and deployment.
type VersionInfo struct {
	// OperatorVersion is the version of the operator managing this distribution.
	// +optional
	OperatorVersion string `json:"operatorVersion,omitempty"`

	// LlamaStackServerVersion is the version of the LlamaStack server.
	// +optional
	LlamaStackServerVersion string `json:"llamaStackServerVersion,omitempty"`

	// LastUpdated represents when the version information was last updated.
	// +optional
	LastUpdated *metav1.Time `json:"lastUpdated,omitempty"`
}

// DistributionConfig contains the configuration information from the providers endpoint.
type DistributionConfig struct {
	// ActiveDistribution shows which distribution is currently being used.
	// +optional
	ActiveDistribution string `json:"activeDistribution,omitempty"`

	// AvailableDistributions lists all available distributions and their images.
	// +optional
	AvailableDistributions map[string]string `json:"availableDistributions,omitempty"`

	// Providers lists the providers the running server reports.
	// +optional
	Providers []ProviderInfo `json:"providers,omitempty"`
}

// ProviderInfo represents a single provider from the providers endpoint.
type ProviderInfo struct {
	API          string `json:"api"`
	ProviderID   string `json:"provider_id"`
	ProviderType string `json:"provider_type"`
	// Config is the provider's configuration as the server reports it.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	Config runtime.RawExtension `json:"config,omitempty"`
	Health ProviderHealthStatus `json:"health"`
}

// ProviderHealthStatus represents the health status of a provider.
type ProviderHealthStatus struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// LlamaStackDistributionList contains a list of LlamaStackDistribution.
type LlamaStackDistributionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LlamaStackDistribution `json:"items"`
}
