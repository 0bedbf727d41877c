package v1alpha2

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
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=llsd
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.workload.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].reason`
// +kubebuilder:printcolumn:name="Operator Version",type=string,JSONPath=`.status.version.operatorVersion`
// +kubebuilder:printcolumn:name="Server Version",type=string,JSONPath=`.status.version.llamaStackServerVersion`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.spec.overrideConfig.configMapName`
// +kubebuilder:selectablefield:JSONPath=`.spec.overrideConfig.configMapNamespace`
// +kubebuilder:selectablefield:JSONPath=`.spec.networking.tls.caBundle.configMapName`
// +kubebuilder:selectablefield:JSONPath=`.spec.networking.tls.caBundle.configMapNamespace`
// +kubebuilder:selectablefield:JSONPath=`.spec.baseConfig.configMapName`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 48",message="metadata.name must be at most 48 characters, so that every child name (such as <name>-network-policy) fits in 63 characters"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter and ending with a letter or digit"

// LlamaStackDistribution runs a llama-stack server: a Deployment, its Service
// and, when asked for, storage, autoscaling, a disruption budget, an Ingress
// and a NetworkPolicy. In v1alpha2 the controller also writes the server's
// config.yaml from the typed providers, resources, storage and disabled APIs.
type LlamaStackDistribution struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   LlamaStackDistributionSpec   `json:"spec"`
	Status LlamaStackDistributionStatus `json:"status,omitempty"`
}

// The two rules on overrideConfig judge fields a llamastack.io/v1alpha1 write can set
// one of (server.userConfig), so an object stored before the admission policy of
// artifacts/policy refused such a write may break them. As they judge only which fields
// are present, each is judged again on an update only when one of its fields comes or
// goes (oldSelf, optional so that a create is judged in full; a comparison by value would
// be over the cost budget): the scale subresource, which writes spec.workload.replicas,
// and every other edit of such an object are admitted, and the controller reports the
// fields to remove (ReasonSpecInvalid).
// +kubebuilder:validation:XValidation:rule="(oldSelf.hasValue() && has(oldSelf.value().overrideConfig) == has(self.overrideConfig) && has(oldSelf.value().providers) == has(self.providers) && has(oldSelf.value().resources) == has(self.resources) && has(oldSelf.value().storage) == has(self.storage) && has(oldSelf.value().disabled) == has(self.disabled)) || !has(self.overrideConfig) || !(has(self.providers) || has(self.resources) || has(self.storage) || has(self.disabled))",message="overrideConfig is the whole config.yaml as given: it cannot be combined with providers, resources, storage or disabled",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="(oldSelf.hasValue() && has(oldSelf.value().overrideConfig) == has(self.overrideConfig) && has(oldSelf.value().baseConfig) == has(self.baseConfig)) || !(has(self.overrideConfig) && has(self.baseConfig))",message="overrideConfig is the whole config.yaml as given: it cannot be combined with baseConfig",optionalOldSelf=true

