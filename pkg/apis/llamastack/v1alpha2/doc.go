// +k8s:deepcopy-gen=package
// +groupName=llamastack.io

// Package v1alpha2 is the v1alpha2 version of the llamastack.io API: the
// LlamaStackDistribution resource with typed providers, resources and state
// storage from which the controller generates the server's config.yaml, and
// the Kubernetes settings of v1alpha1 regrouped under networking and workload.
// It is the hub of conversion and the storage version; the CRD in artifacts/crd
// serves it beside v1alpha1, converted by the controller's webhook (the CRD's
// spec.conversion is added by hack/update-codegen.sh, as controller-gen has no
// marker for it).
//
// # Where each v1alpha1 field lives in v1alpha2
//
// Every v1alpha1 field has exactly one home (paths under spec unless noted; the
// conversion tests in v1alpha1 read this table and check it):
//
//	v1alpha1                                     v1alpha2
//	replicas                                     workload.replicas
//	server.distribution.name                     distribution.name
//	server.distribution.image                    distribution.image
//	server.containerSpec.name                    workload.overrides.containerName
//	server.containerSpec.port                    networking.port
//	server.containerSpec.resources               workload.resources
//	server.containerSpec.env                     workload.overrides.env
//	server.containerSpec.command                 workload.overrides.command
//	server.containerSpec.args                    workload.overrides.args
//	server.containerSpec.securityContext         workload.overrides.containerSecurityContext
//	server.workers                               workload.workers
//	server.podOverrides.serviceAccountName       workload.overrides.serviceAccountName
//	server.podOverrides.terminationGracePeriodSeconds
//	                                             workload.overrides.terminationGracePeriodSeconds
//	server.podOverrides.volumes                  workload.overrides.volumes
//	server.podOverrides.volumeMounts             workload.overrides.volumeMounts
//	server.podOverrides.securityContext          workload.overrides.securityContext
//	server.podDisruptionBudget.minAvailable      workload.podDisruptionBudget.minAvailable
//	server.podDisruptionBudget.maxUnavailable    workload.podDisruptionBudget.maxUnavailable
//	server.topologySpreadConstraints             workload.topologySpreadConstraints
//	server.autoscaling.minReplicas               workload.autoscaling.minReplicas
//	server.autoscaling.maxReplicas               workload.autoscaling.maxReplicas
//	server.autoscaling.targetCPUUtilizationPercentage
//	                                             workload.autoscaling.targetCPUUtilizationPercentage
//	server.autoscaling.targetMemoryUtilizationPercentage
//	                                             workload.autoscaling.targetMemoryUtilizationPercentage
//	server.storage.size                          workload.storage.size
//	server.storage.mountPath                     workload.storage.mountPath
//	server.storage.storageClassName              workload.storage.storageClassName
//	server.storage.accessModes                   workload.storage.accessModes
//	server.userConfig.configMapName              overrideConfig.configMapName
//	server.userConfig.configMapNamespace         overrideConfig.configMapNamespace
//	server.tlsConfig.caBundle.configMapName      networking.tls.caBundle.configMapName
//	server.tlsConfig.caBundle.configMapNamespace networking.tls.caBundle.configMapNamespace
//	server.tlsConfig.caBundle.configMapKeys      networking.tls.caBundle.configMapKeys
//	network.exposeRoute                          networking.expose.enabled
//	network.ingress.className                    networking.expose.className
//	network.ingress.host                         networking.expose.hostname
//	network.ingress.tlsSecretName                networking.expose.tlsSecretName
//	network.ingress.annotations                  networking.expose.annotations
//	network.allowedFrom.namespaces               networking.allowedFrom.namespaces
//	network.allowedFrom.labels                   networking.allowedFrom.labels
//	status.* (every field)                       status.* (same name and meaning)
//
// # Fields only v1alpha2 has
//
// These have no v1alpha1 home. An object read as v1alpha1 carries them in its
// annotation llamastack.io/conversion-data, and a v1alpha1 write (update, patch or
// apply of an object read in v1alpha1) brings each back unchanged, whatever else the
// write changed (the conversion tests read this table, check that it and the first
// one cover every v1alpha2 field, and fuzz it under random v1alpha1 edits):
//
//	v1alpha2 only                how it survives a v1alpha1 write
//	baseConfig                   restored whole
//	providers                    restored whole
//	resources                    restored whole
//	storage                      restored whole
//	disabled                     restored whole
//	networking.tls.enabled       restored; if the client removed server.tlsConfig, tls is kept to hold it
//	networking.tls.secretName    as networking.tls.enabled
//	networking.expose.type       restored; if the client removed network (or its exposeRoute and ingress), expose is kept to hold it, with enabled false
//	networking.expose.httpRoute  as networking.expose.type
//	networking.expose.route      as networking.expose.type
//	workload.rollback            restored whole
//	status.resolvedDistribution  restored whole
//	status.rollback              restored whole
//
// A field both versions have takes the v1alpha1 client's value where the client
// changed it, a cleared field included; where it did not, the value stays as stored,
// in the form only v1alpha2 can give it (expose.enabled left unset, an empty
// overrides). Reading the result back in v1alpha1 gives exactly what the client wrote:
// a tls or expose kept only for the fields above shows no tlsConfig or network.
// The annotation is the only memory of these fields in a v1alpha1 object: a write
// whose body drops it (a replace from a file of one's own), or sets an older one (a
// manifest that kept it), cannot restore them; the admission policy of artifacts/policy
// refuses such a write.
//
// Two of the moves change a default that only applies when the field's parent is
// present: v1alpha1's replicas defaults to 1 at the top of spec, v1alpha2's
// workload.replicas defaults to 1 inside workload, which itself defaults to {};
// v1alpha1's exposeRoute defaults to false, v1alpha2's expose.enabled defaults to
// true once expose is written (a conversion writes it out either way).
//
// # Where each v1alpha1 validation rule lives in v1alpha2
//
// Every field carried over keeps exactly its v1alpha1 schema (patterns, bounds,
// defaults and CEL rules), so an object valid in v1alpha1 converts to one valid
// in v1alpha2. The CEL rules: metadata.name at most 48 characters and a DNS-1035
// label (root, unchanged); exactly one of distribution name and image
// (distribution); minReplicas <= maxReplicas (workload.autoscaling); PDB budgets
// and their exclusion (workload.podDisruptionBudget); storage size above zero and
// mountPath absolute (workload.storage); accessModes values
// (workload.storage.accessModes); volumeMounts absolute
// (workload.overrides.volumeMounts); annotation keys qualified names
// (networking.expose.annotations); ConfigMap keys without ".."
// (networking.tls.caBundle.configMapKeys, and baseConfig.key).
package v1alpha2
