package v1alpha2

// Condition types of a LlamaStackDistribution.
const (
	// ConditionReady is the aggregate: the server is running at the desired count,
	// whatever spec it runs, and reachable through its Service.
	ConditionReady = "Ready"
	// ConditionDeploymentReady reports the server Deployment and, while it does not serve
	// as asked, every user error that keeps it from converging.
	ConditionDeploymentReady = "DeploymentReady"
	// ConditionProgressing reports a rollout of the server Deployment, as the Deployment's
	// own condition of that name does: True while rolling out and once complete (by its
	// reason), False when the rollout stopped making progress; and False with a user
	// error's reason when a change is refused while the Deployment serves as asked.
	ConditionProgressing = "Progressing"
	// ConditionStorageReady reports the PersistentVolumeClaim (present only with spec.workload.storage).
	ConditionStorageReady = "StorageReady"
	// ConditionServiceReady reports the Service.
	ConditionServiceReady = "ServiceReady"
	// ConditionHealthCheck reports the running server's own /v1/health answer.
	ConditionHealthCheck = "HealthCheck"
	// ConditionStorageInSync reports whether the PersistentVolumeClaim matches
	// spec.workload.storage: it cannot shrink, and its class and access modes are fixed.
	ConditionStorageInSync = "StorageInSync"
	// ConditionStorageAccessWarning is True while ReadWriteOnce storage is combined with
	// more than one replica or autoscaling: pods on other nodes cannot mount the volume.
	ConditionStorageAccessWarning = "StorageAccessWarning"
	// ConditionVolumeMountWarning is True while a volume of the server container is
	// mounted inside the directory of another and hides part of it, one of them being
	// the controller's (storage, user config, CA bundle). Nested mounts are legal, so
	// the pod still runs.
	ConditionVolumeMountWarning = "VolumeMountWarning"
	// ConditionConfigGenerated reports the server's config.yaml: generated from
	// the spec and its base, taken from overrideConfig, or why neither could be
	// done. While False, what runs is kept.
	ConditionConfigGenerated = "ConfigGenerated"
	// ConditionExposed reports the HTTPRoute of networking.expose.type HTTPRoute: whether
	// every Gateway it names has accepted it. Absent for an Ingress.
	ConditionExposed = "Exposed"
)

