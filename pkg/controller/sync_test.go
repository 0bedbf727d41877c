package controller

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// The first sync of a minimal CR applies its Deployment and Service, exactly as their
// builders make them, and writes its status; the next sync sends nothing.
func TestCreateThenNoOp(t *testing.T) {
	l := newLLSD("demo")
	f := newFixture(t, l)
	image := revision.BuiltinDistributions()["starter"]
	checkWrites(t, f.sync("demo"), []expectedWrite{
		{"patch", "deployments", "demo", children.NewDeployment(l, revision.Inputs{Image: image, Replicas: ptr.To(int32(1)),
			ServerVersion: revision.ImageServerVersion(image), Distro: "starter"})},
		{"patch", "services", "demo-service", children.NewService(l, children.AskedListening(l, revision.ImageServerVersion(image)))},
		{"update", "llamastackdistributions/status", "demo", nil},
	})
	require.Empty(t, describe(f.sync("demo")))
}

// A child the API server rejects as invalid (here a podOverrides volume without a
// source, which only the API server's validation catches) is a user error: a condition
// and an Event, not a retry loop.
func TestInvalidChildIsAUserError(t *testing.T) {
	f := newFixture(t, newLLSDv1("demo", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{Volumes: []corev1.Volume{{Name: "data"}}}
	}))
	f.kubeclient.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "demo",
			field.ErrorList{field.Required(field.NewPath("spec", "template", "spec", "volumes").Index(1), "must specify a volume type")})
	})
	f.sync("demo") // no error returned: nothing to retry until the spec changes

	l := f.llsd("demo")
	assert.Equal(t, v1alpha2.PhaseFailed, l.Status.Phase)
	cond := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionDeploymentReady)
	require.NotNil(t, cond)
	assert.Equal(t, v1alpha2.ReasonResourceInvalid, cond.Reason)
	assert.Contains(t, cond.Message, "must specify a volume type")
	assert.True(t, hasEvent(f.events(), "Warning ResourceInvalid"))
}

