package status

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/probe"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
)

// Each condition's function, alone, on the inputs that decide it. The controller's
// fixture tests (its status_test.go and others) show them together through sync.

// availableDeployment is a Deployment of want replicas of which have are available,
// its status about its current spec; conds are its own conditions.
func availableDeployment(want, have int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(want)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: want, UpdatedReplicas: want,
			ReadyReplicas: have, AvailableReplicas: have, Conditions: conds},
	}
}

func boundPVC(phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "app-pvc"},
		Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
}

func withClaim(l *v1alpha2.LlamaStackDistribution) {
	l.Spec.Workload.Storage = &v1alpha2.PVCStorageSpec{}
}

func withWorkloadReplicas(n int32) func(*v1alpha2.LlamaStackDistribution) {
	return func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Replicas = ptr.To(n) }
}

var (
	aProblem = fault.Problem{Reason: v1alpha2.ReasonConfigMapNotFound, Message: "ConfigMap cfg not found"}
	deadline = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: v1alpha2.ReasonProgressDeadlineExceeded, Message: "ReplicaSet app-1 has timed out progressing."}
	crashing = &rollout.PodProblem{Reason: "CrashLoopBackOff", Message: "pod app-1-x: the server exited (1)"}
)

func TestDeploymentReadyCondition(t *testing.T) {
	for name, tc := range map[string]struct {
		mods []func(*v1alpha2.LlamaStackDistribution)
		obs  Observed
		want conditionUpdate
	}{
		"no Deployment yet": {
			want: setTo(metav1.ConditionFalse, v1alpha2.ReasonDeploymentPending, "Deployment is pending"),
		},
		"every replica available": {
			obs:  Observed{Deployment: availableDeployment(1, 1)},
			want: setTo(metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady, "Deployment is ready"),
		},
		"an HPA above the CR's count, the CR's count available": {
			mods: hubMods(withWorkloadReplicas(2)),
			obs:  Observed{Deployment: availableDeployment(4, 2)},
			want: setTo(metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady, "Deployment is ready"),
		},
		"scaled to zero": {
			mods: hubMods(withWorkloadReplicas(0)),
			obs:  Observed{Deployment: availableDeployment(0, 0)},
			want: setTo(metav1.ConditionTrue, v1alpha2.ReasonScaledToZero, "Deployment is scaled to zero"),
		},
		"a pod that does not start, in its words": {
			obs:  Observed{Deployment: availableDeployment(1, 0), Pod: crashing},
			want: setTo(metav1.ConditionFalse, crashing.Reason, crashing.Message),
		},
		"pods it cannot create come before a stuck pod": {
			obs: Observed{Deployment: availableDeployment(1, 0, appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure,
				Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota"}), Pod: crashing},
			want: setTo(metav1.ConditionFalse, v1alpha2.ReasonReplicaFailure, "Deployment cannot create pods (FailedCreate): quota"),
		},
		"out of time": {
			obs: Observed{Deployment: availableDeployment(1, 0, deadline)},
			want: setTo(metav1.ConditionFalse, v1alpha2.ReasonProgressDeadlineExceeded,
				"Deployment stopped making progress before enough replicas were available: "+deadline.Message),
		},
		"counting up": {
			mods: hubMods(withWorkloadReplicas(3)),
			obs:  Observed{Deployment: availableDeployment(3, 1)},
			want: setTo(metav1.ConditionFalse, v1alpha2.ReasonDeploymentScaling, "Deployment has 1 of 3 replicas available"),
		},
		"a problem while nothing serves is why": {
			obs:  Observed{Deployment: availableDeployment(1, 0), Service: &corev1.Service{}, Problems: []fault.Problem{aProblem}},
			want: setTo(metav1.ConditionFalse, aProblem.Reason, aProblem.Message),
		},
		"a problem while it serves as asked leaves it ready": {
			obs:  Observed{Deployment: availableDeployment(1, 1), Service: &corev1.Service{}, Problems: []fault.Problem{aProblem}},
			want: setTo(metav1.ConditionTrue, v1alpha2.ReasonDeploymentReady, "Deployment is ready"),
		},
		"a problem while it scales up, one replica serving: the count is why": {
			mods: hubMods(withWorkloadReplicas(2)),
			obs:  Observed{Deployment: availableDeployment(2, 1), Service: &corev1.Service{}, Problems: []fault.Problem{aProblem}},
			want: setTo(metav1.ConditionFalse, v1alpha2.ReasonDeploymentScaling, "Deployment has 1 of 2 replicas available"),
		},
		"a problem while the storage is unbound is why": {
			mods: hubMods(withClaim),
			obs: Observed{Deployment: availableDeployment(1, 1), Service: &corev1.Service{}, PVC: boundPVC(corev1.ClaimPending),
				Problems: []fault.Problem{aProblem}},
			want: setTo(metav1.ConditionFalse, aProblem.Reason, aProblem.Message),
		},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, deploymentReadyCondition(newLLSD("app", tc.mods...), tc.obs))
		})
	}
}

