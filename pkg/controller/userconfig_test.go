package controller

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
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

// copyOf is the name of the copy of CR app's user config holding data.
func copyOf(f *fixture, data map[string]string) string {
	return llsd.UserConfigCopyName(f.llsd("app"), revision.HashData(data, nil))
}

// userConfigCopies are the names of the user-config copies in the test namespace.
func (f *fixture) userConfigCopies() []string {
	var out []string
	for _, name := range f.configMapNames() {
		if llsd.IsUserConfigCopyName(f.llsd("app"), name) {
			out = append(out, name)
		}
	}
	return out
}

// A user config in the CR's namespace reaches the pods through an immutable copy named
// by its content hash, never the user's ConfigMap itself: an edit makes a new copy and
// rolls the pods; a metadata-only edit changes nothing.
func TestUserConfigInTheSameNamespaceIsMountedThroughACopy(t *testing.T) {
	data := map[string]string{"config.yaml": startingUserConfig}
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "")),
		configMap(testNamespace, userConfigName, data, nil))
	f.converge("app")

	d := f.deployment("app")
	name := copyOf(f, data)
	assert.Equal(t, name, userConfigVolume(t, d), "the pods mount the copy")
	assert.Regexp(t, sha256Hex, userConfigHash(d))
	assert.Equal(t, revision.HashData(data, nil), userConfigHash(d))
	cp := f.stored(kindConfigMapCopy, name)
	require.NotNil(t, cp)
	assertControlledChild(t, cp, f.llsd("app"))
	assert.Equal(t, data, cp.(*corev1.ConfigMap).Data)
	assert.Equal(t, ptr.To(true), cp.(*corev1.ConfigMap).Immutable)
	assert.Equal(t, "user-config", cp.GetLabels()["app.kubernetes.io/component"])
	assert.NotEqual(t, v1alpha2.PhaseFailed, f.llsd("app").Status.Phase)

	// Editing the data makes a new copy and rolls the pods with a new hash.
	edited := map[string]string{"config.yaml": userConfigNamed("version: 3\n")}
	f.putConfigMap(configMap(testNamespace, userConfigName, edited, nil))
	actions := f.sync("app")
	assert.Equal(t, []string{"patch configmaps " + copyOf(f, edited), "patch deployments app"}, childWrites(actions))
	requireApplies(t, actions)
	newHash := userConfigHash(f.deployment("app"))
	assert.NotEqual(t, userConfigHash(d), newHash)
	assert.Equal(t, revision.HashData(edited, nil), newHash)
	assert.Equal(t, copyOf(f, edited), userConfigVolume(t, f.deployment("app")))
	assert.Empty(t, writesTo(actions, "configmaps", userConfigName), "the user's ConfigMap is never written")
	f.converge("app")

	// A metadata-only edit changes nothing.
	cm := configMap(testNamespace, userConfigName, edited, map[string]string{"note": "x"})
	cm.Labels = map[string]string{"watched": "yes"}
	f.putConfigMap(cm)
	require.Empty(t, describe(f.sync("app")))
	assert.Equal(t, newHash, userConfigHash(f.deployment("app")))
}

// An in-place edit the pre-flight refuses reaches no pod: no copy is made of it, the
// Deployment keeps mounting the accepted copy, and a scale-up adds pods on that copy.
// Once the Deployment has rolled out, a copy no template mounts any more goes.
func TestRefusedEditReachesNoPod(t *testing.T) {
	accepted := map[string]string{"config.yaml": startingUserConfig}
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "")),
		configMap(testNamespace, userConfigName, accepted, nil))
	f.converge("app")
	before := f.deployment("app").Spec.Template.DeepCopy()
	f.events()

	refused := map[string]string{"config.yaml": strings.Replace(startingUserConfig, "remote::vllm", "remote::no-such-provider", 1)}
	f.putConfigMap(configMap(testNamespace, userConfigName, refused, nil))
	actions := f.sync("app")
	assert.Empty(t, childWrites(actions), "nothing is written for a refused edit")
	assert.Equal(t, v1alpha2.ReasonConfigInvalid, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason)
	assert.Equal(t, []string{copyOf(f, accepted)}, f.userConfigCopies(), "no copy of the refused content")

	// Any pod made now (a scale-up, a restart, a drained node) is made of the template,
	// which mounts the accepted copy, holding the accepted content.
	f.converge("app")
	d := f.deployment("app")
	assert.Equal(t, *before, d.Spec.Template, "the pods keep the accepted copy")
	assert.Equal(t, copyOf(f, accepted), userConfigVolume(t, d))
	cp := f.stored(kindConfigMapCopy, copyOf(f, accepted))
	require.NotNil(t, cp)
	assert.Equal(t, accepted, cp.(*corev1.ConfigMap).Data, "what the pods read is what was checked")

	// Fixed: a new copy rolls out, and once the Deployment has rolled out the
	// accepted copy, mounted by no template any more, goes.
	fixed := map[string]string{"config.yaml": userConfigNamed("fixed")}
	f.putConfigMap(configMap(testNamespace, userConfigName, fixed, nil))
	f.converge("app")
	assert.Equal(t, copyOf(f, fixed), userConfigVolume(t, f.deployment("app")))
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	assert.Equal(t, []string{copyOf(f, fixed)}, f.userConfigCopies())
}

