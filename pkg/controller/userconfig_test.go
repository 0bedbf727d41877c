package controller

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

const userConfigName = "my-config"

func withUserConfigMap(name, namespace string) func(*v1alpha1.LlamaStackDistribution) {
	return func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: name, ConfigMapNamespace: namespace}
	}
}

// userConfigVolume returns the ConfigMap the server pod mounts at /etc/llama-stack/, or "".
func userConfigVolume(t *testing.T, d *appsv1.Deployment) string {
	t.Helper()
	var mounted bool
	for _, m := range serverContainerOf(t, d).VolumeMounts {
		if m.Name == "user-config" {
			assert.Equal(t, "/etc/llama-stack/", m.MountPath)
			mounted = true
		}
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "user-config" && v.ConfigMap != nil {
			assert.True(t, mounted, "volume user-config is not mounted")
			return v.ConfigMap.Name
		}
	}
	return ""
}

func userConfigHash(d *appsv1.Deployment) string {
	return d.Spec.Template.Annotations["configmap.hash/user-config"]
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestUserConfigInTheSameNamespaceIsMountedByName(t *testing.T) {
	data := map[string]string{"config.yaml": startingUserConfig}
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "")),
		configMap(testNamespace, userConfigName, data, nil))
	f.converge("app")

	d := f.deployment("app")
	assert.Equal(t, userConfigName, userConfigVolume(t, d))
	assert.Regexp(t, sha256Hex, userConfigHash(d))
	assert.Equal(t, revision.HashData(data, nil), userConfigHash(d))
	assert.Nil(t, f.stored(kindConfigMapCopy, "app-user-config"), "no copy in the same namespace")
	assert.NotEqual(t, v1alpha2.PhaseFailed, f.llsd("app").Status.Phase)

	// Editing the data rolls the pods with a new hash.
	f.putConfigMap(configMap(testNamespace, userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 3\n")}, nil))
	actions := f.sync("app")
	assert.Equal(t, []string{"patch deployments app"}, childWrites(actions))
	requireApplies(t, actions)
	newHash := userConfigHash(f.deployment("app"))
	assert.NotEqual(t, userConfigHash(d), newHash)
	assert.Equal(t, revision.HashData(map[string]string{"config.yaml": userConfigNamed("version: 3\n")}, nil), newHash)
	f.converge("app")

	// A metadata-only edit changes nothing.
	cm := configMap(testNamespace, userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 3\n")}, map[string]string{"note": "x"})
	cm.Labels = map[string]string{"watched": "yes"}
	f.putConfigMap(cm)
	require.Empty(t, describe(f.sync("app")))
	assert.Equal(t, newHash, userConfigHash(f.deployment("app")))
}

func TestUserConfigInAnotherNamespaceNeedsOptIn(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "other")),
		configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # x")}, nil))

	actions := f.sync("app")
	assert.Empty(t, childWrites(actions), "nothing is written for a refused ConfigMap")
	assert.Nil(t, f.stored(kindDeployment, "app"))
	assert.Nil(t, f.stored(kindConfigMapCopy, "app-user-config"))
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonConfigMapNotAllowed, "other/"+userConfigName, AllowedNamespacesAnnotation, testNamespace)
	events := f.events()
	assert.Equal(t, 1, countEvents(events, "Warning ConfigMapNotAllowed"), "events: %v", events)

	require.Empty(t, describe(f.sync("app")), "the same problem again writes nothing")
	assert.Empty(t, f.events())
}

func TestUserConfigInAnotherNamespaceIsCopied(t *testing.T) {
	for _, allowed := range []string{"other,demo", "*", " other , demo "} {
		t.Run(allowed, func(t *testing.T) {
			data := map[string]string{"config.yaml": startingUserConfig, "extra.txt": "more"}
			f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "other")),
				configMap("other", userConfigName, data, map[string]string{AllowedNamespacesAnnotation: allowed}))

			actions := f.sync("app")
			requireApplies(t, actions)
			assert.Equal(t, []string{"patch configmaps app-user-config"}, writesTo(actions, "configmaps", "app-user-config"))
			cp := f.stored(kindConfigMapCopy, "app-user-config")
			require.NotNil(t, cp)
			assertControlledChild(t, cp, f.llsd("app"))
			assert.Equal(t, data, cp.(*corev1.ConfigMap).Data)

			d := f.deployment("app")
			assert.Equal(t, "app-user-config", userConfigVolume(t, d), "the pod mounts the copy")
			assert.Equal(t, revision.HashData(data, nil), userConfigHash(d))
			assert.Empty(t, writesTo(actions, "configmaps", userConfigName), "the source is never written")

			f.converge("app")
			assert.NotEqual(t, v1alpha2.PhaseFailed, f.llsd("app").Status.Phase)
			require.Empty(t, describe(f.sync("app")))
		})
	}
}

func TestEditedSourceUpdatesTheCopyAndRollsTheDeployment(t *testing.T) {
	allow := map[string]string{AllowedNamespacesAnnotation: "*"}
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "other")),
		configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # v1")}, allow))
	f.converge("app")
	oldHash := userConfigHash(f.deployment("app"))

	f.putConfigMap(configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # v2")}, allow))
	actions := f.sync("app")
	assert.Equal(t, []string{"patch configmaps app-user-config", "patch deployments app"}, childWrites(actions))
	assert.Equal(t, map[string]string{"config.yaml": userConfigNamed("version: 2 # v2")}, f.stored(kindConfigMapCopy, "app-user-config").(*corev1.ConfigMap).Data)
	newHash := userConfigHash(f.deployment("app"))
	assert.NotEqual(t, oldHash, newHash)
	assert.Equal(t, revision.HashData(map[string]string{"config.yaml": userConfigNamed("version: 2 # v2")}, nil), newHash)
	f.converge("app")
	require.Empty(t, describe(f.sync("app")))
}

