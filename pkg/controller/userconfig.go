package controller

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// newUserConfigCopy is the immutable copy, in the CR's namespace, of the user's config
// source, named by its content hash.
func newUserConfigCopy(l *v1alpha2.LlamaStackDistribution, source *corev1.ConfigMap) *corev1.ConfigMap {
	hash := revision.HashData(source.Data, source.BinaryData)
	meta := llsd.ChildObjectMeta(l, llsd.UserConfigCopyName(l, hash))
	meta.Labels[llsd.LabelComponent] = "user-config"
	meta.Annotations = map[string]string{llsd.AnnotationSourceHash: hash}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta,
		Immutable:  ptr.To(true),
		Data:       maps.Clone(source.Data),
		BinaryData: maps.Clone(source.BinaryData),
	}
}

// ensureUserConfigCopy makes the immutable copy of the user's config that the pods
// mount, named by its content hash, once the revision's checks accepted that content
// (writeConfigMaps runs only then): an edit of the user's ConfigMap makes a new copy
// when it is accepted, and reaches no pod when it is not. The cache holds only a hash
// of ConfigMap data, so the source is read live, and only when the copy does not exist
// yet; content other than the one checked (the source changed since the cache saw it)
// is not copied: the sync is retried, and the cache's next view checked. A source in
// another namespace that withdrew its opt-in since the cache saw it is a user error.
// Copies no pod template mounts any more are deleted by deleteUnusedConfigMaps.
func (c *Controller) ensureUserConfigCopy(ctx context.Context, l *v1alpha2.LlamaStackDistribution, uc *revision.UserConfig) (*fault.Problem, error) {
	if uc == nil || uc.Source == nil {
		return nil, nil
	}
	var problem *fault.Problem
	_, err := c.configMapCopies.EnsureWith(ctx, l, children.EnsureOptions[*corev1.ConfigMap]{
		Name: uc.MountName,
		// Named by its content: one that exists holds it (an immutable ConfigMap cannot
		// be edited).
		UpToDate: func(cur *corev1.ConfigMap) bool { return revision.ConfigMapHash(cur) == uc.Hash },
		Build: func(ctx context.Context, _ *corev1.ConfigMap, _ bool) (metav1.Object, error) {
			src, err := c.kubeclient.CoreV1().ConfigMaps(uc.Source.Namespace).Get(ctx, uc.Source.Name, metav1.GetOptions{})
			if err != nil {
				// Gone or unreadable since the cache saw it: the next event or retry settles it.
				return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", uc.Source.Namespace, uc.Source.Name, err)
			}
			if src.Namespace != l.Namespace && !revision.AllowsNamespace(src, l.Namespace) {
				problem = revision.NotAllowed(src.Namespace, src.Name, l.Namespace)
				return nil, nil
			}
			if hash := revision.HashData(src.Data, src.BinaryData); hash != uc.Hash {
				return nil, fmt.Errorf("ConfigMap %s/%s changed since it was checked (content %s, checked %s): it is checked again", src.Namespace, src.Name, hash, uc.Hash)
			}
			return newUserConfigCopy(l, src), nil
		},
	})
	return problem, err
}
