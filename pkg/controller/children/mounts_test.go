package children

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

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

// Mount paths are compared as directories: however a path is written, two volumes at
// one directory are a conflict, and the message names both as written.
func TestPodConflictComparesMountPathsAsDirectories(t *testing.T) {
	withUserConfig := revision.Inputs{UserConfigMap: "cfg"}
	withCA := revision.Inputs{CABundleHash: "h"}
	tests := map[string]struct {
		edits []func(*v1alpha1.LlamaStackDistribution)
		in    revision.Inputs
		want  []string // substrings of the message; none: no conflict
	}{
		"the same string": {edits: fns(withMounts("/.llama")), want: []string{
			"one directory, /.llama,", `the storage volume "lls-storage" at "/.llama"`,
			`spec.workload.overrides.volumeMounts[0] (volume "v0"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "/.llama"`}},
		"a trailing slash": {edits: fns(withMounts("/.llama/")), want: []string{
			"one directory, /.llama,", `the storage volume "lls-storage" at "/.llama" and spec.workload.overrides.volumeMounts[0] (volume "v0"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "/.llama/"`}},
		"a dot segment in the storage path": {edits: fns(withStorageAt("/.llama/./"), withMounts("/.llama")), want: []string{
			"one directory, /.llama,", `the storage volume "lls-storage" at "/.llama/./" (spec.workload.storage.mountPath; v1alpha1 spec.server.storage.mountPath)`,
			`spec.workload.overrides.volumeMounts[0] (volume "v0"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "/.llama"`}},
		"a double slash at the user config": {edits: fns(withMounts("//etc//llama-stack")), in: withUserConfig, want: []string{
			"one directory, /etc/llama-stack,", `the user config volume "user-config" at "/etc/llama-stack/"`,
			`(volume "v0"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "//etc//llama-stack"`}},
		"a parent segment at the CA bundle": {edits: fns(withMounts("/etc/ssl/certs/x/../ca-bundle/")), in: withCA, want: []string{
			"one directory, /etc/ssl/certs/ca-bundle,", `the CA bundle volume "ca-bundle" at "/etc/ssl/certs/ca-bundle"`}},
		"storage at the user config": {edits: fns(withStorageAt("/etc/llama-stack")), in: withUserConfig, want: []string{
			`the storage volume "lls-storage" at "/etc/llama-stack" (spec.workload.storage.mountPath; v1alpha1 spec.server.storage.mountPath) and the user config volume "user-config" at "/etc/llama-stack/"`}},
		"two of the user's": {edits: fns(withMounts("/models", "/models/")), want: []string{
			"one directory, /models,", `volumeMounts[0] (volume "v0"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "/models" and spec.workload.overrides.volumeMounts[1] (volume "v1"; v1alpha1 spec.server.podOverrides.volumeMounts[1]) at "/models/"`}},
		"the user config path without user config": {edits: fns(withMounts("/etc/llama-stack"))},
		"the CA path without a CA bundle":          {edits: fns(withMounts("/etc/ssl/certs/ca-bundle/"))},
		"nested is no conflict":                    {edits: fns(withMounts("/.llama/data", "/etc"))},
		"a longer name is another directory":       {edits: fns(withMounts("/.llama2", "/.llam"))},
		// The CRD now rejects relative paths; a CR admitted before still compares.
		"relative paths from before the CRD rule": {edits: fns(withMounts("data", "data/.")), want: []string{"one directory, data,"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := newLLSDv1("demo", tc.edits...)
			got := PodConflict(hub(l), tc.in)
			if len(tc.want) == 0 {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, v1alpha2.ReasonResourceInvalid, got.Reason)
			for _, w := range tc.want {
				assert.Contains(t, got.Message, w)
			}
		})
	}
}

func fns(f ...func(*v1alpha1.LlamaStackDistribution)) []func(*v1alpha1.LlamaStackDistribution) {
	return f
}

// Helpers for nestedMounts' table: a controller mount and a user mount.
func ctrlMount(name, p string) ServerMount {
	return ServerMount{VolumeMount: corev1.VolumeMount{Name: name, MountPath: p}, what: "the " + name + " volume"}
}

func userMount(i int, name, p string) ServerMount {
	return ServerMount{VolumeMount: corev1.VolumeMount{Name: name, MountPath: p},
		field: fmt.Sprintf("spec.workload.overrides.volumeMounts[%d]", i), field1: fmt.Sprintf("spec.server.podOverrides.volumeMounts[%d]", i), user: true}
}