// LlamaStackDistributionSpec defines the desired state of LlamaStackDistribution.
// +kubebuilder:validation:XValidation:rule="!has(self.disabled) || !has(self.providers) || (!(has(self.providers.inference) && 'inference' in self.disabled) && !(has(self.providers.safety) && 'safety' in self.disabled) && !(has(self.providers.vectorIo) && 'vectorIo' in self.disabled) && !(has(self.providers.toolRuntime) && 'toolRuntime' in self.disabled) && !(has(self.providers.files) && 'files' in self.disabled) && !(has(self.providers.agents) && 'agents' in self.disabled) && !(has(self.providers.responses) && 'responses' in self.disabled) && !(has(self.providers.batches) && 'batches' in self.disabled) && !(has(self.providers.datasetio) && 'datasetio' in self.disabled) && !(has(self.providers.eval) && 'eval' in self.disabled) && !(has(self.providers.scoring) && 'scoring' in self.disabled) && !(has(self.providers.postTraining) && 'postTraining' in self.disabled) && !(has(self.providers.fileProcessors) && 'fileProcessors' in self.disabled) && !(has(self.providers.telemetry) && 'telemetry' in self.disabled) && !(has(self.providers.interactions) && 'interactions' in self.disabled) && !(has(self.providers.messages) && 'messages' in self.disabled) && !(has(self.providers.skills) && 'skills' in self.disabled))",message="an API in disabled cannot also have providers",fieldPath=".disabled"
// +kubebuilder:validation:XValidation:rule="!has(self.disabled) || !has(self.resources) || ((!has(self.resources.models) || !('inference' in self.disabled)) && (!has(self.resources.shields) || !('safety' in self.disabled)) && (!has(self.resources.tools) || !('toolRuntime' in self.disabled)))",fieldPath=".resources",message="resources need their API: models cannot be registered with inference disabled, shields with safety disabled, tools with toolRuntime disabled"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.models) || !has(self.providers) || !has(self.providers.inference) || self.resources.models.all(m, !has(m.provider) || self.providers.inference.exists(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider)) == m.provider))",fieldPath=".resources.models",message="resources.models[].provider must be the id of one of providers.inference, which replace the base config's inference providers"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.shields) || !has(self.providers) || !has(self.providers.safety) || self.resources.shields.all(m, !has(m.provider) || self.providers.safety.exists(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider)) == m.provider))",fieldPath=".resources.shields",message="resources.shields[].provider must be the id of one of providers.safety, which replace the base config's safety providers"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.tools) || !has(self.providers) || !has(self.providers.toolRuntime) || self.resources.tools.all(m, !has(m.provider) || self.providers.toolRuntime.exists(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider)) == m.provider))",fieldPath=".resources.tools",message="resources.tools[].provider must be the id of one of providers.toolRuntime, which replace the base config's tool_runtime providers"
type LlamaStackDistributionSpec struct {
	// Distribution selects the server image, by distribution name or directly.
	// +required
	Distribution DistributionSpec `json:"distribution"`

	// BaseConfig names a ConfigMap key holding the config.yaml that providers,
	// resources, storage and disabled are applied to. Without it the controller
	// uses the base config it knows for a named distribution; a direct image
	// needs baseConfig (or overrideConfig) for the controller to generate a config.
	// +optional
	BaseConfig *BaseConfigSpec `json:"baseConfig,omitempty"`

	// OverrideConfig names a ConfigMap holding the server's whole config.yaml
	// (key config.yaml), used as given: nothing is generated. It cannot be
	// combined with baseConfig, providers, resources, storage or disabled.
	// +optional
	OverrideConfig *OverrideConfigSpec `json:"overrideConfig,omitempty"`

	// Providers lists, per API, the providers of the generated config. A list
	// replaces that API's providers in the base config; an API left out keeps
	// the base's. Provider ids are unique across all APIs.
	// +optional
	Providers *ProvidersSpec `json:"providers,omitempty"`

	// Resources are registered with the server (under registered_resources),
	// added to those of the base config.
	// +optional
	Resources *ResourcesSpec `json:"resources,omitempty"`

	// Storage selects the server's state backends: key-value and SQL. A side
	// left out keeps the base config's.
	// +optional
	Storage *StateStorageSpec `json:"storage,omitempty"`

	// Disabled lists APIs removed from the generated config, from both its apis
	// and its providers. An API listed here cannot also have providers.
	// +kubebuilder:validation:MaxItems=17
	// +listType=set
	// +optional
	Disabled []APIName `json:"disabled,omitempty"`

	// Networking configures the server's port, TLS, external exposure and the
	// namespaces allowed to reach it.
	// +optional
	Networking *NetworkingSpec `json:"networking,omitempty"`

	// Workload configures the Deployment: replicas, workers, resources,
	// autoscaling, storage, disruption budget, spreading and pod overrides.
	// +kubebuilder:default={}
	// +optional
	Workload WorkloadSpec `json:"workload,omitempty"`
}

// APIName names an API of the server, in the camelCase of the providers field
// that configures it (vectorIo for the server's vector_io).
// +kubebuilder:validation:Enum=inference;safety;vectorIo;toolRuntime;files;agents;responses;batches;datasetio;eval;scoring;postTraining;fileProcessors;telemetry;interactions;messages;skills
type APIName string

// The APIs, with the server's name of each.
const (
	APIInference      APIName = "inference"      // inference
	APISafety         APIName = "safety"         // safety
	APIVectorIO       APIName = "vectorIo"       // vector_io
	APIToolRuntime    APIName = "toolRuntime"    // tool_runtime
	APIFiles          APIName = "files"          // files
	APIAgents         APIName = "agents"         // agents
	APIResponses      APIName = "responses"      // responses
	APIBatches        APIName = "batches"        // batches
	APIDatasetIO      APIName = "datasetio"      // datasetio
	APIEval           APIName = "eval"           // eval
	APIScoring        APIName = "scoring"        // scoring
	APIPostTraining   APIName = "postTraining"   // post_training
	APIFileProcessors APIName = "fileProcessors" // file_processors
	APITelemetry      APIName = "telemetry"      // telemetry
	APIInteractions   APIName = "interactions"   // interactions
	APIMessages       APIName = "messages"       // messages
	APISkills         APIName = "skills"         // skills
)

// DistributionSpec defines the distribution configuration for llama-stack.
// Exactly one of name and image is set.
// +kubebuilder:validation:XValidation:rule="!(has(self.name) && has(self.image))",message="Only one of name or image can be specified"
// +kubebuilder:validation:XValidation:rule="has(self.name) || has(self.image)",message="One of name or image must be specified"
type DistributionSpec struct {
	// Name is a distribution the controller knows: starter and postgres-demo run
	// their pinned OGX 1.3.0 image (docker.io/ogxai) and base config;
	// meta-reference-gpu and remote-vllm have no published image and are
	// reported (DistributionNotPublished) unless the operator ConfigMap's
	// image-overrides names one.
	// +kubebuilder:validation:MinLength=1
	// +optional
	Name string `json:"name,omitempty"`

	// Image is the direct container image reference to use, without whitespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[^\s\v\x{85}\p{Z}]+$`
	// +optional
	Image string `json:"image,omitempty"` // the pattern is unicode.IsSpace: \s alone misses \v, U+0085 and U+00A0
}

