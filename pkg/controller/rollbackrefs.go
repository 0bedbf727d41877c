package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// templateRef is a ConfigMap or Secret a pod template needs to start: one its pods
// mount or read env from, not marked optional.
type templateRef struct {
	kind, name string
}

func (r templateRef) String() string { return r.kind + " " + r.name }

// templateRefs lists, once each and in order of first use, the ConfigMaps and Secrets
// without which the pods of t do not start (the kubelet waits for them for ever).
func templateRefs(t *corev1.PodTemplateSpec) []templateRef {
	var refs []templateRef
	add := func(kind, name string, optional *bool) {
		r := templateRef{kind, name}
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
func (c *Controller) missingRef(ctx context.Context, namespace string, t *corev1.PodTemplateSpec, secrets bool) (*templateRef, error) {
	for _, r := range templateRefs(t) {
		var err error
		switch {
		case r.kind == "ConfigMap":
			_, err = c.cachedConfigMap(namespace, r.name)
		case secrets:
			_, err = c.kubeclient.CoreV1().Secrets(namespace).Get(ctx, r.name, metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			return &r, nil
		}
		if err != nil {
			return nil, fmt.Errorf("getting %s %s/%s: %w", r.kind, namespace, r.name, err)
		}
	}
	return nil, nil
}