func TestProgressingCondition(t *testing.T) {
	rolledBack := &v1alpha2.RollbackStatus{}
	for name, tc := range map[string]struct {
		obs  Observed
		want conditionUpdate
	}{
		"no condition without a Deployment": {want: dropped},
		"rolled out": {
			obs:  Observed{Deployment: availableDeployment(1, 1)},
			want: setTo(metav1.ConditionTrue, v1alpha2.ReasonRolloutComplete, "Deployment has rolled out"),
		},
		"a new spec not yet seen": {
			obs: Observed{Deployment: func() *appsv1.Deployment {
				d := availableDeployment(1, 1)
				d.Generation = 3
				return d
			}()},
			want: setTo(metav1.ConditionTrue, v1alpha2.ReasonRollingOut, "Deployment rollout is starting"),
		},
		"a stuck pod names the hold-up while rolling": {
			obs: Observed{Deployment: availableDeployment(2, 1), Pod: crashing},
			want: setTo(metav1.ConditionTrue, crashing.Reason,
				crashing.Message+"; Deployment is rolling out: 1 of 2 replicas updated and available"),
		},
		"out of time": {
			obs: Observed{Deployment: availableDeployment(1, 0, deadline)},
			want: setTo(metav1.ConditionFalse, v1alpha2.ReasonProgressDeadlineExceeded,
				"Deployment rollout stopped making progress: "+deadline.Message),
		},
		"a change refused while it serves": {
			obs:  Observed{Deployment: availableDeployment(1, 1), Service: &corev1.Service{}, Problems: []fault.Problem{aProblem}},
			want: setTo(metav1.ConditionFalse, aProblem.Reason, aProblem.Message),
		},
		"rolled back and held": {
			obs: Observed{Deployment: availableDeployment(1, 1), Rollback: &rollout.Outcome{Status: rolledBack, Held: true}},
			want: setTo(metav1.ConditionFalse, v1alpha2.ReasonRolledBack, rollout.RolledBackMessage(rolledBack)+
				"; the Deployment keeps the template that served, its replica count follows the CR"),
		},
		"a rollback not done says why": {
			obs: Observed{Deployment: availableDeployment(1, 0, deadline), Rollback: &rollout.Outcome{Note: "nothing served before"}},
			want: setTo(metav1.ConditionFalse, v1alpha2.ReasonProgressDeadlineExceeded,
				"Deployment rollout stopped making progress: "+deadline.Message+"; nothing served before"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, progressingCondition(newLLSD("app"), tc.obs))
		})
	}
}