// BaseConfigSpec names the ConfigMap key holding a base config.yaml, in the CR's namespace.
type BaseConfigSpec struct {
	// ConfigMapName is the name of the ConfigMap, in the CR's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ConfigMapName string `json:"configMapName"`

	// Key is the ConfigMap key holding the config; default config.yaml.
	// +kubebuilder:default="config.yaml"
	// +optional
	Key ConfigMapKey `json:"key,omitempty"`
}

// OverrideConfigSpec names a ConfigMap holding the server's whole config.yaml.
type OverrideConfigSpec struct {
	// ConfigMapName is the name of the ConfigMap holding the config (key config.yaml).
	// +kubebuilder:validation:MinLength=1
	// +required
	ConfigMapName string `json:"configMapName"`

	// ConfigMapNamespace is the namespace of the ConfigMap (defaults to the same namespace as the CR).
	// A ConfigMap in another namespace is used only if it carries the annotation
	// llamastack.io/allowed-namespaces listing this CR's namespace (or "*").
	// +optional
	ConfigMapNamespace string `json:"configMapNamespace,omitempty"`
}

// ProvidersSpec lists the providers of the generated config, per API. Each list
// replaces that API's providers in the base config. Ids are needed in a list of
// two or more, and are unique across all APIs; an id left out is the provider's
// name without remote:: or inline::.
// +kubebuilder:validation:XValidation:rule="[(has(self.inference) ? self.inference.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.safety) ? self.safety.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.vectorIo) ? self.vectorIo.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.toolRuntime) ? self.toolRuntime.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.files) ? self.files.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.agents) ? self.agents.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.responses) ? self.responses.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.batches) ? self.batches.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.datasetio) ? self.datasetio.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.eval) ? self.eval.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.scoring) ? self.scoring.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.postTraining) ? self.postTraining.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.fileProcessors) ? self.fileProcessors.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.telemetry) ? self.telemetry.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.interactions) ? self.interactions.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.messages) ? self.messages.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : []) + (has(self.skills) ? self.skills.map(p, (has(p.id) ? p.id : (p.provider.contains('::') ? p.provider.substring(8) : p.provider))) : [])].all(ids, ids.all(i, ids.exists_one(k, k == i)))",message="provider ids must be unique across all APIs (an id left out is the provider's name without remote:: or inline::)"
type ProvidersSpec struct {
	// Inference lists the providers of the inference API; the models of spec.resources
	// without a provider are served by its first entry.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	Inference []ProviderConfig `json:"inference,omitempty"`

	// Safety lists the providers of the safety API (servers before 1.0).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	Safety []ProviderConfig `json:"safety,omitempty"`

	// VectorIO lists the providers of the vector_io API.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	VectorIO []ProviderConfig `json:"vectorIo,omitempty"`

	// ToolRuntime lists the providers of the tool_runtime API.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	ToolRuntime []ProviderConfig `json:"toolRuntime,omitempty"`

	// Files lists the providers of the files API.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	Files []ProviderConfig `json:"files,omitempty"`

	// Agents lists the providers of the agents API (servers before 0.7; renamed responses in 0.7).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	Agents []ProviderConfig `json:"agents,omitempty"`

	// Responses lists the providers of the responses API (servers from 0.7).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	Responses []ProviderConfig `json:"responses,omitempty"`

	// Batches lists the providers of the batches API.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	Batches []ProviderConfig `json:"batches,omitempty"`

	// DatasetIO lists the providers of the datasetio API (servers before 0.8).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	DatasetIO []ProviderConfig `json:"datasetio,omitempty"`

	// Eval lists the providers of the eval API (servers before 0.8).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	Eval []ProviderConfig `json:"eval,omitempty"`

	// Scoring lists the providers of the scoring API (servers before 0.8).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	Scoring []ProviderConfig `json:"scoring,omitempty"`

	// PostTraining lists the providers of the post_training API (servers before 0.7).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	PostTraining []ProviderConfig `json:"postTraining,omitempty"`

	// FileProcessors lists the providers of the file_processors API (servers from 0.4).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	FileProcessors []ProviderConfig `json:"fileProcessors,omitempty"`

	// Telemetry lists the providers of the telemetry API (servers before 0.3).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	Telemetry []ProviderConfig `json:"telemetry,omitempty"`

	// Interactions lists the providers of the interactions API (servers from 0.8).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	Interactions []ProviderConfig `json:"interactions,omitempty"`

	// Messages lists the providers of the messages API (servers from 0.8).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	Messages []ProviderConfig `json:"messages,omitempty"`

	// Skills lists the providers of the skills API (servers from 1.1).
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self.all(p, has(p.id))",message="every provider of a list of two or more needs an id"
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="an empty list would keep the base config's providers: leave the field out to keep them, or list the API in disabled to turn it off"
	// +listType=atomic
	// +optional
	Skills []ProviderConfig `json:"skills,omitempty"`
}