// A user volume or mount that collides with the controller's is reported before any
// apply: the API server would reject the Deployment (found by FuzzBuilders).
func TestPodConflictIsReportedWithoutApplying(t *testing.T) {
	tests := map[string]struct {
		edit func(*v1alpha1.LlamaStackDistribution)
		want string
	}{
		"volume named like the controller's": {func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{Volumes: []corev1.Volume{{Name: "lls-storage",
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}
		}, `the volume name "lls-storage" is used by the controller`},
		"mount at the storage path": {func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{
				Volumes:      []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/.llama"}},
			}
		}, `two volumes would be mounted at one directory, /.llama, of the server container: the storage volume "lls-storage" at "/.llama" and spec.workload.overrides.volumeMounts[0] (volume "v"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "/.llama"`},
		// The API server compares mount paths as strings and would accept these: the CR
		// would go Ready with one volume hiding the other.
		"mount at the storage path with a trailing slash": {withMounts("/.llama/"),
			`the storage volume "lls-storage" at "/.llama" and spec.workload.overrides.volumeMounts[0] (volume "v0"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "/.llama/"`},
		"storage path with a dot segment at a mount's path": {func(l *v1alpha1.LlamaStackDistribution) {
			withStorageAt("/.llama/./")(l)
			withMounts("/.llama")(l)
		}, `the storage volume "lls-storage" at "/.llama/./" (spec.workload.storage.mountPath; v1alpha1 spec.server.storage.mountPath) and spec.workload.overrides.volumeMounts[0] (volume "v0"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "/.llama"`},
		"mount at the user config path with a double slash": {func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "cfg"}
			withMounts("/etc//llama-stack")(l)
		}, `the user config volume "user-config" at "/etc/llama-stack/" and spec.workload.overrides.volumeMounts[0] (volume "v0"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "/etc//llama-stack"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, newLLSDv1("demo", tc.edit), configMap(testNamespace, "cfg", map[string]string{llsd.UserConfigKey: startingUserConfig}, nil))
			assert.NotContains(t, describe(f.sync("demo")), "patch deployments demo")
			l := f.llsd("demo")
			assert.Equal(t, v1alpha2.PhaseFailed, l.Status.Phase)
			cond := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionDeploymentReady)
			require.NotNil(t, cond)
			assert.Equal(t, v1alpha2.ReasonResourceInvalid, cond.Reason)
			assert.Contains(t, cond.Message, tc.want)
			assert.True(t, hasEvent(f.events(), "Warning ResourceInvalid"))
		})
	}
}

// A v1alpha2 CR whose features meet (storage, an Ingress, autoscaling, a disruption
// budget), from its first sync to Ready: every write is exactly what its builder makes
// of the CR, and the status is compared whole: phase, replicas, URLs and each
// condition's status, reason and message.
func TestWholeObjectsOfACRWithStorageExposureAndAutoscaling(t *testing.T) {
	l := newLLSD("demo", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Workload.Storage = &v1alpha2.PVCStorageSpec{}
		l.Spec.Workload.Autoscaling = &v1alpha2.AutoscalingSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 4}
		l.Spec.Workload.PodDisruptionBudget = &v1alpha2.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
		l.Spec.Networking = &v1alpha2.NetworkingSpec{Expose: &v1alpha2.ExposeSpec{Hostname: "llama.example.com"}}
	})
	f := newFixture(t, l)
	h := f.llsd("demo")
	image := revision.BuiltinDistributions()["starter"]
	version := revision.ImageServerVersion(image)
	checkWrites(t, f.sync("demo"), []expectedWrite{
		{"patch", "persistentvolumeclaims", "demo-pvc", children.NewPVC(h)},
		{"patch", "services", "demo-service", children.NewService(h, children.AskedListening(h, version))},
		{"patch", "deployments", "demo", children.NewDeployment(h, revision.Inputs{Image: image, Replicas: ptr.To[int32](2),
			ServerVersion: version, Distro: "starter"})},
		{"patch", "horizontalpodautoscalers", "demo-hpa", children.NewHPA(h)},
		{"patch", "poddisruptionbudgets", "demo-pdb", children.NewPDB(h)},
		{"patch", "ingresses", "demo-ingress", children.NewIngress(h)},
		{"update", "llamastackdistributions/status", "demo", nil},
	})

	f.setPVCPhase("demo-pvc", corev1.ClaimBound)
	f.setDeploymentStatus("demo", rolledOut)
	f.converge("demo")
	got := f.llsd("demo").Status
	for i := range got.Conditions {
		got.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	require.NotNil(t, got.Version.LastUpdated)
	got.Version.LastUpdated = nil
	ready := func(condType, reason, message string) metav1.Condition {
		return metav1.Condition{Type: condType, Status: metav1.ConditionTrue, ObservedGeneration: 1, Reason: reason, Message: message}
	}
	want := v1alpha2.LlamaStackDistributionStatus{
		ObservedGeneration: 1,
		Phase:              v1alpha2.PhaseReady,
		Version:            v1alpha2.VersionInfo{OperatorVersion: "test"},
		// The distributions with a published image.
		DistributionConfig: v1alpha2.DistributionConfig{ActiveDistribution: "starter", AvailableDistributions: map[string]string{
			"postgres-demo": revision.BuiltinDistributions()["postgres-demo"], "starter": image}},
		Conditions: []metav1.Condition{
			ready(v1alpha2.ConditionDeploymentReady, "DeploymentReady", "Deployment is ready"),
			ready(v1alpha2.ConditionProgressing, v1alpha2.ReasonRolloutComplete, "Deployment has rolled out"),
			ready(v1alpha2.ConditionServiceReady, "ServiceReady", "Service is ready"),
			ready(v1alpha2.ConditionStorageInSync, "InSync", "The PersistentVolumeClaim matches spec.workload.storage (v1alpha1 spec.server.storage)"),
			// Features meeting: ReadWriteOnce storage under autoscaling.
			ready(v1alpha2.ConditionStorageAccessWarning, "ReadWriteOnceShared", "ReadWriteOnce storage with more than one replica or autoscaling: "+
				"pods scheduled to another node cannot mount the volume; use storage.accessModes [ReadWriteMany] or one replica"),
			ready(v1alpha2.ConditionStorageReady, "StorageReady", "Storage is ready"),
			ready(v1alpha2.ConditionReady, v1alpha2.ReasonReady, "LlamaStackDistribution is ready"),
		},
		AvailableReplicas: 2,
		Replicas:          2,
		Selector:          "app=llama-stack,app.kubernetes.io/instance=demo",
		ServiceURL:        "http://demo-service.demo.svc.cluster.local:8321",
		RouteURL:          ptr.To("http://llama.example.com"),
	}
	assert.Equal(t, want, got)
}

// withMounts adds podOverrides volumes (emptyDirs) and their mounts at the given paths,
// volume i named v<i>.
func withMounts(paths ...string) func(*v1alpha1.LlamaStackDistribution) {
	return func(l *v1alpha1.LlamaStackDistribution) {
		o := &v1alpha1.PodOverrides{}
		for i, p := range paths {
			name := fmt.Sprintf("v%d", i)
			o.Volumes = append(o.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			o.VolumeMounts = append(o.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: p})
		}
		l.Spec.Server.PodOverrides = o
	}
}

func withStorageAt(p string) func(*v1alpha1.LlamaStackDistribution) {
	return func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{MountPath: p}
	}
}

// A nested mount is legal: the Deployment is applied and the CR can become Ready, with
// a VolumeMountWarning condition and one Warning Event while it holds. Removing the
// nested mount removes the condition.
func TestNestedMountIsAWarning(t *testing.T) {
	f := newFixture(t, newLLSDv1("demo", withMounts("/.llama/data")))
	assert.Contains(t, describe(f.sync("demo")), "patch deployments demo")
	l := f.llsd("demo")
	assert.NotEqual(t, v1alpha2.PhaseFailed, l.Status.Phase)
	cond := meta.FindStatusCondition(l.Status.Conditions, v1alpha2.ConditionVolumeMountWarning)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Equal(t, v1alpha2.ReasonNestedMountPaths, cond.Reason)
	assert.Contains(t, cond.Message, `spec.workload.overrides.volumeMounts[0] (volume "v0"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "/.llama/data" hides the path "data" inside the storage volume "lls-storage" at "/.llama"`)
	assert.Equal(t, 1, countEvents(f.events(), "Warning NestedMountPaths"))

	// Nothing changed: no write, no second Event.
	assert.Empty(t, describe(f.sync("demo")))
	assert.Zero(t, countEvents(f.events(), "Warning NestedMountPaths"))

	// Another nesting: the condition follows, with one Event.
	f.updateLLSD("demo", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.PodOverrides.VolumeMounts[0].MountPath = "/.llama/models"
	})
	f.sync("demo")
	cond = meta.FindStatusCondition(f.llsd("demo").Status.Conditions, v1alpha2.ConditionVolumeMountWarning)
	require.NotNil(t, cond)
	assert.Contains(t, cond.Message, `hides the path "models"`)
	assert.Equal(t, 1, countEvents(f.events(), "Warning NestedMountPaths"))

	f.updateLLSD("demo", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.PodOverrides.VolumeMounts[0].MountPath = "/data"
	})
	f.sync("demo")
	assert.Nil(t, meta.FindStatusCondition(f.llsd("demo").Status.Conditions, v1alpha2.ConditionVolumeMountWarning))
	assert.Zero(t, countEvents(f.events(), "Warning NestedMountPaths"))
}

// A conflicting variable rolls nothing: the running Deployment is kept and the CR says why.
func TestEnvConflictKeepsWhatRuns(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	before := f.deployment("app").Spec.Template
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{Env: []corev1.EnvVar{{Name: "OGX_PORT", Value: "9000"}}}
	})
	f.converge("app")
	assert.Equal(t, before, f.deployment("app").Spec.Template)
	c := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady)
	assert.Equal(t, v1alpha2.ReasonResourceInvalid, c.Reason)
	assert.Contains(t, c.Message, "OGX_PORT")
}