func TestUserConfigInAnotherNamespaceNeedsOptIn(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "other")),
		configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # x")}, nil))

	actions := f.sync("app")
	assert.Empty(t, childWrites(actions), "nothing is written for a refused ConfigMap")
	assert.Nil(t, f.stored(kindDeployment, "app"))
	assert.Empty(t, f.userConfigCopies())
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
			name := copyOf(f, data)
			assert.Equal(t, []string{"patch configmaps " + name}, writesTo(actions, "configmaps", name))
			cp := f.stored(kindConfigMapCopy, name)
			require.NotNil(t, cp)
			assertControlledChild(t, cp, f.llsd("app"))
			assert.Equal(t, data, cp.(*corev1.ConfigMap).Data)

			d := f.deployment("app")
			assert.Equal(t, name, userConfigVolume(t, d), "the pod mounts the copy")
			assert.Equal(t, revision.HashData(data, nil), userConfigHash(d))
			assert.Empty(t, writesTo(actions, "configmaps", userConfigName), "the source is never written")

			f.converge("app")
			assert.NotEqual(t, v1alpha2.PhaseFailed, f.llsd("app").Status.Phase)
			require.Empty(t, describe(f.sync("app")))
		})
	}
}

func TestEditedSourceMakesANewCopyAndRollsTheDeployment(t *testing.T) {
	allow := map[string]string{AllowedNamespacesAnnotation: "*"}
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "other")),
		configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # v1")}, allow))
	f.converge("app")
	oldHash := userConfigHash(f.deployment("app"))

	v2 := map[string]string{"config.yaml": userConfigNamed("version: 2 # v2")}
	f.putConfigMap(configMap("other", userConfigName, v2, allow))
	actions := f.sync("app")
	assert.Equal(t, []string{"patch configmaps " + copyOf(f, v2), "patch deployments app"}, childWrites(actions))
	assert.Equal(t, v2, f.stored(kindConfigMapCopy, copyOf(f, v2)).(*corev1.ConfigMap).Data)
	newHash := userConfigHash(f.deployment("app"))
	assert.NotEqual(t, oldHash, newHash)
	assert.Equal(t, revision.HashData(v2, nil), newHash)
	f.converge("app")
	require.Empty(t, describe(f.sync("app")))
}