func TestHealthCheckCondition(t *testing.T) {
	providers := []v1alpha2.ProviderInfo{{API: "inference", ProviderID: "ollama"}}
	answer := func(info probe.Info) *probe.Result { return &probe.Result{Info: info} }
	served := Observed{Deployment: availableDeployment(1, 1), Service: &corev1.Service{}}
	with := func(o Observed, p *probe.Result) Observed { o.Probe = p; return o }
	for name, tc := range map[string]struct {
		probing   bool
		mods      []func(*v1alpha2.LlamaStackDistribution)
		obs       Observed
		previous  *metav1.Condition
		want      conditionUpdate
		providers providersUpdate
	}{
		"not probing: no condition, providers as they are": {obs: served, want: dropped, providers: keepProviders},
		"scaled to zero": {
			probing: true, mods: hubMods(withWorkloadReplicas(0)), obs: Observed{Deployment: availableDeployment(0, 0)},
			want: setTo(metav1.ConditionUnknown, v1alpha2.ReasonScaledToZero, "Scaled to zero: no server runs to ask"), providers: clearProviders,
		},
		"no replica available": {
			probing: true, obs: Observed{Deployment: availableDeployment(1, 0), Service: &corev1.Service{}},
			want: setTo(metav1.ConditionFalse, v1alpha2.ReasonServerNotAvailable, "No replica of the server is available"), providers: clearProviders,
		},
		"not our Service": {
			probing: true, obs: Observed{Deployment: availableDeployment(1, 1)},
			want: setTo(metav1.ConditionUnknown, v1alpha2.ReasonHealthCheckPending,
				"Not asked: the server is asked through Service app-service, which is not the controller's (or not made yet)"),
			providers: clearProviders,
		},
		"no answer yet": {
			probing: true, obs: served,
			want: setTo(metav1.ConditionUnknown, v1alpha2.ReasonHealthCheckPending, "Waiting for the server's first health check"), providers: keepProviders,
		},
		"no answer yet after a restart keeps the last one": {
			probing: true, obs: served, previous: &metav1.Condition{Reason: v1alpha2.ReasonHealthCheckPassed},
			want: keepAsIs, providers: keepProviders,
		},
		"healthy with providers": {
			probing: true, obs: with(served, answer(probe.Info{Healthy: true, Providers: providers, ProvidersKnown: true})),
			want:      setTo(metav1.ConditionTrue, v1alpha2.ReasonHealthCheckPassed, "Health check passed"),
			providers: providersUpdate{op: setCondition, providers: providers},
		},
		"healthy, providers not answered": {
			probing: true, obs: with(served, answer(probe.Info{Healthy: true})),
			want: setTo(metav1.ConditionTrue, v1alpha2.ReasonHealthCheckPassed, "Health check passed"), providers: keepProviders,
		},
		"unhealthy, in its words": {
			probing: true, obs: with(served, answer(probe.Info{HealthMessage: "/v1/health answered 503"})),
			want: setTo(metav1.ConditionFalse, v1alpha2.ReasonHealthCheckFailed, "/v1/health answered 503"), providers: clearProviders,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, gotProviders := healthCheckCondition(tc.probing, newLLSD("app", tc.mods...), tc.obs, tc.previous)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.providers, gotProviders)
		})
	}
}

func TestServiceReadyCondition(t *testing.T) {
	l := newLLSD("app")
	assert.Equal(t, setTo(metav1.ConditionTrue, v1alpha2.ReasonServiceReady, "Service is ready"),
		serviceReadyCondition(l, Observed{Service: &corev1.Service{}}))
	assert.Equal(t, setTo(metav1.ConditionFalse, v1alpha2.ReasonNotAttempted,
		"Service app-service is not created while the CR has a problem (ConfigMapNotFound)"),
		serviceReadyCondition(l, Observed{Problems: []fault.Problem{aProblem}}))
	assert.Equal(t, setTo(metav1.ConditionFalse, v1alpha2.ReasonServiceFailed, "Service app-service is not created yet"),
		serviceReadyCondition(l, Observed{}))
}