// ProviderConfig is one provider of the generated config.
// +kubebuilder:validation:XValidation:rule="!has(self.apiKey) || !has(self.secretRefs) || !('api_key' in self.secretRefs)",message="apiKey and secretRefs.api_key would be the same environment variable: set one of them"
type ProviderConfig struct {
	// ID is the provider_id. It is required in a list of two or more and unique
	// across all APIs; left out, it is the provider's name without remote:: or
	// inline:: (vllm for remote::vllm). Models, shields and tools name it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$`
	// +optional
	ID string `json:"id,omitempty"`

	// Provider is the provider type: a bare name means remote::<name> (vllm is
	// remote::vllm); an inline provider is written out (inline::llama-guard).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^((remote|inline)::)?[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$`
	// +required
	Provider string `json:"provider"`

	// Endpoint is the URL of a remote provider, written to the field the
	// provider type has for it at the server's version (vLLM: url up to 0.3,
	// base_url from 0.4).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9+.-]*://[^\s]+$`
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// APIKey is the provider's API key, from a Secret: the pod gets it as the
	// variable LLSD_<ID>_API_KEY and the config refers to it in the field the
	// provider type has for its key (api_key; api_token for vLLM).
	// +optional
	APIKey *SecretValue `json:"apiKey,omitempty"`

	// SecretRefs sets other fields of the provider's config from Secrets: each
	// key is a config field (snake_case), set to ${env.LLSD_<ID>_<FIELD>}, the
	// variable coming from the Secret.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 63 && k.matches('^[a-z][a-z0-9]*(_[a-z0-9]+)*$'))",message="secretRefs keys must be snake_case config field names: lower-case letters and digits in words joined by single '_', at most 63 characters"
	// +optional
	SecretRefs map[string]SecretValue `json:"secretRefs,omitempty"`

	// Settings are merged into the provider's config as given (free-form), into a
	// ConfigMap: use apiKey or secretRefs for secrets. A key that names a credential
	// (api_key, token, password, secret, ...) given as a literal gets a Warning Event
	// (SecretInSettings).
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Settings *runtime.RawExtension `json:"settings,omitempty"`
}

// SecretValue takes a value from a key of a Secret in the CR's namespace. The
// controller never reads the Secret: the pod gets the value as an environment
// variable.
type SecretValue struct {
	// SecretKeyRef names the Secret and its key.
	// +required
	SecretKeyRef SecretKeyRef `json:"secretKeyRef"`
}

// SecretKeyRef is a key of a Secret in the CR's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`

	// Key in the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key"`
}

// ResourcesSpec lists the resources registered with the server, added to the
// base config's.
type ResourcesSpec struct {
	// Models to register. Each name is unique.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Models []ModelConfig `json:"models,omitempty"`

	// Shields to register (servers before 1.0: OGX 1.0 removed shields with the
	// safety API). Each name is unique.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	// +optional
	Shields []ShieldConfig `json:"shields,omitempty"`

	// Tools are the tool groups to register (servers before 0.7; from 0.7 the
	// server registers tool groups itself). Each name is unique.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Tools []ToolGroupConfig `json:"tools,omitempty"`
}

// ModelConfig is a model to register.
type ModelConfig struct {
	// Name is the model_id clients use.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:cntrl:]]')",message="must not contain a control character such as a newline: the server would register a name no client can send"
	// +required
	Name string `json:"name"`

	// Provider is the id of the inference provider serving the model: one of
	// providers.inference when the CR has any. Left out, the CR's first inference
	// provider, else the base config's first.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Provider string `json:"provider,omitempty"`

	// ProviderModelID is the model's name at the provider; default the name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:cntrl:]]')",message="must not contain a control character such as a newline: the server would register a name no client can send"
	// +optional
	ProviderModelID string `json:"providerModelId,omitempty"`

	// ModelType is llm (the default), embedding or rerank.
	// +kubebuilder:validation:Enum=llm;embedding;rerank
	// +optional
	ModelType string `json:"modelType,omitempty"`

	// ContextLength is the model's context window in tokens (metadata.context_length).
	// +kubebuilder:validation:Minimum=1
	// +optional
	ContextLength *int32 `json:"contextLength,omitempty"`

	// EmbeddingDimension is the size of an embedding model's vectors
	// (metadata.embedding_dimension), which the server needs for embedding models.
	// +kubebuilder:validation:Minimum=1
	// +optional
	EmbeddingDimension *int32 `json:"embeddingDimension,omitempty"`
}

