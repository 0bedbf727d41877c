package rollout

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TemplateRef is a ConfigMap or Secret a pod template needs to start: one its pods
// mount or read env from, not marked optional.
type TemplateRef struct {
	Kind, Name string
}

func (r TemplateRef) String() string { return r.Kind + " " + r.Name }

// TemplateRefs lists, once each and in order of first use, the ConfigMaps and Secrets
// without which the pods of t do not start (the kubelet waits for them for ever).
func TemplateRefs(t *corev1.PodTemplateSpec) []TemplateRef {
	var refs []TemplateRef
	add := func(kind, name string, optional *bool) {
		r := TemplateRef{kind, name}
		if name != "" && !ptr.Deref(optional, false) && !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	for _, v := range t.Spec.Volumes {
		if cm := v.ConfigMap; cm != nil {
			add("ConfigMap", cm.Name, cm.Optional)
		}
		if s := v.Secret; s != nil {
			add("Secret", s.SecretName, s.Optional)
		}
		if p := v.Projected; p != nil {
			for _, src := range p.Sources {
				if cm := src.ConfigMap; cm != nil {
					add("ConfigMap", cm.Name, cm.Optional)
				}
				if s := src.Secret; s != nil {
					add("Secret", s.Name, s.Optional)
				}
			}
		}
	}
	for _, c := range slices.Concat(t.Spec.InitContainers, t.Spec.Containers) {
		for _, e := range c.EnvFrom {
			if cm := e.ConfigMapRef; cm != nil {
				add("ConfigMap", cm.Name, cm.Optional)
			}
			if s := e.SecretRef; s != nil {
				add("Secret", s.Name, s.Optional)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if cm := e.ValueFrom.ConfigMapKeyRef; cm != nil {
				add("ConfigMap", cm.Name, cm.Optional)
			}
			if s := e.ValueFrom.SecretKeyRef; s != nil {
				add("Secret", s.Name, s.Optional)
			}
		}
	}
	return refs
}

// missingRef is the first of the objects the pods of t need that no longer exists in
// namespace, or nil. ConfigMaps are read from the cache, which holds every ConfigMap;
// Secrets, which the controller does not cache, live when secrets is set: a read made
// only when a rollback is about to be made.
func (r *Rollouts) missingRef(ctx context.Context, namespace string, t *corev1.PodTemplateSpec, secrets bool) (*TemplateRef, error) {
	for _, ref := range TemplateRefs(t) {
		var err error
		switch {
		case ref.Kind == "ConfigMap":
			_, err = r.ConfigMap(namespace, ref.Name)
		case secrets:
			_, err = r.Client.CoreV1().Secrets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			return &ref, nil
		}
		if err != nil {
			return nil, fmt.Errorf("getting %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
		}
	}
	return nil, nil
}
