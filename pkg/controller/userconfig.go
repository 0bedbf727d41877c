package controller

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// userConfig is spec.overrideConfig (v1alpha1 userConfig) resolved against the cluster.
type userConfig struct {
	// mountName is the ConfigMap in the CR's namespace that the pod mounts.
	mountName string
	// hash is the content hash of the source ConfigMap's data.
	hash string
	// source is set for a ConfigMap in another namespace, which is copied to mountName.
	source *corev1.ConfigMap
}

func userConfigNamespace(l *v1alpha2.LlamaStackDistribution) string {
	if uc := l.Spec.OverrideConfig; uc != nil && uc.ConfigMapNamespace != "" {
		return uc.ConfigMapNamespace
	}
	return l.Namespace
}

// resolveUserConfig checks the referenced ConfigMap: it must exist, hold config.yaml,
// and, in another namespace, allow this CR's namespace. nil, nil when none is referenced.
func (c *Controller) resolveUserConfig(l *v1alpha2.LlamaStackDistribution) (*userConfig, *fault.Problem) {
	uc := l.Spec.OverrideConfig
	if uc == nil {
		return nil, nil
	}
	ns, name := userConfigNamespace(l), uc.ConfigMapName
	cm, problem := c.referencedConfigMap(l, userConfigField, "ConfigMap", ns, name)
	if problem != nil {
		return nil, problem
	}
	if _, ok := cm.Data[llsd.UserConfigKey]; !ok {
		if _, ok := cm.BinaryData[llsd.UserConfigKey]; !ok {
			return nil, &fault.Problem{Reason: v1alpha2.ReasonConfigMapKeyMissing, Message: fmt.Sprintf(
				"ConfigMap %s/%s referenced by "+userConfigField+" has no key %s", ns, name, llsd.UserConfigKey)}
		}
	}
	out := &userConfig{mountName: name, hash: configMapHash(cm)}
	if ns != l.Namespace {
		out.mountName = llsd.UserConfigCopyName(l)
		out.source = cm
	}
	return out, nil
}

// referencedConfigMap looks up a ConfigMap a CR refers to (field names the reference,
// what the kind of ConfigMap) in the cache. One in another namespace must be watched and
// must opt in; a missing one and one that has not opted in get the same answer there, so
// a CR cannot probe which ConfigMaps exist elsewhere.
func (c *Controller) referencedConfigMap(l *v1alpha2.LlamaStackDistribution, field, what, ns, name string) (*corev1.ConfigMap, *fault.Problem) {
	crossNamespace := ns != l.Namespace
	if crossNamespace && c.watchNamespace != "" {
		return nil, &fault.Problem{Reason: v1alpha2.ReasonConfigMapNotAllowed, Message: fmt.Sprintf(
			"%s refers to ConfigMap %s/%s in another namespace, which this controller does not watch (it runs with --namespace=%s); use a ConfigMap in namespace %s",
			field, ns, name, c.watchNamespace, l.Namespace)}
	}
	cm, err := c.cachedConfigMap(ns, name)
	if crossNamespace && (err != nil || !allowsNamespace(cm, l.Namespace)) {
		return nil, notAllowed(ns, name, l.Namespace)
	}
	if err != nil {
		return nil, &fault.Problem{Reason: v1alpha2.ReasonConfigMapNotFound, Message: fmt.Sprintf(
			"%s %s/%s referenced by %s was not found", what, ns, name, field)}
	}
	return cm, nil
}

// allowsNamespace reports whether cm opts in to being used from namespace ns.
func allowsNamespace(cm *corev1.ConfigMap, ns string) bool {
	for _, entry := range strings.Split(cm.Annotations[AllowedNamespacesAnnotation], ",") {
		if e := strings.TrimSpace(entry); e == "*" || e == ns {
			return true
		}
	}
	return false
}

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
			Annotations:     map[string]string{llsd.AnnotationSourceHash: hashData(source.Data, source.BinaryData)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(l, llsd.ControllerKind)},
		},
		Data:       maps.Clone(source.Data),
		BinaryData: maps.Clone(source.BinaryData),
	}
}

// ensureUserConfigCopy keeps the managed copy of a cross-namespace user ConfigMap in
// step with its source (deleteUnneededConfigMaps deletes it once no longer mounted). The
// cache holds only a hash of ConfigMap data, so the source is read live, and only when
// the hashes differ. uc.hash is set to the hash of what the copy holds, so the pods roll
// exactly when the mounted content changes. A source that withdrew its opt-in since the
// cache saw it is a user error.
func (c *Controller) ensureUserConfigCopy(ctx context.Context, l *v1alpha2.LlamaStackDistribution, uc *userConfig) (*fault.Problem, error) {
	if uc == nil || uc.source == nil {
		return nil, nil
	}
	var problem *fault.Problem
	_, err := c.configMapCopies.EnsureWith(ctx, l, children.EnsureOptions[*corev1.ConfigMap]{
		Name: llsd.UserConfigCopyName(l),
		// The copy holds the source's content (an edit of the copy is repaired).
		UpToDate: func(cur *corev1.ConfigMap) bool {
			return cur.Annotations[llsd.AnnotationSourceHash] == uc.hash && configMapHash(cur) == uc.hash
		},
		Build: func(ctx context.Context, _ *corev1.ConfigMap, _ bool) (metav1.Object, error) {
			src, err := c.kubeclient.CoreV1().ConfigMaps(uc.source.Namespace).Get(ctx, uc.source.Name, metav1.GetOptions{})
			if err != nil {
				// Gone or unreadable since the cache saw it: the next event or retry settles it.
				return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", uc.source.Namespace, uc.source.Name, err)
			}
			if !allowsNamespace(src, l.Namespace) {
				problem = notAllowed(src.Namespace, src.Name, l.Namespace)
				return nil, nil
			}
			desired := newUserConfigCopy(l, src)
			uc.hash = desired.Annotations[llsd.AnnotationSourceHash]
			return desired, nil
		},
	})
	return problem, err
}

// notAllowed reports a cross-namespace ConfigMap that is missing or has not opted in.
func notAllowed(ns, name, crNamespace string) *fault.Problem {
	return &fault.Problem{Reason: v1alpha2.ReasonConfigMapNotAllowed, Message: fmt.Sprintf(
		"ConfigMap %s/%s cannot be used from namespace %s: it must exist and list %s in its annotation %s (a comma-separated list of namespaces, or \"*\")",
		ns, name, crNamespace, crNamespace, AllowedNamespacesAnnotation)}
}