func TestStorageConditions(t *testing.T) {
	deleting := boundPVC(corev1.ClaimBound)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	for name, tc := range map[string]struct {
		mods                   []func(*v1alpha2.LlamaStackDistribution)
		obs                    Observed
		ready, inSync, warning conditionUpdate
	}{
		"no storage: none of them": {obs: Observed{PVC: boundPVC(corev1.ClaimBound)}, ready: dropped, inSync: dropped, warning: dropped},
		"bound and in sync": {
			mods:   hubMods(withClaim),
			obs:    Observed{PVC: boundPVC(corev1.ClaimBound), Storage: &children.StorageSync{InSync: true, Reason: "InSync", Message: "as asked"}},
			ready:  setTo(metav1.ConditionTrue, v1alpha2.ReasonStorageReady, "Storage is ready"),
			inSync: setTo(metav1.ConditionTrue, "InSync", "as asked"), warning: dropped,
		},
		"pending, not looked at": {
			mods:  hubMods(withClaim),
			obs:   Observed{PVC: boundPVC("")},
			ready: setTo(metav1.ConditionFalse, v1alpha2.ReasonStorageFailed, "PVC is not bound: Pending"), inSync: keepAsIs, warning: dropped,
		},
		"a resize refused": {
			mods:   hubMods(withClaim),
			obs:    Observed{PVC: boundPVC(corev1.ClaimBound), Storage: &children.StorageSync{Reason: "ResizeRefused", Message: "no expansion"}},
			ready:  setTo(metav1.ConditionTrue, v1alpha2.ReasonStorageReady, "Storage is ready"),
			inSync: setTo(metav1.ConditionFalse, "ResizeRefused", "no expansion"), warning: dropped,
		},
		"being deleted": {
			mods: hubMods(withClaim),
			obs:  Observed{PVC: deleting},
			ready: setTo(metav1.ConditionFalse, v1alpha2.ReasonStorageFailed,
				"PersistentVolumeClaim app-pvc is being deleted: it goes once no pod mounts it, then a new one is made"),
			inSync: keepAsIs, warning: dropped,
		},
		"not made yet": {
			mods:   hubMods(withClaim),
			ready:  setTo(metav1.ConditionFalse, v1alpha2.ReasonStorageFailed, "PersistentVolumeClaim app-pvc is not created yet"),
			inSync: keepAsIs, warning: dropped,
		},
		"not attempted for a problem": {
			mods: hubMods(withClaim),
			obs:  Observed{Problems: []fault.Problem{aProblem}},
			ready: setTo(metav1.ConditionFalse, v1alpha2.ReasonNotAttempted,
				"PersistentVolumeClaim app-pvc is not created while the CR has a problem (ConfigMapNotFound)"),
			inSync: keepAsIs, warning: dropped,
		},
		"ReadWriteOnce shared by two replicas": {
			mods:  hubMods(withClaim, withWorkloadReplicas(2)),
			obs:   Observed{PVC: boundPVC(corev1.ClaimBound)},
			ready: setTo(metav1.ConditionTrue, v1alpha2.ReasonStorageReady, "Storage is ready"), inSync: keepAsIs,
			warning: setTo(metav1.ConditionTrue, v1alpha2.ReasonReadWriteOnceShared,
				"ReadWriteOnce storage with more than one replica or autoscaling: pods scheduled to another node cannot mount the volume; use storage.accessModes [ReadWriteMany] or one replica"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := newLLSD("app", tc.mods...)
			assert.Equal(t, tc.ready, storageReadyCondition(l, tc.obs), "StorageReady")
			assert.Equal(t, tc.inSync, storageInSyncCondition(l, tc.obs), "StorageInSync")
			assert.Equal(t, tc.warning, storageAccessWarningCondition(l, tc.obs), "StorageAccessWarning")
		})
	}
}

func TestVolumeMountWarningCondition(t *testing.T) {
	nested := []children.MountNesting{{Outer: children.ServerMount{VolumeMount: corev1.VolumeMount{MountPath: "/data"}}, Inner: children.ServerMount{VolumeMount: corev1.VolumeMount{MountPath: "/data/x"}}, Hidden: "/data/x"}}
	assert.Equal(t, keepAsIs, volumeMountWarningCondition(Observed{NestedMounts: nested}), "unchecked: the last report stands")
	assert.Equal(t, dropped, volumeMountWarningCondition(Observed{MountsChecked: true}))
	got := volumeMountWarningCondition(Observed{MountsChecked: true, NestedMounts: nested})
	assert.Equal(t, setTo(metav1.ConditionTrue, v1alpha2.ReasonNestedMountPaths, children.NestedMountsMessage(nested)), got)
}

