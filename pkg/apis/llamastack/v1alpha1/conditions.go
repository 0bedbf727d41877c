package v1alpha1

import "github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"

// The condition types and reasons are the same in both versions (status converts
// field for field): v1alpha2, the hub, defines them and documents each.

// Condition types of a LlamaStackDistribution.
const (
	ConditionReady                = v1alpha2.ConditionReady
	ConditionDeploymentReady      = v1alpha2.ConditionDeploymentReady
	ConditionProgressing          = v1alpha2.ConditionProgressing
	ConditionStorageReady         = v1alpha2.ConditionStorageReady
	ConditionServiceReady         = v1alpha2.ConditionServiceReady
	ConditionHealthCheck          = v1alpha2.ConditionHealthCheck
	ConditionStorageInSync        = v1alpha2.ConditionStorageInSync
	ConditionStorageAccessWarning = v1alpha2.ConditionStorageAccessWarning
	ConditionVolumeMountWarning   = v1alpha2.ConditionVolumeMountWarning
)

// Condition reasons of a LlamaStackDistribution.
const (
	ReasonDeploymentReady            = v1alpha2.ReasonDeploymentReady
	ReasonDeploymentPending          = v1alpha2.ReasonDeploymentPending
	ReasonDeploymentScaling          = v1alpha2.ReasonDeploymentScaling
	ReasonDeploymentFailed           = v1alpha2.ReasonDeploymentFailed
	ReasonStorageReady               = v1alpha2.ReasonStorageReady
	ReasonStorageFailed              = v1alpha2.ReasonStorageFailed
	ReasonServiceReady               = v1alpha2.ReasonServiceReady
	ReasonServiceFailed              = v1alpha2.ReasonServiceFailed
	ReasonReady                      = v1alpha2.ReasonReady
	ReasonNotReady                   = v1alpha2.ReasonNotReady
	ReasonTerminating                = v1alpha2.ReasonTerminating
	ReasonScaledToZero               = v1alpha2.ReasonScaledToZero
	ReasonReplicaFailure             = v1alpha2.ReasonReplicaFailure
	ReasonRollingOut                 = v1alpha2.ReasonRollingOut
	ReasonRolloutComplete            = v1alpha2.ReasonRolloutComplete
	ReasonProgressDeadlineExceeded   = v1alpha2.ReasonProgressDeadlineExceeded
	ReasonRolledBack                 = v1alpha2.ReasonRolledBack
	ReasonUnschedulable              = v1alpha2.ReasonUnschedulable
	ReasonCreateContainerConfigError = v1alpha2.ReasonCreateContainerConfigError
	ReasonImagePullBackOff           = v1alpha2.ReasonImagePullBackOff
	ReasonInvalidImageName           = v1alpha2.ReasonInvalidImageName
	ReasonCreateContainerError       = v1alpha2.ReasonCreateContainerError
	ReasonRunContainerError          = v1alpha2.ReasonRunContainerError
	ReasonCrashLoopBackOff           = v1alpha2.ReasonCrashLoopBackOff
	ReasonPodNotStarting             = v1alpha2.ReasonPodNotStarting
	ReasonHealthCheckPassed          = v1alpha2.ReasonHealthCheckPassed
	ReasonHealthCheckFailed          = v1alpha2.ReasonHealthCheckFailed
	ReasonHealthCheckPending         = v1alpha2.ReasonHealthCheckPending
	ReasonServerNotAvailable         = v1alpha2.ReasonServerNotAvailable
	ReasonStorageInSync              = v1alpha2.ReasonStorageInSync
	ReasonShrinkRefused              = v1alpha2.ReasonShrinkRefused
	ReasonStorageFieldImmutable      = v1alpha2.ReasonStorageFieldImmutable
	ReasonResizeRefused              = v1alpha2.ReasonResizeRefused
	ReasonResizing                   = v1alpha2.ReasonResizing
	ReasonReadWriteOnceShared        = v1alpha2.ReasonReadWriteOnceShared
	ReasonNestedMountPaths           = v1alpha2.ReasonNestedMountPaths
	ReasonDistributionNotSupported   = v1alpha2.ReasonDistributionNotSupported
	ReasonDistributionNotPublished   = v1alpha2.ReasonDistributionNotPublished
	ReasonConfigMapNotFound          = v1alpha2.ReasonConfigMapNotFound
	ReasonConfigMapKeyMissing        = v1alpha2.ReasonConfigMapKeyMissing
	ReasonConfigMapNotAllowed        = v1alpha2.ReasonConfigMapNotAllowed
	ReasonCABundleInvalid            = v1alpha2.ReasonCABundleInvalid
	ReasonTLSSecretNotFound          = v1alpha2.ReasonTLSSecretNotFound
	ReasonNotAttempted               = v1alpha2.ReasonNotAttempted
	ReasonTLSSecretInvalid           = v1alpha2.ReasonTLSSecretInvalid
	ReasonResourceNotOwned           = v1alpha2.ReasonResourceNotOwned
	ReasonResourceInvalid            = v1alpha2.ReasonResourceInvalid
)