func TestNestedMounts(t *testing.T) {
	type nesting struct{ outer, inner, hidden string } // volume names and the hidden path
	storage := ctrlMount("lls-storage", "/.llama")
	userConfig := ctrlMount("user-config", "/etc/llama-stack/")
	caBundle := ctrlMount("ca-bundle", "/etc/ssl/certs/ca-bundle")
	tests := map[string]struct {
		mounts []ServerMount
		want   []nesting
	}{
		"side by side": {
			mounts: []ServerMount{storage, userConfig, caBundle, userMount(0, "models", "/models")},
		},
		"a user mount inside the storage": {
			mounts: []ServerMount{storage, userMount(0, "data", "/.llama/data")},
			want:   []nesting{{"lls-storage", "data", "data"}},
		},
		"a trailing slash and a dot segment": {
			mounts: []ServerMount{storage, userMount(0, "data", "/.llama/./data/")},
			want:   []nesting{{"lls-storage", "data", "data"}},
		},
		"double slashes, two levels down": {
			mounts: []ServerMount{storage, userMount(0, "cache", "//.llama//hf/cache")},
			want:   []nesting{{"lls-storage", "cache", "hf/cache"}},
		},
		"a storage path with a trailing slash": {
			mounts: []ServerMount{ctrlMount("lls-storage", "/.llama/"), userMount(0, "data", "/.llama/data")},
			want:   []nesting{{"lls-storage", "data", "data"}},
		},
		// The runtime mounts /etc first: the user config stays visible, and hides the
		// llama-stack directory of the user's volume.
		"a user mount holding the user config": {
			mounts: []ServerMount{storage, userConfig, userMount(0, "etc", "/etc")},
			want:   []nesting{{"etc", "user-config", "llama-stack"}},
		},
		"a user mount inside the user config": {
			mounts: []ServerMount{storage, userConfig, userMount(0, "extra", "/etc/llama-stack/extra")},
			want:   []nesting{{"user-config", "extra", "extra"}},
		},
		"the storage inside a user mount, listed after it": {
			mounts: []ServerMount{ctrlMount("lls-storage", "/data/cache"), userMount(0, "data", "/data")},
			want:   []nesting{{"data", "lls-storage", "cache"}},
		},
		"the storage holding the user config": {
			mounts: []ServerMount{ctrlMount("lls-storage", "/etc"), userConfig},
			want:   []nesting{{"lls-storage", "user-config", "llama-stack"}},
		},
		// Each mount is reported against the innermost mount holding it: b hides part
		// of a, not of the storage (a already hides that), and a and b are the user's.
		"three levels": {
			mounts: []ServerMount{storage, userMount(0, "a", "/.llama/a"), userMount(1, "b", "/.llama/a/b")},
			want:   []nesting{{"lls-storage", "a", "a"}},
		},
		"the innermost holder of a controller mount": {
			mounts: []ServerMount{storage, caBundle, userMount(0, "etc", "/etc"), userMount(1, "ssl", "/etc/ssl/")},
			want:   []nesting{{"ssl", "ca-bundle", "certs/ca-bundle"}},
		},
		"only the user's own volumes": {
			mounts: []ServerMount{storage, userMount(0, "data", "/data"), userMount(1, "x", "/data/x")},
		},
		"the root holds everything": {
			mounts: []ServerMount{storage, userConfig, userMount(0, "root", "/"), userMount(1, "m", "/models")},
			want:   []nesting{{"root", "lls-storage", ".llama"}, {"root", "user-config", "etc/llama-stack"}},
		},
		"the same directory is not nesting": {
			mounts: []ServerMount{storage, userMount(0, "v", "/.llama/")},
		},
		"a common prefix is not a parent": {
			mounts: []ServerMount{storage, userMount(0, "v", "/.llama2"), userMount(1, "w", "/.llam")},
		},
		"relative paths from before the CRD rule": {
			mounts: []ServerMount{ctrlMount("lls-storage", "data"), userMount(0, "v", "data/x"), userMount(1, "w", "/data/y")},
			want:   []nesting{{"lls-storage", "v", "x"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []nesting
			for _, n := range nestedMounts(tc.mounts) {
				got = append(got, nesting{n.Outer.Name, n.Inner.Name, n.Hidden})
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestNestedMountsMessage(t *testing.T) {
	assert.Empty(t, NestedMountsMessage(nil))
	l := newLLSDv1("demo", withStorageAt("/.llama/"), withMounts("/.llama/data", "/etc"))
	msg := NestedMountsMessage(nestedMounts(serverMounts(hub(l), revision.Inputs{UserConfigMap: "cfg"})))
	// In the order of the inner mounts: the controller's come first.
	assert.Equal(t,
		`the user config volume "user-config" at "/etc/llama-stack/" hides the path "llama-stack" inside spec.workload.overrides.volumeMounts[1] (volume "v1"; v1alpha1 spec.server.podOverrides.volumeMounts[1]) at "/etc"; `+
			`spec.workload.overrides.volumeMounts[0] (volume "v0"; v1alpha1 spec.server.podOverrides.volumeMounts[0]) at "/.llama/data" hides the path "data" inside the storage volume "lls-storage" at "/.llama/" (spec.workload.storage.mountPath; v1alpha1 spec.server.storage.mountPath). `+
			"The pod runs, but the server does not see what the outer volume holds at that path; mount the inner volume elsewhere if those files are needed",
		msg)
}

// volumeMounts is serverMounts without the origins: the Deployment's mounts, in order.
func TestVolumeMountsFollowServerMounts(t *testing.T) {
	l := newLLSDv1("demo", withMounts("/models"))
	got := volumeMounts(hub(l), revision.Inputs{UserConfigMap: "cfg", CABundleHash: "h"})
	assert.Equal(t, []corev1.VolumeMount{
		{Name: "lls-storage", MountPath: "/.llama"},
		{Name: "user-config", MountPath: "/etc/llama-stack/", ReadOnly: true},
		{Name: "ca-bundle", MountPath: "/etc/ssl/certs/ca-bundle", ReadOnly: true},
		{Name: "v0", MountPath: "/models"},
	}, got)
}