func TestConfigGeneratedConditionAndResolvedDistribution(t *testing.T) {
	prev := &v1alpha2.ResolvedDistributionStatus{ServerVersion: "0.7.1"}
	resolved := v1alpha2.ResolvedDistributionStatus{ServerVersion: "1.3.0", ConfigSource: "distribution starter"}
	ok := &Generation{Resolved: resolved, ConfigMapName: llsd.GeneratedConfigMapName(newLLSD("app"), strings.Repeat("a", 64))}
	failed := &Generation{Problem: &fault.Problem{Reason: v1alpha2.ReasonConfigInvalid, Message: "providers.inference: unknown provider"}}
	generated := []metav1.Condition{{Type: v1alpha2.ConditionConfigGenerated}}
	for name, tc := range map[string]struct {
		// generates: the CR asks for a generated config (a CR with spec.providers).
		generates bool
		obs       Observed
		conds     []metav1.Condition
		want      conditionUpdate
		resolved  *v1alpha2.ResolvedDistributionStatus
	}{
		"never generated keeps what it has": {want: dropped, resolved: prev},
		"stopped generating drops it":       {conds: generated, want: dropped},
		"not run":                           {generates: true, want: keepAsIs, resolved: prev},
		"failed: what runs stays described": {
			generates: true, obs: Observed{Generation: failed},
			want: setTo(metav1.ConditionFalse, failed.Problem.Reason, failed.Problem.Message), resolved: prev,
		},
		"generated": {
			generates: true, obs: Observed{Generation: ok},
			want: setTo(metav1.ConditionTrue, v1alpha2.ReasonConfigGenerated,
				"Generated ConfigMap "+ok.ConfigMapName+" for server 1.3.0 from distribution starter"),
			resolved: &resolved,
		},
		"generated, held by a problem": {
			generates: true, obs: Observed{Generation: ok, Problems: []fault.Problem{aProblem}},
			want: setTo(metav1.ConditionTrue, v1alpha2.ReasonConfigGenerated,
				"Generated a config for server 1.3.0 from distribution starter; it is not rolled out while the CR has a problem (ConfigMapNotFound)"),
			resolved: prev,
		},
		"generated, rolled back": {
			generates: true, obs: Observed{Generation: ok, Rollback: &rollout.Outcome{Held: true}},
			want: setTo(metav1.ConditionTrue, v1alpha2.ReasonConfigGenerated,
				"Generated ConfigMap "+ok.ConfigMapName+" for server 1.3.0 from distribution starter"+
					"; its rollout failed and was rolled back: the Deployment runs the config that served before (Progressing)"),
			resolved: &resolved,
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := newLLSD("app")
			if tc.generates {
				l.Spec.Providers = &v1alpha2.ProvidersSpec{Inference: []v1alpha2.ProviderConfig{{Provider: "vllm", Endpoint: "http://vllm:8000/v1"}}}
			}
			assert.Equal(t, tc.want, configGeneratedCondition(l, tc.obs))
			assert.Equal(t, tc.resolved, resolvedDistribution(l, tc.obs, prev, tc.conds))
		})
	}
}

