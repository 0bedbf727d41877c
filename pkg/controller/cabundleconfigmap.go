package controller

import (
	"context"
	"fmt"

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
				annotationBundleHash:      revision.HashData(data, nil),
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
func (c *Controller) ensureCABundle(ctx context.Context, l *v1alpha2.LlamaStackDistribution, refs []revision.CARef) (string, *fault.Problem, error) {
	if len(refs) == 0 {
		return "", nil, nil
	}
	sourcesHash := revision.CASourcesHash(refs)
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
			return cur.Annotations[llsd.AnnotationSourceHash] == sourcesHash && revision.ConfigMapHash(cur) == cur.Annotations[annotationBundleHash]
		},
		Build: func(ctx context.Context, _ *corev1.ConfigMap, _ bool) (metav1.Object, error) {
			sources := make([]revision.CASource, 0, len(refs))
			for _, r := range refs {
				src, err := c.kubeclient.CoreV1().ConfigMaps(r.ConfigMap.Namespace).Get(ctx, r.ConfigMap.Name, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("reading CA bundle ConfigMap %s/%s: %w", r.ConfigMap.Namespace, r.ConfigMap.Name, err)
				}
				if src.Namespace != l.Namespace && !revision.AllowsNamespace(src, l.Namespace) {
					problem = revision.NotAllowed(src.Namespace, src.Name, l.Namespace)
					return nil, nil
				}
				sources = append(sources, revision.CASource{Namespace: src.Namespace, Name: src.Name, Data: src.Data, Keys: r.Keys, Optional: r.Optional})
			}
			bundle, _, warnings, err := revision.BuildCABundle(sources)
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
		return revision.CABundleMountHash(desired), nil, nil
	}
	return revision.CABundleMountHash(cur), nil, nil
}
