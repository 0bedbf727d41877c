package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// The first sync of a minimal CR applies its Deployment and Service, exactly as their
// builders make them, and writes its status; the next sync sends nothing.
func TestCreateThenNoOp(t *testing.T) {
	l := newLLSD("demo")
	f := newFixture(t, l)
	image := builtinDistributions()["starter"]
	checkWrites(t, f.sync("demo"), []expectedWrite{
		{"patch", "deployments", "demo", newDeployment(l, deploymentInputs{image: image, replicas: ptr.To(int32(1)),
			serverVersion: imageServerVersion(image), distro: "starter"})},
		{"patch", "services", "demo-service", children.NewService(l, children.AskedListening(l, imageServerVersion(image)))},
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