func TestWithdrawnOptInLeavesTheCopyUntouched(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "other")),
		configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # v1")}, map[string]string{AllowedNamespacesAnnotation: "demo"}))
	f.converge("app")
	copyBefore := f.stored(kindConfigMapCopy, "app-user-config").(*corev1.ConfigMap).DeepCopy()
	deployBefore := f.deployment("app").DeepCopy()
	f.events()

	// The source stops allowing demo, and changes.
	f.putConfigMap(configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # v2")}, map[string]string{AllowedNamespacesAnnotation: "team-b"}))
	actions := f.sync("app")
	assert.Empty(t, childWrites(actions), "neither the copy nor the Deployment is written")
	copyAfter := f.stored(kindConfigMapCopy, "app-user-config")
	require.NotNil(t, copyAfter, "the copy is not deleted")
	assert.Equal(t, copyBefore.Data, copyAfter.(*corev1.ConfigMap).Data, "the copy stops following the source")
	assert.Equal(t, copyBefore, copyAfter)
	assert.Equal(t, deployBefore, f.deployment("app"))
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonConfigMapNotAllowed, AllowedNamespacesAnnotation)
	assert.Equal(t, 1, countEvents(f.events(), "Warning ConfigMapNotAllowed"))
	require.Empty(t, describe(f.sync("app")))
}

func TestMissingUserConfigMapIsReportedUntilCreated(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "")))

	actions := f.sync("app")
	assert.Empty(t, childWrites(actions))
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonConfigMapNotFound, testNamespace+"/"+userConfigName)
	assert.Equal(t, 1, countEvents(f.events(), "Warning ConfigMapNotFound"))
	require.Empty(t, describe(f.sync("app")))
	assert.Empty(t, f.events())

	f.putConfigMap(configMap(testNamespace, userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # x")}, nil))
	f.converge("app")
	got := f.llsd("app")
	assert.NotEqual(t, v1alpha2.PhaseFailed, got.Status.Phase)
	// The Deployment has just been created: it rolls out (the fakes report no status).
	assert.Equal(t, v1alpha2.ReasonDeploymentScaling, cond(t, got, v1alpha2.ConditionDeploymentReady).Reason)
	assert.Equal(t, userConfigName, userConfigVolume(t, f.deployment("app")))
}

func TestUserConfigMapWithoutConfigYAML(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "")),
		configMap(testNamespace, userConfigName, map[string]string{"other.yaml": "x"}, nil))

	assert.Empty(t, childWrites(f.sync("app")))
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonConfigMapKeyMissing, testNamespace+"/"+userConfigName, "config.yaml")
	assert.Equal(t, 1, countEvents(f.events(), "Warning ConfigMapKeyMissing"))

	f.putConfigMap(configMap(testNamespace, userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # x")}, nil))
	f.converge("app")
	assert.NotEqual(t, v1alpha2.PhaseFailed, f.llsd("app").Status.Phase)
}

// The pod-template hash must always be the content hash of the ConfigMap the pod mounts:
// otherwise a later sync that brings the mount up to date finds the hash already set and
// never restarts the server, which reads its configuration only at startup.
func TestDeploymentHashMatchesTheMountedCopyWhenOptInIsWithdrawnBeforeTheCacheSawIt(t *testing.T) {
	allow := map[string]string{AllowedNamespacesAnnotation: "*"}
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "other")),
		configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # v1")}, allow))
	f.converge("app")
	requireHashMatchesCopy := func(step string) {
		t.Helper()
		cp := f.stored(kindConfigMapCopy, "app-user-config").(*corev1.ConfigMap)
		assert.Equal(t, revision.HashData(cp.Data, cp.BinaryData), userConfigHash(f.deployment("app")),
			"%s: the Deployment's hash is not the content hash of the copy it mounts (copy data %v)", step, cp.Data)
	}
	requireHashMatchesCopy("converged")

	// The source changes to v2 (the cache sees it) and then withdraws the opt-in before
	// the cache has seen that: the sync reads the source live and must not copy it.
	f.putConfigMap(configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # v2")}, allow))
	src := configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # v2")}, nil)
	_, err := f.kubeclient.CoreV1().ConfigMaps("other").Update(f.ctx, src, metav1.UpdateOptions{FieldManager: "kubectl"})
	require.NoError(t, err)
	actions := f.sync("app")
	assert.Empty(t, writesTo(actions, "configmaps", "app-user-config"), "the copy does not follow a source that withdrew its opt-in")
	requireHashMatchesCopy("opt-in withdrawn, cache behind")

	// The cache catches up: the CR reports the withdrawal.
	f.converge("app")
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonConfigMapNotAllowed)
	requireHashMatchesCopy("withdrawal reported")

	// The opt-in comes back: the copy gets v2 and the pods must restart to read it.
	f.putConfigMap(configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # v2")}, allow))
	actions = f.sync("app")
	assert.Contains(t, childWrites(actions), "patch configmaps app-user-config")
	assert.Contains(t, childWrites(actions), "patch deployments app", "the server must restart to read v2")
	requireHashMatchesCopy("opt-in restored")
}