func TestWithdrawnOptInLeavesTheCopyUntouched(t *testing.T) {
	v1 := map[string]string{"config.yaml": userConfigNamed("version: 2 # v1")}
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "other")),
		configMap("other", userConfigName, v1, map[string]string{AllowedNamespacesAnnotation: "demo"}))
	f.converge("app")
	copyBefore := f.stored(kindConfigMapCopy, copyOf(f, v1)).(*corev1.ConfigMap).DeepCopy()
	deployBefore := f.deployment("app").DeepCopy()
	f.events()

	// The source stops allowing demo, and changes.
	f.putConfigMap(configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # v2")}, map[string]string{AllowedNamespacesAnnotation: "team-b"}))
	actions := f.sync("app")
	assert.Empty(t, childWrites(actions), "neither a copy nor the Deployment is written")
	copyAfter := f.stored(kindConfigMapCopy, copyOf(f, v1))
	require.NotNil(t, copyAfter, "the copy is not deleted")
	assert.Equal(t, copyBefore, copyAfter)
	assert.Equal(t, []string{copyOf(f, v1)}, f.userConfigCopies(), "no copy of the source it may not read")
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

	data := map[string]string{"config.yaml": userConfigNamed("version: 2 # x")}
	f.putConfigMap(configMap(testNamespace, userConfigName, data, nil))
	f.converge("app")
	got := f.llsd("app")
	assert.NotEqual(t, v1alpha2.PhaseFailed, got.Status.Phase)
	// The Deployment has just been created: it rolls out (the fakes report no status).
	assert.Equal(t, v1alpha2.ReasonDeploymentScaling, cond(t, got, v1alpha2.ConditionDeploymentReady).Reason)
	assert.Equal(t, copyOf(f, data), userConfigVolume(t, f.deployment("app")))
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

// The pod-template hash must always be the content hash of the copy the pod mounts:
// otherwise a later sync that brings the mount up to date finds the hash already set and
// never restarts the server, which reads its configuration only at startup.
func TestDeploymentHashMatchesTheMountedCopyWhenOptInIsWithdrawnBeforeTheCacheSawIt(t *testing.T) {
	allow := map[string]string{AllowedNamespacesAnnotation: "*"}
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "other")),
		configMap("other", userConfigName, map[string]string{"config.yaml": userConfigNamed("version: 2 # v1")}, allow))
	f.converge("app")
	requireHashMatchesCopy := func(step string) {
		t.Helper()
		d := f.deployment("app")
		cp := f.stored(kindConfigMapCopy, userConfigVolume(t, d)).(*corev1.ConfigMap)
		assert.Equal(t, revision.HashData(cp.Data, cp.BinaryData), userConfigHash(d),
			"%s: the Deployment's hash is not the content hash of the copy it mounts (copy data %v)", step, cp.Data)
	}
	requireHashMatchesCopy("converged")

	// The source changes to v2 (the cache sees it) and then withdraws the opt-in before
	// the cache has seen that: the sync reads the source live and must not copy it.
	v2 := map[string]string{"config.yaml": userConfigNamed("version: 2 # v2")}
	f.putConfigMap(configMap("other", userConfigName, v2, allow))
	src := configMap("other", userConfigName, v2, nil)
	_, err := f.kubeclient.CoreV1().ConfigMaps("other").Update(f.ctx, src, metav1.UpdateOptions{FieldManager: "kubectl"})
	require.NoError(t, err)
	actions := f.sync("app")
	assert.Empty(t, writesTo(actions, "configmaps", copyOf(f, v2)), "no copy of a source that withdrew its opt-in")
	requireHashMatchesCopy("opt-in withdrawn, cache behind")

	// The cache catches up: the CR reports the withdrawal.
	f.converge("app")
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonConfigMapNotAllowed)
	requireHashMatchesCopy("withdrawal reported")

	// The opt-in comes back: the copy of v2 is made and the pods must restart to read it.
	f.putConfigMap(configMap("other", userConfigName, v2, allow))
	actions = f.sync("app")
	assert.Contains(t, childWrites(actions), "patch configmaps "+copyOf(f, v2))
	assert.Contains(t, childWrites(actions), "patch deployments app", "the server must restart to read v2")
	requireHashMatchesCopy("opt-in restored")
}

// A source whose content changed since the cache saw it is not copied: what the pods
// read is what was checked. The sync fails and is retried once the cache catches up.
func TestSourceChangedSinceItWasCheckedIsNotCopied(t *testing.T) {
	checked := map[string]string{"config.yaml": startingUserConfig}
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "")),
		configMap(testNamespace, userConfigName, checked, nil))
	later := configMap(testNamespace, userConfigName, map[string]string{"config.yaml": userConfigNamed("later")}, nil)
	_, err := f.kubeclient.CoreV1().ConfigMaps(testNamespace).Update(f.ctx, later, metav1.UpdateOptions{})
	require.NoError(t, err)
	err = f.c.syncHandler(f.ctx, key("app"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "changed since it was checked")
	f.refreshCaches()
	assert.Empty(t, f.userConfigCopies(), "neither the checked content nor the later one is copied")
	assert.Nil(t, f.stored(kindDeployment, "app"))
}