// Condition reasons of a LlamaStackDistribution.
const (
	ReasonDeploymentReady   = "DeploymentReady"
	ReasonDeploymentPending = "DeploymentPending"
	ReasonDeploymentScaling = "DeploymentScaling"
	ReasonDeploymentFailed  = "DeploymentFailed"
	ReasonStorageReady      = "StorageReady"
	ReasonStorageFailed     = "StorageFailed"
	ReasonServiceReady      = "ServiceReady"
	ReasonServiceFailed     = "ServiceFailed"
	// ReasonNotAttempted: the child is not created while the CR has a problem, which
	// stops the children where they are.
	ReasonNotAttempted = "NotAttempted"
	ReasonReady        = "Ready"
	ReasonNotReady     = "NotReady"
	ReasonTerminating  = "Terminating"

	// ReasonScaledToZero: spec.replicas is 0 (without autoscaling): no server runs, and
	// that is the state asked for, so the CR is Ready.
	ReasonScaledToZero = "ScaledToZero"
	// ReasonReplicaFailure: the Deployment cannot create its pods (its own ReplicaFailure
	// condition, e.g. a missing ServiceAccount or an exceeded quota).
	ReasonReplicaFailure = "ReplicaFailure"

	ReasonRollingOut               = "RollingOut"
	ReasonRolloutComplete          = "RolloutComplete"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonRolledBack: the rollout of a new image, config or env failed and the
	// controller put back the last that served (status.rollback says why).
	ReasonRolledBack = "RolledBack"

	// A server pod that does not start, in its own words: while the Deployment is not
	// available, DeploymentReady and Ready carry the reason the scheduler or the
	// kubelet gives for one of the current pods. These are the usual ones; another
	// reason the kubelet gives a waiting container is reported as it is.

	// ReasonUnschedulable: the scheduler finds no node for the pod (PodScheduled False).
	ReasonUnschedulable = "Unschedulable"
	// ReasonCreateContainerConfigError: the kubelet cannot build the container's
	// configuration, e.g. a Secret or ConfigMap (or a key of one) the env refers to is missing.
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	// ReasonImagePullBackOff: the image cannot be pulled (the kubelet's ErrImagePull,
	// RegistryUnavailable and SignatureValidationFailed, and the back-off between
	// attempts, are one reason, so the status does not flip at every attempt).
	ReasonImagePullBackOff = "ImagePullBackOff"
	// ReasonInvalidImageName: the image reference cannot be parsed.
	ReasonInvalidImageName = "InvalidImageName"
	// ReasonCreateContainerError and ReasonRunContainerError: the container runtime
	// cannot create or start the container.
	ReasonCreateContainerError = "CreateContainerError"
	ReasonRunContainerError    = "RunContainerError"
	// ReasonCrashLoopBackOff: the container keeps exiting; the message says how it last exited.
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	// ReasonPodNotStarting stands for a kubelet reason that is not a valid condition reason.
	ReasonPodNotStarting = "PodNotStarting"

	ReasonHealthCheckPassed  = "HealthCheckPassed"
	ReasonHealthCheckFailed  = "HealthCheckFailed"
	ReasonHealthCheckPending = "HealthCheckPending"
	// ReasonServerNotAvailable: no replica is available to ask.
	ReasonServerNotAvailable = "ServerNotAvailable"

	ReasonStorageInSync         = "InSync"
	ReasonShrinkRefused         = "ShrinkRefused"
	ReasonStorageFieldImmutable = "StorageFieldImmutable"
	ReasonResizeRefused         = "ResizeRefused"
	ReasonResizing              = "Resizing"
	ReasonReadWriteOnceShared   = "ReadWriteOnceShared"

	// ReasonNestedMountPaths: a volume mount lies inside another's directory.
	ReasonNestedMountPaths = "NestedMountPaths"

	// User errors: the spec or its environment needs a change; the controller waits for it.
	ReasonDistributionNotSupported = "DistributionNotSupported"
	// ReasonDistributionNotPublished: the distribution is known but has no published
	// image (its images were removed with docker.io/llamastack, and never moved to
	// docker.io/ogxai); image-overrides or spec.distribution.image can still run one.
	ReasonDistributionNotPublished = "DistributionNotPublished"
	ReasonConfigMapNotFound        = "ConfigMapNotFound"
	ReasonConfigMapKeyMissing      = "ConfigMapKeyMissing"
	ReasonConfigMapNotAllowed      = "ConfigMapNotAllowed"
	// ReasonTLSSecretNotFound: spec.networking.tls.secretName names no Secret.
	ReasonTLSSecretNotFound = "TLSSecretNotFound"
	// ReasonTLSSecretInvalid: the TLS Secret lacks tls.crt or tls.key, they do not load, the
	// certificate is not valid now (expired, or not yet valid), or ca.crt is not certificates.
	ReasonTLSSecretInvalid = "TLSSecretInvalid"
	// ReasonCABundleInvalid: the CA bundle keys or certificates are not usable.
	ReasonCABundleInvalid  = "CABundleInvalid"
	ReasonResourceNotOwned = "ResourceNotOwned"
	// ReasonSpecInvalid: the spec breaks a rule of the CRD that a write in
	// llamastack.io/v1alpha1 could get around before the admission policy of
	// artifacts/policy judged it (overrideConfig beside providers, say); the message
	// names the field to remove. What runs is kept until then.
	ReasonSpecInvalid = "SpecInvalid"
	// ReasonResourceInvalid: the API server rejected a child built from the spec (for
	// example a workload.overrides volume named like one of the controller's).
	ReasonResourceInvalid = "ResourceInvalid"

	// ReasonConfigGenerated: the config was generated, or overrideConfig used.
	ReasonConfigGenerated = "ConfigGenerated"
	// ReasonBaseConfigRequired: the controller knows no base config for the
	// image (a direct image, or an unknown server version) and baseConfig is unset.
	ReasonBaseConfigRequired = "BaseConfigRequired"
	// ReasonConfigInvalid: the spec cannot be applied to the base config (for
	// example two secret references mapping to one environment variable).
	ReasonConfigInvalid = "ConfigInvalid"
	// ReasonServerVersionNotSupported: the server version that would read the
	// config has a shape the controller does not generate (0.2.x, or newer
	// than the versions it knows); overrideConfig still works.
	ReasonServerVersionNotSupported = "ServerVersionNotSupported"

	// ReasonRouteAccepted: every Gateway the route names has accepted it.
	ReasonRouteAccepted = "Accepted"
	// ReasonRouteNotAccepted: a Gateway refused the route, or cannot resolve its backend.
	ReasonRouteNotAccepted = "NotAccepted"
	// ReasonRoutePending: a Gateway the route names has not reported on it yet.
	ReasonRoutePending = "Pending"
	// ReasonGatewayNotFound: none of the Gateways the HTTPRoute names exists; the
	// route waits for one to be created.
	ReasonGatewayNotFound = "GatewayNotFound"
	// ReasonAPINotServed: the cluster does not serve the API of the kind asked for
	// (gateway.networking.k8s.io/v1 for an HTTPRoute).
	ReasonAPINotServed = "APINotServed"
	// ReasonBackendTLSNotServed: the route is to a server that serves TLS, and the
	// cluster does not serve gateway.networking.k8s.io/v1 BackendTLSPolicy, which tells
	// the Gateway to speak TLS to it: the Gateway would send plain HTTP to an HTTPS port.
	ReasonBackendTLSNotServed = "BackendTLSNotServed"
)
