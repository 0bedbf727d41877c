package revision

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// CARef is one CA bundle source as the cache sees it (keys and a content hash, no data).
type CARef struct {
	ConfigMap *corev1.ConfigMap
	Keys      []string // explicit keys; nil reads every key (the ODH bundle)
	Optional  bool
}

// resolveCABundle finds the CA bundle sources of l in the cache: the ConfigMap of
// spec.networking.tls.caBundle, then the namespace's odh-trusted-ca-bundle when it
// exists. It checks what can be checked without their data.
func (r *Resolver) resolveCABundle(l *v1alpha2.LlamaStackDistribution) ([]CARef, *fault.Problem) {
	var refs []CARef
	if tls := llsd.Networking(l).TLS; tls != nil && tls.CABundle != nil {
		spec := tls.CABundle
		ns, name := spec.ConfigMapNamespace, spec.ConfigMapName
		if ns == "" {
			ns = l.Namespace
		}
		keys := []string{CABundleKey}
		if len(spec.ConfigMapKeys) > 0 {
			keys = make([]string, len(spec.ConfigMapKeys))
			for i, k := range spec.ConfigMapKeys {
				keys[i] = string(k)
			}
		}
		if err := ValidateCAKeys(keys); err != nil {
			return nil, &fault.Problem{Reason: v1alpha2.ReasonCABundleInvalid, Message: err.Error()}
		}
		cm, problem := r.referencedConfigMap(l, "spec.networking.tls.caBundle (v1alpha1 spec.server.tlsConfig.caBundle)", "CA bundle ConfigMap", ns, name)
		if problem != nil {
			return nil, problem
		}
		for _, k := range keys {
			if _, ok := cm.Data[k]; !ok {
				return nil, &fault.Problem{Reason: v1alpha2.ReasonConfigMapKeyMissing, Message: fmt.Sprintf(
					"CA bundle ConfigMap %s/%s has no key '%s'", ns, name, k)}
			}
		}
		refs = append(refs, CARef{ConfigMap: cm, Keys: keys})
	}
	if odh, err := r.ConfigMap(l.Namespace, ODHTrustedCABundle); err == nil && len(odh.Data) > 0 {
		refs = append(refs, CARef{ConfigMap: odh, Optional: true})
	}
	return refs, nil
}

// CASourcesHash identifies the sources and their content, from the cache.
func CASourcesHash(refs []CARef) string {
	h := sha256.New()
	for _, r := range refs {
		fmt.Fprintf(h, "%s/%s|%s|%t|%s\n", r.ConfigMap.Namespace, r.ConfigMap.Name, strings.Join(r.Keys, ","), r.Optional, ConfigMapHash(r.ConfigMap))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CABundleMountHash is the content hash of a managed CA bundle ConfigMap, or "" when it
// holds no certificate (then nothing is mounted).
func CABundleMountHash(cm *corev1.ConfigMap) string {
	if _, ok := cm.Data[CABundleKey]; !ok {
		return ""
	}
	return ConfigMapHash(cm)
}
