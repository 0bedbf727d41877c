package controller

import (
	"context"
	"errors"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
)

// Deleting the managed ConfigMaps a CR no longer needs, once no pod template that
// may still run mounts them.

// deleteUnneededConfigMaps deletes the managed ConfigMaps of one name per CR (the CA
// bundle, and the user-config copy an earlier release rewrote in place) that the CR no
// longer needs, once dep, the Deployment as the API server has it, no longer mounts them
// and has rolled out: pods never lose a volume they still use (the old pods of a rollout
// still mount it; the Deployment's status events bring the CR back once the rollout is
// complete).
func (c *Controller) deleteUnneededConfigMaps(ctx context.Context, l *v1alpha2.LlamaStackDistribution, caRefs []revision.CARef, dep *appsv1.Deployment) error {
	if dep != nil {
		if _, reason, _ := rollout.Progress(dep, nil); reason != v1alpha2.ReasonRolloutComplete {
			return nil
		}
	}
	var errs []error
	for _, cm := range []struct {
		name   string
		needed bool
	}{
		{llsd.LegacyUserConfigCopyName(l), false},
		{llsd.CABundleConfigMapName(l), len(caRefs) > 0},
	} {
		if cm.needed || mountsConfigMap(dep, cm.name) {
			continue
		}
		errs = append(errs, c.configMapCopies.DeleteIfOwned(ctx, l, cm.name))
	}
	return errors.Join(errs...)
}

// mountsConfigMap tells whether d's pod template has a volume of the named ConfigMap.
func mountsConfigMap(d *appsv1.Deployment, name string) bool {
	return d != nil && templateMountsConfigMap(&d.Spec.Template.Spec, name)
}

// deleteUnusedConfigMaps deletes the CR's ConfigMaps named by their content (the
// generated configs and the user-config copies) other than current (those the revision
// mounts) that neither the Deployment nor any of its ReplicaSets mounts, once the
// Deployment has rolled out: a rollback, or `kubectl rollout undo` to a revision still
// kept, finds its ConfigMap. The CR's ConfigMaps are found through the owner index of
// the ConfigMap cache, the ReplicaSets through the ReplicaSet cache: a sync sends a
// request only to delete.
func (c *Controller) deleteUnusedConfigMaps(ctx context.Context, l *v1alpha2.LlamaStackDistribution, current []string, dep *appsv1.Deployment) error {
	owned, err := c.configMapCache.ByIndex(controllerUIDIndex, string(l.UID))
	if err != nil {
		return err
	}
	var candidates []string
	for _, o := range owned {
		m, ok := o.(metav1.Object)
		if !ok || m.GetNamespace() != l.Namespace || slices.Contains(current, m.GetName()) ||
			!(llsd.IsGeneratedConfigMapName(l, m.GetName()) || llsd.IsUserConfigCopyName(l, m.GetName())) {
			continue
		}
		if m.GetDeletionTimestamp() == nil && !mountsConfigMap(dep, m.GetName()) {
			candidates = append(candidates, m.GetName())
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	if dep != nil {
		if _, reason, _ := rollout.Progress(dep, nil); reason != v1alpha2.ReasonRolloutComplete {
			return nil
		}
	}
	var inUse []*appsv1.ReplicaSet
	if dep != nil {
		rss, err := c.replicaSets.ReplicaSets(l.Namespace).List(labels.Everything())
		if err != nil {
			return err
		}
		for _, rs := range rss {
			if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.Kind == "Deployment" && ref.UID == dep.UID {
				inUse = append(inUse, rs)
			}
		}
	}
	var errs []error
	for _, name := range candidates {
		used := false
		for _, rs := range inUse {
			if templateMountsConfigMap(&rs.Spec.Template.Spec, name) {
				used = true
				break
			}
		}
		if used {
			klog.FromContext(ctx).V(4).Info("Keeping a ConfigMap a ReplicaSet still mounts", "configMap", klog.KRef(l.Namespace, name))
			continue
		}
		errs = append(errs, c.configMapCopies.DeleteIfOwned(ctx, l, name))
	}
	return errors.Join(errs...)
}

// templateMountsConfigMap tells whether a pod spec has a volume of the named ConfigMap.
func templateMountsConfigMap(spec *corev1.PodSpec, name string) bool {
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == name {
			return true
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil && src.ConfigMap.Name == name {
					return true
				}
			}
		}
	}
	return false
}