func TestReadyCondition(t *testing.T) {
	stuck := []metav1.Condition{{Type: v1alpha2.ConditionDeploymentReady, Status: metav1.ConditionFalse,
		Reason: crashing.Reason, Message: crashing.Message}}
	scaling := []metav1.Condition{{Type: v1alpha2.ConditionDeploymentReady, Status: metav1.ConditionFalse,
		Reason: v1alpha2.ReasonDeploymentScaling, Message: "Deployment has 0 of 1 replicas available"}}
	serves := Observed{Deployment: availableDeployment(1, 1), Service: &corev1.Service{}}
	for name, tc := range map[string]struct {
		mods  []func(*v1alpha2.LlamaStackDistribution)
		obs   Observed
		conds []metav1.Condition
		phase v1alpha2.Phase
		want  conditionUpdate
	}{
		"a problem while nothing serves": {
			obs:   Observed{Problems: []fault.Problem{aProblem}},
			phase: v1alpha2.PhaseFailed, want: setTo(metav1.ConditionFalse, aProblem.Reason, aProblem.Message),
		},
		"a change refused while it serves": {
			obs:   Observed{Deployment: serves.Deployment, Service: serves.Service, Problems: []fault.Problem{aProblem}},
			phase: v1alpha2.PhaseReady, want: setTo(metav1.ConditionTrue, v1alpha2.ReasonReady, "LlamaStackDistribution is ready"),
		},
		"a change refused while it scales up": {
			mods: hubMods(withWorkloadReplicas(2)),
			obs:  Observed{Deployment: availableDeployment(2, 1), Service: &corev1.Service{}, Problems: []fault.Problem{aProblem}},
			conds: []metav1.Condition{{Type: v1alpha2.ConditionDeploymentReady, Status: metav1.ConditionFalse,
				Reason: v1alpha2.ReasonDeploymentScaling, Message: "Deployment has 1 of 2 replicas available"}},
			phase: v1alpha2.PhaseInitializing,
			want:  setTo(metav1.ConditionFalse, v1alpha2.ReasonNotReady, "Deployment has 1 of 2 replicas available"),
		},
		"no Deployment": {
			phase: v1alpha2.PhasePending, want: setTo(metav1.ConditionFalse, v1alpha2.ReasonNotReady, "Deployment is pending"),
		},
		"serves": {
			obs:   serves,
			phase: v1alpha2.PhaseReady, want: setTo(metav1.ConditionTrue, v1alpha2.ReasonReady, "LlamaStackDistribution is ready"),
		},
		"scaled to zero": {
			mods: hubMods(withWorkloadReplicas(0)), obs: Observed{Deployment: availableDeployment(0, 0), Service: &corev1.Service{}},
			phase: v1alpha2.PhaseReady, want: setTo(metav1.ConditionTrue, v1alpha2.ReasonScaledToZero, scaledToZeroMessage),
		},
		"a stuck Deployment says why": {
			obs: Observed{Deployment: availableDeployment(1, 0), Service: &corev1.Service{}}, conds: stuck,
			phase: v1alpha2.PhaseFailed, want: setTo(metav1.ConditionFalse, crashing.Reason, crashing.Message),
		},
		"coming up, the first component not True": {
			obs: Observed{Deployment: availableDeployment(1, 0), Service: &corev1.Service{}}, conds: scaling,
			phase: v1alpha2.PhaseInitializing,
			want:  setTo(metav1.ConditionFalse, v1alpha2.ReasonNotReady, "Deployment has 0 of 1 replicas available"),
		},
		"no Service: not ready": {
			obs: Observed{Deployment: availableDeployment(1, 1)},
			conds: []metav1.Condition{{Type: v1alpha2.ConditionServiceReady, Status: metav1.ConditionFalse,
				Message: "Service app-service is not created yet"}},
			phase: v1alpha2.PhaseInitializing,
			want:  setTo(metav1.ConditionFalse, v1alpha2.ReasonNotReady, "Service app-service is not created yet"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			phase, got := readyCondition(newLLSD("app", tc.mods...), tc.obs, tc.conds)
			assert.Equal(t, tc.phase, phase)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestVersionStatus(t *testing.T) {
	then, now := metav1.Unix(100, 0), metav1.Unix(200, 0)
	prev := v1alpha2.VersionInfo{OperatorVersion: "v1", LlamaStackServerVersion: "1.3.0", LastUpdated: &then}
	assert.Equal(t, prev, versionStatus(prev, "v1", nil, now), "nothing new: the time stands")
	assert.Equal(t, prev, versionStatus(prev, "v1", &probe.Result{Info: probe.Info{Version: "1.3.0"}}, now))
	assert.Equal(t, v1alpha2.VersionInfo{OperatorVersion: "v1", LlamaStackServerVersion: "1.4.0", LastUpdated: &now},
		versionStatus(prev, "v1", &probe.Result{Info: probe.Info{Version: "1.4.0"}}, now), "the server's answer")
	assert.Equal(t, v1alpha2.VersionInfo{OperatorVersion: "v2", LlamaStackServerVersion: "1.3.0", LastUpdated: &now},
		versionStatus(prev, "v2", &probe.Result{}, now), "an answer without a version keeps the last one")
}

func TestRouteURL(t *testing.T) {
	assert.Nil(t, routeURL(newLLSD("app"), Observed{}))
	exposed := newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking = &v1alpha2.NetworkingSpec{Expose: &v1alpha2.ExposeSpec{}}
	})
	assert.Equal(t, ptr.To(""), routeURL(exposed, Observed{}), "asked for, not admitted yet")
}

// What reaches a Deployment whose template is held: the CR's count, zero included, or
// none of it with autoscaling. The count is not named: a scale does not change the
// message, so it does not tell the held problem again.
func TestReplicasNote(t *testing.T) {
	for _, c := range []struct {
		want string
		l    *v1alpha2.LlamaStackDistribution
	}{
		{"its replica count follows the CR", newLLSD("app")},
		{"its replica count follows the CR", newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Replicas = ptr.To[int32](0) })},
		{"its replica count follows the CR", newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Replicas = ptr.To[int32](3) })},
		{"its replica count is left to the HorizontalPodAutoscaler", newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
			l.Spec.Workload.Replicas = ptr.To[int32](3)
			l.Spec.Workload.Autoscaling = &v1alpha2.AutoscalingSpec{MaxReplicas: 5}
		})},
	} {
		assert.Equal(t, c.want, ReplicasNote(c.l))
	}
}