// ShieldConfig is a shield to register.
type ShieldConfig struct {
	// Name is the shield_id clients use.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:cntrl:]]')",message="must not contain a control character such as a newline: the server would register a name no client can send"
	// +required
	Name string `json:"name"`

	// Provider is the id of the safety provider: one of providers.safety when the
	// CR has any. Left out, the CR's first safety provider, else the base config's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Provider string `json:"provider,omitempty"`

	// ProviderShieldID is the shield's name at the provider (for llama-guard, the
	// guard model); default the name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +optional
	ProviderShieldID string `json:"providerShieldId,omitempty"`
}

// ToolGroupConfig is a tool group to register.
type ToolGroupConfig struct {
	// Name is the toolgroup_id, such as builtin::websearch.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:cntrl:]]')",message="must not contain a control character such as a newline: the server would register a name no client can send"
	// +required
	Name string `json:"name"`

	// Provider is the id of the tool_runtime provider: one of providers.toolRuntime
	// when the CR has any. Left out, the CR's first, else the base config's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Provider string `json:"provider,omitempty"`
}

// StateStorageSpec selects the server's state backends.
type StateStorageSpec struct {
	// KV is the key-value backend (the registry and provider state).
	// +optional
	KV *KVStorageSpec `json:"kv,omitempty"`

	// SQL is the relational backend (inference, conversation and response stores).
	// +optional
	SQL *SQLStorageSpec `json:"sql,omitempty"`
}

// KVStorageSpec is the key-value backend.
// +kubebuilder:validation:XValidation:rule="self.type == 'redis' ? has(self.redis) : !has(self.redis)",message="kv.redis is required with type redis, and allowed only with it"
// +kubebuilder:validation:XValidation:rule="self.type == 'postgres' ? has(self.postgres) : !has(self.postgres)",message="kv.postgres is required with type postgres, and allowed only with it"
type KVStorageSpec struct {
	// Type of the backend: sqlite (default; a file under the server's storage), redis or postgres.
	// +kubebuilder:validation:Enum=sqlite;redis;postgres
	// +kubebuilder:default=sqlite
	// +optional
	Type string `json:"type,omitempty"`

	// Redis is the Redis server, for type redis. The server's Redis backend takes
	// no password.
	// +optional
	Redis *RedisSpec `json:"redis,omitempty"`

	// Postgres is the PostgreSQL server, for type postgres.
	// +optional
	Postgres *PostgresSpec `json:"postgres,omitempty"`
}

// SQLStorageSpec is the relational backend.
// +kubebuilder:validation:XValidation:rule="self.type == 'postgres' ? has(self.postgres) : !has(self.postgres)",message="sql.postgres is required with type postgres, and allowed only with it"
type SQLStorageSpec struct {
	// Type of the backend: sqlite (default; a file under the server's storage) or postgres.
	// +kubebuilder:validation:Enum=sqlite;postgres
	// +kubebuilder:default=sqlite
	// +optional
	Type string `json:"type,omitempty"`

	// Postgres is the PostgreSQL server, for type postgres.
	// +optional
	Postgres *PostgresSpec `json:"postgres,omitempty"`
}

// RedisSpec is a Redis server.
type RedisSpec struct {
	// Host name or address of the server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Host string `json:"host"`

	// Port of the server; default 6379.
	// +kubebuilder:default=6379
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
}

// PostgresSpec is a PostgreSQL server. The server has no connection-string
// field: host, port, database, user and password are separate.
type PostgresSpec struct {
	// Host name or address of the server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Host string `json:"host"`

	// Port of the server; default 5432.
	// +kubebuilder:default=5432
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// DB is the database name; left out, the base config's (llamastack in the
	// distributions' configs).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	DB string `json:"db,omitempty"`

	// User to connect as.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	User string `json:"user"`

	// PasswordSecretRef is the key of a Secret holding the password; the pod gets
	// it as an environment variable.
	// +optional
	PasswordSecretRef *SecretKeyRef `json:"passwordSecretRef,omitempty"`
}

// NetworkingSpec configures how the server is reached.
// +kubebuilder:validation:XValidation:rule="!has(self.expose) || !has(self.expose.route) || !has(self.expose.route.termination) || ((self.expose.route.termination == 'Edge') != (has(self.tls) && has(self.tls.enabled) && self.tls.enabled))",message="expose.route.termination Edge forwards plain HTTP, so it needs tls.enabled false; Reencrypt and Passthrough reach a server that serves TLS, so they need tls.enabled true"
type NetworkingSpec struct {
	// Port the server listens on; also the Service, probe and NetworkPolicy port. Defaults to 8321.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// TLS configures the server's own certificate and the CA certificates it trusts.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Expose creates an Ingress to the Service; status.routeURL reports its address.
	// +optional
	Expose *ExposeSpec `json:"expose,omitempty"`

	// AllowedFrom defines which namespaces are allowed to access the LlamaStack service.
	// By default, only the LLSD namespace and the operator namespace are allowed.
	// +optional
	AllowedFrom *AllowedFromSpec `json:"allowedFrom,omitempty"`
}

