package revision

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// UserConfig is spec.overrideConfig (v1alpha1 userConfig) resolved against the cluster.
// The pods never mount the user's ConfigMap itself: they mount an immutable copy named
// by its content hash, made once the content is checked, so that an edit the check
// refuses reaches no pod (the kubelet would push an edit of a mounted ConfigMap into
// running pods, and a new pod would read it).
type UserConfig struct {
	// MountName is the ConfigMap in the CR's namespace that the pod mounts: the copy.
	MountName string
	// Hash is the content hash of the source ConfigMap's data.
	Hash string
	// Source is the ConfigMap the user wrote (in the CR's namespace or another), which
	// is copied to MountName; nil for a config the controller generated.
	Source *corev1.ConfigMap
}

// UserConfigNamespace is the namespace of the CR's user ConfigMap.
func UserConfigNamespace(l *v1alpha2.LlamaStackDistribution) string {
	if uc := l.Spec.OverrideConfig; uc != nil && uc.ConfigMapNamespace != "" {
		return uc.ConfigMapNamespace
	}
	return l.Namespace
}

// resolveUserConfig checks the referenced ConfigMap: it must exist, hold config.yaml,
// and, in another namespace, allow this CR's namespace. nil, nil when none is referenced.
func (r *Resolver) resolveUserConfig(l *v1alpha2.LlamaStackDistribution) (*UserConfig, *fault.Problem) {
	uc := l.Spec.OverrideConfig
	if uc == nil {
		return nil, nil
	}
	ns, name := UserConfigNamespace(l), uc.ConfigMapName
	cm, problem := r.referencedConfigMap(l, UserConfigField, "ConfigMap", ns, name)
	if problem != nil {
		return nil, problem
	}
	if _, ok := cm.Data[llsd.UserConfigKey]; !ok {
		if _, ok := cm.BinaryData[llsd.UserConfigKey]; !ok {
			return nil, &fault.Problem{Reason: v1alpha2.ReasonConfigMapKeyMissing, Message: fmt.Sprintf(
				"ConfigMap %s/%s referenced by "+UserConfigField+" has no key %s", ns, name, llsd.UserConfigKey)}
		}
	}
	hash := ConfigMapHash(cm)
	return &UserConfig{MountName: llsd.UserConfigCopyName(l, hash), Hash: hash, Source: cm}, nil
}

// referencedConfigMap looks up a ConfigMap a CR refers to (field names the reference,
// what the kind of ConfigMap) in the cache. One in another namespace must be watched and
// must opt in; a missing one and one that has not opted in get the same answer there, so
// a CR cannot probe which ConfigMaps exist elsewhere.
func (r *Resolver) referencedConfigMap(l *v1alpha2.LlamaStackDistribution, field, what, ns, name string) (*corev1.ConfigMap, *fault.Problem) {
	crossNamespace := ns != l.Namespace
	if crossNamespace && r.WatchNamespace != "" {
		return nil, &fault.Problem{Reason: v1alpha2.ReasonConfigMapNotAllowed, Message: fmt.Sprintf(
			"%s refers to ConfigMap %s/%s in another namespace, which this controller does not watch (it runs with --namespace=%s); use a ConfigMap in namespace %s",
			field, ns, name, r.WatchNamespace, l.Namespace)}
	}
	cm, err := r.ConfigMap(ns, name)
	if crossNamespace && (err != nil || !AllowsNamespace(cm, l.Namespace)) {
		return nil, NotAllowed(ns, name, l.Namespace)
	}
	if err != nil {
		return nil, &fault.Problem{Reason: v1alpha2.ReasonConfigMapNotFound, Message: fmt.Sprintf(
			"%s %s/%s referenced by %s was not found", what, ns, name, field)}
	}
	return cm, nil
}

// AllowsNamespace reports whether cm opts in to being used from namespace ns.
func AllowsNamespace(cm *corev1.ConfigMap, ns string) bool {
	for _, entry := range strings.Split(cm.Annotations[llsd.AllowedNamespacesAnnotation], ",") {
		if e := strings.TrimSpace(entry); e == "*" || e == ns {
			return true
		}
	}
	return false
}

// NotAllowed reports a cross-namespace ConfigMap that is missing or has not opted in.
func NotAllowed(ns, name, crNamespace string) *fault.Problem {
	return &fault.Problem{Reason: v1alpha2.ReasonConfigMapNotAllowed, Message: fmt.Sprintf(
		"ConfigMap %s/%s cannot be used from namespace %s: it must exist and list %s in its annotation %s (a comma-separated list of namespaces, or \"*\")",
		ns, name, crNamespace, crNamespace, llsd.AllowedNamespacesAnnotation)}
}
