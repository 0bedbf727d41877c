package controller

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// newUserConfigCopy is the managed copy, in the CR's namespace, of a cross-namespace source.
func newUserConfigCopy(l *v1alpha2.LlamaStackDistribution, source *corev1.ConfigMap) *corev1.ConfigMap {
	lbls := llsd.ChildLabels(l)
	lbls[llsd.LabelComponent] = "user-config"
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            llsd.UserConfigCopyName(l),
			Namespace:       l.Namespace,
			Labels:          lbls,
			Annotations:     map[string]string{llsd.AnnotationSourceHash: revision.HashData(source.Data, source.BinaryData)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(l, llsd.ControllerKind)},
		},
		Data:       maps.Clone(source.Data),
		BinaryData: maps.Clone(source.BinaryData),
	}
}

// ensureUserConfigCopy keeps the managed copy of a cross-namespace user ConfigMap in
// step with its source (deleteUnneededConfigMaps deletes it once no longer mounted). The
// cache holds only a hash of ConfigMap data, so the source is read live, and only when
// the hashes differ. uc.Hash is set to the hash of what the copy holds, so the pods roll
// exactly when the mounted content changes. A source that withdrew its opt-in since the
// cache saw it is a user error.
func (c *Controller) ensureUserConfigCopy(ctx context.Context, l *v1alpha2.LlamaStackDistribution, uc *revision.UserConfig) (*fault.Problem, error) {
	if uc == nil || uc.Source == nil {
		return nil, nil
	}
	var problem *fault.Problem
	_, err := c.configMapCopies.EnsureWith(ctx, l, children.EnsureOptions[*corev1.ConfigMap]{
		Name: llsd.UserConfigCopyName(l),
		// The copy holds the source's content (an edit of the copy is repaired).
		UpToDate: func(cur *corev1.ConfigMap) bool {
			return cur.Annotations[llsd.AnnotationSourceHash] == uc.Hash && revision.ConfigMapHash(cur) == uc.Hash
		},
		Build: func(ctx context.Context, _ *corev1.ConfigMap, _ bool) (metav1.Object, error) {
			src, err := c.kubeclient.CoreV1().ConfigMaps(uc.Source.Namespace).Get(ctx, uc.Source.Name, metav1.GetOptions{})
			if err != nil {
				// Gone or unreadable since the cache saw it: the next event or retry settles it.
				return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", uc.Source.Namespace, uc.Source.Name, err)
			}
			if !revision.AllowsNamespace(src, l.Namespace) {
				problem = revision.NotAllowed(src.Namespace, src.Name, l.Namespace)
				return nil, nil
			}
			desired := newUserConfigCopy(l, src)
			uc.Hash = desired.Annotations[llsd.AnnotationSourceHash]
			return desired, nil
		},
	})
	return problem, err
}