// TLSSpec configures TLS for the server.
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || !self.enabled || has(self.secretName)",message="tls.secretName is required when tls.enabled is true"
type TLSSpec struct {
	// Enabled serves HTTPS on the server's port with the certificate and key of
	// secretName, on every server version: the Secret is mounted at
	// /etc/llama-stack-tls; a config the controller writes (a named distribution, or
	// any of providers, resources, storage, disabled, baseConfig) names them in
	// server.tls_certfile and tls_keyfile, and llama-stack 0.3 to 0.7 started by the
	// controller also get UVICORN_SSL_CERTFILE and UVICORN_SSL_KEYFILE. An overrideConfig
	// must name them itself, except on llama-stack 0.3 to 0.7. The probes, the Service
	// port (named https) and status.serviceURL then use HTTPS, and the controller
	// verifies the server against the Secret's ca.crt and caBundle. A missing or
	// unusable Secret (a certificate expired or not yet valid, a key that is not its
	// own, a ca.crt that is not PEM certificates) is reported (TLSSecretNotFound,
	// TLSSecretInvalid) and rolls nothing; the Secret is watched, so a change of it is
	// seen within seconds, and a renewed certificate rolls the pods.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// SecretName names a Secret (type kubernetes.io/tls) in the CR's namespace
	// with the server's certificate and key (tls.crt, tls.key) and, optionally, the CA
	// that signed it (ca.crt), as cert-manager writes them.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// CABundle adds CA certificates the server trusts when it calls providers,
	// whether or not it serves TLS itself.
	// +optional
	CABundle *CABundleConfig `json:"caBundle,omitempty"`

	// The rule above tests has(self.enabled) rather than count on its default: the API
	// server does not apply v1alpha2's defaults to an object that it reads from one
	// stored in v1alpha1 (made before the upgrade) and converts, and a rule that reads an
	// absent field fails every write of that object, its status included.
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

// ExposeSpec configures what routes to the server's Service from outside the cluster:
// the Ingress <name>-ingress, with type HTTPRoute the Gateway API HTTPRoute
// <name>-route, or with type Route the OpenShift Route <name>-route.
// +kubebuilder:validation:XValidation:rule="(has(self.type) && self.type == 'HTTPRoute') == has(self.httpRoute)",message="httpRoute is set with type HTTPRoute, and only then: it names the Gateways the route attaches to"
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'HTTPRoute' || (!has(self.className) && !has(self.tlsSecretName))",message="className and tlsSecretName are Ingress settings: an HTTPRoute takes its class and TLS from the Gateway listener it attaches to"
// +kubebuilder:validation:XValidation:rule="!has(self.route) || (has(self.type) && self.type == 'Route')",message="route is set with type Route only"
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'Route' || (!has(self.className) && !has(self.tlsSecretName))",message="className and tlsSecretName are Ingress settings: a Route is served by the OpenShift router with its certificate"
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'Route' || !has(self.hostname) || !self.hostname.startsWith('*')",message="a Route serves one host name: a wildcard hostname is for an Ingress or HTTPRoute"
type ExposeSpec struct {
	// Enabled creates the Ingress (or HTTPRoute, or Route); default true, so expose: {} exposes the server.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Type is what exposes the server: Ingress (the default); HTTPRoute, a Gateway API
	// route attached to the Gateways of httpRoute.parentRefs; or Route, an OpenShift
	// Route served by the cluster's router over HTTPS. An HTTPRoute is made only on a
	// cluster that serves gateway.networking.k8s.io/v1, a Route only on one that serves
	// route.openshift.io/v1; elsewhere the Exposed condition says so.
	// +kubebuilder:validation:Enum=Ingress;HTTPRoute;Route
	// +optional
	Type ExposeType `json:"type,omitempty"`

	// HTTPRoute configures the HTTPRoute of type HTTPRoute.
	// +optional
	HTTPRoute *HTTPRouteSpec `json:"httpRoute,omitempty"`

	// Route configures the OpenShift Route of type Route; route: {} (or none) takes the
	// defaults.
	// +optional
	Route *RouteSpec `json:"route,omitempty"`

	// Hostname is the host name the Ingress (or HTTPRoute) serves; unset serves every host.
	// A Route serves it (not a wildcard); unset, the router picks one, which
	// status.routeURL reports once the router has admitted the Route. OpenShift keeps
	// a Route's host once set: unsetting it later keeps the host the Route has.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Hostname string `json:"hostname,omitempty"`

	// ClassName is the IngressClass to use; unset leaves the cluster's default class in charge.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ClassName *string `json:"className,omitempty"`

	// TLSSecretName names a Secret (type kubernetes.io/tls) in the CR's namespace that
	// terminates TLS for hostname at the Ingress; status.routeURL then uses https.
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

// ExposeType is what exposes the server outside the cluster.
type ExposeType string

const (
	// ExposeIngress exposes the server through an Ingress.
	ExposeIngress ExposeType = "Ingress"
	// ExposeHTTPRoute exposes the server through a Gateway API HTTPRoute.
	ExposeHTTPRoute ExposeType = "HTTPRoute"
	// ExposeRoute exposes the server through an OpenShift Route.
	ExposeRoute ExposeType = "Route"
)

// RouteSpec configures the OpenShift Route <name>-route: how the router terminates TLS.
// +kubebuilder:validation:XValidation:rule="!has(self.termination) || self.termination != 'Passthrough' || !has(self.insecureEdgeTerminationPolicy) || self.insecureEdgeTerminationPolicy != 'Allow'",message="a Passthrough route cannot allow plain HTTP: the router does not see inside the connection (use Redirect or None)"
type RouteSpec struct {
	// Termination is where TLS ends. Edge: at the router, which forwards plain HTTP to
	// the server (the server must not serve TLS). Reencrypt: at the router, which opens
	// a TLS connection of its own to the server, verified against the ca.crt of
	// networking.tls.secretName (without one, the router trusts the cluster's service
	// CA, as for a certificate of OpenShift's service-serving signer). Passthrough: at
	// the server, whose certificate the client sees. Default: Reencrypt when
	// networking.tls.enabled, Edge otherwise; Reencrypt and Passthrough need
	// networking.tls.enabled, Edge needs it off.
	// +kubebuilder:validation:Enum=Edge;Reencrypt;Passthrough
	// +optional
	Termination RouteTermination `json:"termination,omitempty"`

	// InsecureEdgeTerminationPolicy is what the router does with a plain HTTP request:
	// Redirect it to HTTPS (the default), Allow it, or None (refuse it).
	// +kubebuilder:validation:Enum=Redirect;Allow;None
	// +optional
	InsecureEdgeTerminationPolicy string `json:"insecureEdgeTerminationPolicy,omitempty"`
}

// RouteTermination is where a Route's TLS ends.
type RouteTermination string

const (
	RouteTerminationEdge        RouteTermination = "Edge"
	RouteTerminationReencrypt   RouteTermination = "Reencrypt"
	RouteTerminationPassthrough RouteTermination = "Passthrough"
)

// HTTPRouteSpec configures the HTTPRoute <name>-route: the Gateways it attaches to and
// the path prefix it routes to the server's Service.
type HTTPRouteSpec struct {
	// ParentRefs are the Gateways (or listeners of them) the route attaches to. A Gateway
	// in another namespace must allow routes from the CR's namespace.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +required
	ParentRefs []GatewayParentRef `json:"parentRefs"`

	// Path is the path prefix routed to the server; default "/".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[-A-Za-z0-9/._~!$&'()*+,;=:@%]*$`
	// +kubebuilder:validation:XValidation:rule="!self.contains('//') && !self.contains('/./') && !self.contains('/../') && !self.endsWith('/.') && !self.endsWith('/..')",message="path must be a normalized absolute path: no '//', '/./' or '/../'"
	// +optional
	Path string `json:"path,omitempty"`
}

// GatewayParentRef names a Gateway, or one listener of it, that an HTTPRoute attaches to.
type GatewayParentRef struct {
	// Name is the Gateway's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`

	// Namespace is the Gateway's namespace; unset means the CR's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// SectionName is the name of the Gateway's listener to attach to; unset attaches to
	// every listener that allows the route.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	SectionName string `json:"sectionName,omitempty"`
}

// AllowedFromSpec lists the namespaces allowed to reach the server when the
// NetworkPolicy feature is on.
type AllowedFromSpec struct {
	// Namespaces is an explicit list of namespace names allowed to access the service.
	// Use "*" to allow all namespaces.
	// +kubebuilder:validation:items:MaxLength=63
	// Each entry is matched against the namespaces' kubernetes.io/metadata.name label, so
	// it must be a valid label value.
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

// WorkloadSpec configures the server's Deployment and its companions.
type WorkloadSpec struct {
	// Replicas is the number of server pods. It is ignored while autoscaling is set:
	// the HorizontalPodAutoscaler then owns the replica count.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Workers is the number of server worker processes: LLS_WORKERS for a
	// llama-stack server (up to 0.7), OGX_WORKERS and, in a generated config,
	// server.workers for an OGX server (0.8 and later). CPU requests default to
	// one core per worker.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Workers *int32 `json:"workers,omitempty"`

	// Resources of the server container. Requests default to one CPU per worker and 1Gi of memory.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Autoscaling configures a HorizontalPodAutoscaler <name>-hpa for the server pods.
	// +optional
	Autoscaling *AutoscalingSpec `json:"autoscaling,omitempty"`

	// Storage is a PersistentVolumeClaim <name>-pvc for the server's data. When
	// absent the server keeps its data in an emptyDir.
	// +optional
	Storage *PVCStorageSpec `json:"storage,omitempty"`

	// PodDisruptionBudget controls voluntary disruption tolerance for the server pods.
	// +optional
	PodDisruptionBudget *PodDisruptionBudgetSpec `json:"podDisruptionBudget,omitempty"`

	// TopologySpreadConstraints defines fine-grained spreading rules. When empty and
	// replicas > 1, the pods are spread over regions, zones and hosts.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// Overrides customise the server pod and container.
	// +optional
	Overrides *WorkloadOverrides `json:"overrides,omitempty"`

	// Rollback is automatic rollback: when the rollout of a new image, config or env
	// fails (a new pod crash-loops, or the rollout is not done within the Deployment's
	// progress deadline), the controller puts back the image, config and env of the
	// last ReplicaSet that served, and does not try the failed ones again until they
	// change. On unless enabled is false.
	// +optional
	Rollback *RollbackSpec `json:"rollback,omitempty"`
}

// RollbackSpec turns automatic rollback on or off.
type RollbackSpec struct {
	// Enabled turns automatic rollback on (the default) or off. Off, a failed
	// rollout stays rolled out, as a Deployment's does.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// WorkloadOverrides customise the server pod and its container.
type WorkloadOverrides struct {
	// ContainerName is the name of the server container, a DNS-1123 label;
	// default llama-stack.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	ContainerName string `json:"containerName,omitempty"`

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

	// ContainerSecurityContext replaces the server container's security context. By
	// default the container meets the Pod Security "restricted" profile.
	// +optional
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext,omitempty"`
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

// PVCStorageSpec is the PersistentVolumeClaim of the server's data.
type PVCStorageSpec struct {
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

	// ResolvedDistribution is what the controller runs: the image, the server
	// version it expects there, and the config it generated or used.
	// +optional
	ResolvedDistribution *ResolvedDistributionStatus `json:"resolvedDistribution,omitempty"`

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

	// RouteURL is the external URL where the distribution is exposed (when networking.expose is enabled):
	// the Ingress's host or load-balancer address (https with tlsSecretName); an HTTPRoute's hostname on the scheme and port of
	// the Gateway listener that accepted it; https and the host a router admitted for a Route. Empty
	// until known.
	// +optional
	RouteURL *string `json:"routeURL,omitempty"`

	// Rollback is what automatic rollback knows: the ReplicaSet that last served,
	// and the inputs whose rollout failed and was rolled back.
	// +optional
	Rollback *RollbackStatus `json:"rollback,omitempty"`
}

// RollbackStatus is what automatic rollback knows of the CR's rollouts.
type RollbackStatus struct {
	// ServedReplicaSet is the last ReplicaSet of the CR's Deployment whose pods all
	// served: the one a failed rollout is rolled back to.
	// +optional
	ServedReplicaSet string `json:"servedReplicaSet,omitempty"`

	// FailedInputs is a hash of the inputs (the pod template the controller made of
	// the image, config and env) whose rollout failed and was rolled back: they are
	// not rolled out again until they change. Empty when no rollback holds.
	// +optional
	FailedInputs string `json:"failedInputs,omitempty"`

	// FailedReplicaSet is the ReplicaSet of the rollout that failed.
	// +optional
	FailedReplicaSet string `json:"failedReplicaSet,omitempty"`

	// Reason is why the rollout failed, in the failing pods' own terms
	// (CrashLoopBackOff, ImagePullBackOff, ProgressDeadlineExceeded, ...).
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message is why the rollout failed, in the failing pods' own words.
	// +optional
	Message string `json:"message,omitempty"`

	// LastRollbackTime is when the controller last rolled back.
	// +optional
	LastRollbackTime *metav1.Time `json:"lastRollbackTime,omitempty"`
}

// ResolvedDistributionStatus is the image and config the controller runs.
type ResolvedDistributionStatus struct {
	// Image is the container image the Deployment runs.
	// +optional
	Image string `json:"image,omitempty"`

	// ServerVersion is the llama-stack version the controller expects in the
	// image, which decides the shape of the generated config; empty when unknown.
	// +optional
	ServerVersion string `json:"serverVersion,omitempty"`

	// ConfigSource is where the config comes from: the distribution's built-in
	// base config, baseConfig, overrideConfig, or the image's own config.
	// +optional
	ConfigSource string `json:"configSource,omitempty"`

	// ConfigHash is the SHA-256 of the config the server reads, in hex.
	// +optional
	ConfigHash string `json:"configHash,omitempty"`
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
	// API is the API the provider serves, as the server names it (inference, vector_io, ...).
	API string `json:"api"`
	// ProviderID is the provider's id in the server's config.
	ProviderID string `json:"provider_id"`
	// ProviderType is the provider's type, such as remote::vllm.
	ProviderType string `json:"provider_type"`
	// Config is the provider's configuration as the server reports it.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	Config runtime.RawExtension `json:"config,omitempty"`
	// Health is the provider's health as the server reports it.
	Health ProviderHealthStatus `json:"health"`
}

// ProviderHealthStatus represents the health status of a provider.
type ProviderHealthStatus struct {
	// Status is the server's verdict: OK, Error or Not Implemented.
	Status string `json:"status"`
	// Message explains the status.
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
