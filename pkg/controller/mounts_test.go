package controller

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
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
	withUserConfig := deploymentInputs{userConfigMap: "cfg"}
	withCA := deploymentInputs{caBundleHash: "h"}
	tests := map[string]struct {
		edits []func(*v1alpha1.LlamaStackDistribution)
		in    deploymentInputs
		want  []string // substrings of the message; none: no conflict
	}{
		"the same string": {edits: fns(withMounts("/.llama")), want: []string{
			"one directory, /.llama,", `the storage volume "lls-storage" at "/.llama"`,
			`spec.server.podOverrides.volumeMounts[0] (volume "v0") at "/.llama"`}},
		"a trailing slash": {edits: fns(withMounts("/.llama/")), want: []string{
			"one directory, /.llama,", `the storage volume "lls-storage" at "/.llama" and spec.server.podOverrides.volumeMounts[0] (volume "v0") at "/.llama/"`}},
		"a dot segment in the storage path": {edits: fns(withStorageAt("/.llama/./"), withMounts("/.llama")), want: []string{
			"one directory, /.llama,", `the storage volume "lls-storage" at "/.llama/./" (spec.server.storage.mountPath)`,
			`spec.server.podOverrides.volumeMounts[0] (volume "v0") at "/.llama"`}},
		"a double slash at the user config": {edits: fns(withMounts("//etc//llama-stack")), in: withUserConfig, want: []string{
			"one directory, /etc/llama-stack,", `the user config volume "user-config" at "/etc/llama-stack/"`,
			`(volume "v0") at "//etc//llama-stack"`}},
		"a parent segment at the CA bundle": {edits: fns(withMounts("/etc/ssl/certs/x/../ca-bundle/")), in: withCA, want: []string{
			"one directory, /etc/ssl/certs/ca-bundle,", `the CA bundle volume "ca-bundle" at "/etc/ssl/certs/ca-bundle"`}},
		"storage at the user config": {edits: fns(withStorageAt("/etc/llama-stack")), in: withUserConfig, want: []string{
			`the storage volume "lls-storage" at "/etc/llama-stack" (spec.server.storage.mountPath) and the user config volume "user-config" at "/etc/llama-stack/"`}},
		"two of the user's": {edits: fns(withMounts("/models", "/models/")), want: []string{
			"one directory, /models,", `volumeMounts[0] (volume "v0") at "/models" and spec.server.podOverrides.volumeMounts[1] (volume "v1") at "/models/"`}},
		"the user config path without user config": {edits: fns(withMounts("/etc/llama-stack"))},
		"the CA path without a CA bundle":          {edits: fns(withMounts("/etc/ssl/certs/ca-bundle/"))},
		"nested is no conflict":                    {edits: fns(withMounts("/.llama/data", "/etc"))},
		"a longer name is another directory":       {edits: fns(withMounts("/.llama2", "/.llam"))},
		// The CRD now rejects relative paths; a CR admitted before still compares.
		"relative paths from before the CRD rule": {edits: fns(withMounts("data", "data/.")), want: []string{"one directory, data,"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := newLLSD("demo", tc.edits...)
			got := podConflict(l, tc.in, nil)
			if len(tc.want) == 0 {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, v1alpha1.ReasonResourceInvalid, got.reason)
			for _, w := range tc.want {
				assert.Contains(t, got.message, w)
			}
		})
	}
}

func fns(f ...func(*v1alpha1.LlamaStackDistribution)) []func(*v1alpha1.LlamaStackDistribution) {
	return f
}

// volumeMounts is serverMounts without the origins: the Deployment's mounts, in order.
func TestVolumeMountsFollowServerMounts(t *testing.T) {
	l := newLLSD("demo", withMounts("/models"))
	got := volumeMounts(l, deploymentInputs{userConfigMap: "cfg", caBundleHash: "h"})
	assert.Equal(t, []corev1.VolumeMount{
		{Name: "lls-storage", MountPath: "/.llama"},
		{Name: "user-config", MountPath: "/etc/llama-stack/", ReadOnly: true},
		{Name: "ca-bundle", MountPath: "/etc/ssl/certs/ca-bundle", ReadOnly: true},
		{Name: "v0", MountPath: "/models"},
	}, got)
}
