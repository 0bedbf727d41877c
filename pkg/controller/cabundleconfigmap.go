package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// annotationBundleHash on the managed CA bundle ConfigMap records the hash of the data
// the controller wrote, so an edit of it by someone else is noticed and repaired.
const annotationBundleHash = "llamastack.io/bundle-hash"

// caFailure remembers a CA bundle that could not be built from these sources.
type caFailure struct {
	uid         types.UID
	sourcesHash string
	problem     fault.Problem
}

// caRef is one CA bundle source as the cache sees it (keys and a content hash, no data).
type caRef struct {
	cm       *corev1.ConfigMap
	keys     []string // explicit keys; nil reads every key (the ODH bundle)
	optional bool
}

// resolveCABundle finds the CA bundle sources of l in the cache: the ConfigMap of
// spec.networking.tls.caBundle, then the namespace's odh-trusted-ca-bundle when it
// exists. It checks what can be checked without their data.
func (c *Controller) resolveCABundle(l *v1alpha2.LlamaStackDistribution) ([]caRef, *fault.Problem) {
	var refs []caRef
	if tls := llsd.Networking(l).TLS; tls != nil && tls.CABundle != nil {
		spec := tls.CABundle
		ns, name := spec.ConfigMapNamespace, spec.ConfigMapName
		if ns == "" {
			ns = l.Namespace
		}
		keys := []string{revision.CABundleKey}
		if len(spec.ConfigMapKeys) > 0 {
			keys = make([]string, len(spec.ConfigMapKeys))
			for i, k := range spec.ConfigMapKeys {
				keys[i] = string(k)
			}
		}
		if err := validateCAKeys(keys); err != nil {
			return nil, &fault.Problem{Reason: v1alpha2.ReasonCABundleInvalid, Message: err.Error()}
		}
		cm, problem := c.referencedConfigMap(l, "spec.networking.tls.caBundle (v1alpha1 spec.server.tlsConfig.caBundle)", "CA bundle ConfigMap", ns, name)
		if problem != nil {
			return nil, problem
		}
		for _, k := range keys {
			if _, ok := cm.Data[k]; !ok {
				return nil, &fault.Problem{Reason: v1alpha2.ReasonConfigMapKeyMissing, Message: fmt.Sprintf(
					"CA bundle ConfigMap %s/%s has no key '%s'", ns, name, k)}
			}
		}
		refs = append(refs, caRef{cm: cm, keys: keys})
	}
	if odh, err := c.cachedConfigMap(l.Namespace, odhTrustedCABundle); err == nil && len(odh.Data) > 0 {
		refs = append(refs, caRef{cm: odh, optional: true})
	}
	return refs, nil
}

// caSourcesHash identifies the sources and their content, from the cache.
func caSourcesHash(refs []caRef) string {
	h := sha256.New()
	for _, r := range refs {
		fmt.Fprintf(h, "%s/%s|%s|%t|%s\n", r.cm.Namespace, r.cm.Name, strings.Join(r.keys, ","), r.optional, configMapHash(r.cm))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// caBundleMountHash is the content hash of a managed CA bundle ConfigMap, or "" when it
// holds no certificate (then nothing is mounted).
func caBundleMountHash(cm *corev1.ConfigMap) string {
	if _, ok := cm.Data[revision.CABundleKey]; !ok {
		return ""
	}
	return configMapHash(cm)
}

// newCABundleConfigMap is the managed <name>-ca-bundle ConfigMap holding bundle.
func newCABundleConfigMap(l *v1alpha2.LlamaStackDistribution, bundle, sourcesHash string) *corev1.ConfigMap {
	lbls := llsd.ChildLabels(l)
	lbls[llsd.LabelComponent] = "ca-bundle"
	data := map[string]string{}
	if bundle != "" {
		data[revision.CABundleKey] = bundle
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      llsd.CABundleConfigMapName(l),
			Namespace: l.Namespace,
			Labels:    lbls,
			Annotations: map[string]string{
				llsd.AnnotationSourceHash: sourcesHash,
				annotationBundleHash:      hashData(data, nil),
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(l, llsd.ControllerKind)},
		},
		Data: data,
	}
}

// ensureCABundle keeps the managed CA bundle ConfigMap in step with its sources and
// returns the content hash to mount ("" when there is no certificate to mount). The
// sources are read live only when their cached hashes changed, or when the managed
// ConfigMap was edited. Without sources nothing is done here: deleteUnneededConfigMaps
// deletes the ConfigMap once the Deployment no longer mounts it.
func (c *Controller) ensureCABundle(ctx context.Context, l *v1alpha2.LlamaStackDistribution, refs []caRef) (string, *fault.Problem, error) {
	if len(refs) == 0 {
		return "", nil, nil
	}
	sourcesHash := caSourcesHash(refs)
	// A bundle that could not be built is not read again until a source changes.
	key := cache.ObjectName{Namespace: l.Namespace, Name: l.Name}
	if v, ok := c.caFailures.Load(key); ok {
		if f := v.(caFailure); f.uid == l.UID && f.sourcesHash == sourcesHash {
			problem := f.problem
			return "", &problem, nil
		}
	}
	var problem *fault.Problem
	var desired *corev1.ConfigMap
	cur, err := c.configMapCopies.EnsureWith(ctx, l, children.EnsureOptions[*corev1.ConfigMap]{
		Name: llsd.CABundleConfigMapName(l),
		UpToDate: func(cur *corev1.ConfigMap) bool {
			return cur.Annotations[llsd.AnnotationSourceHash] == sourcesHash && configMapHash(cur) == cur.Annotations[annotationBundleHash]
		},
		Build: func(ctx context.Context, _ *corev1.ConfigMap, _ bool) (metav1.Object, error) {
			sources := make([]caSource, 0, len(refs))
			for _, r := range refs {
				src, err := c.kubeclient.CoreV1().ConfigMaps(r.cm.Namespace).Get(ctx, r.cm.Name, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("reading CA bundle ConfigMap %s/%s: %w", r.cm.Namespace, r.cm.Name, err)
				}
				if src.Namespace != l.Namespace && !allowsNamespace(src, l.Namespace) {
					problem = notAllowed(src.Namespace, src.Name, l.Namespace)
					return nil, nil
				}
				sources = append(sources, caSource{Namespace: src.Namespace, Name: src.Name, Data: src.Data, Keys: r.keys, Optional: r.optional})
			}
			bundle, _, warnings, err := buildCABundle(sources)
			for _, w := range warnings {
				c.recorder.Event(l, corev1.EventTypeWarning, "CABundleKeySkipped", w)
			}
			if err != nil {
				problem = &fault.Problem{Reason: v1alpha2.ReasonCABundleInvalid, Message: err.Error()}
				c.caFailures.Store(key, caFailure{uid: l.UID, sourcesHash: sourcesHash, problem: *problem})
				return nil, nil
			}
			c.caFailures.Delete(key)
			desired = newCABundleConfigMap(l, bundle, sourcesHash)
			return desired, nil
		},
	})
	if err != nil || problem != nil {
		return "", problem, err
	}
	if desired != nil {
		return caBundleMountHash(desired), nil, nil
	}
	return caBundleMountHash(cur), nil, nil
}
