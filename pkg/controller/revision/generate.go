package revision

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// Generated config (v1alpha2): a CR that sets providers, resources, storage, disabled
// or baseConfig gets its config.yaml written by pkg/configgen (generate), which
// pkg/controller writes in an immutable ConfigMap <name>-config-<sha256 of the file>,
// mounted where a user config is (/etc/llama-stack/config.yaml), with the
// Secret-sourced variables in the server's environment. Nothing here runs for any
// other CR.

// Generation is the outcome of config generation for a CR that asks for it.
type Generation struct {
	// Out is the generated config; nil on failure.
	Out *configgen.Output
	// Image is the image the Deployment runs with it.
	Image string
	// Resolved is status.resolvedDistribution on success.
	Resolved v1alpha2.ResolvedDistributionStatus
	// Problem is why nothing could be generated: a user error.
	Problem *fault.Problem
}

// ConfigMapName is the generated ConfigMap's name.
func (g *Generation) ConfigMapName(l *v1alpha2.LlamaStackDistribution) string {
	return llsd.GeneratedConfigMapName(l, g.Out.Hash)
}

// baseMemo is the last base config read live for a CR, by its ConfigMap's content hash:
// the ConfigMap cache keeps only hashes, and a sync of an unchanged CR sends nothing.
type baseMemo struct {
	namespace, name, key, hash string
	content                    []byte
	found                      bool
}

// ConfigMapReads holds a baseMemo per CR (cache.ObjectName).
type ConfigMapReads struct{ m sync.Map }

// Forget drops what was read for the CR.
func (b *ConfigMapReads) Forget(key cache.ObjectName) { b.m.Delete(key) }

// generate runs configgen for a generating CR on the image chosen for it (chooseImage):
// it resolves the server version and the base. It returns a transient error only when
// reading the base failed.
func (r *Resolver) generate(ctx context.Context, l *v1alpha2.LlamaStackDistribution, img serverImage) (*Generation, error) {
	g := &Generation{}
	report := func(p *fault.Problem) (*Generation, error) {
		if p.Reason == v1alpha2.ReasonBaseConfigRequired && !GeneratesForFields(l) {
			p.Message += " (spec.networking.tls needs a config the controller writes, or one of yours that names the certificate, to tell the server where its certificate is)"
		}
		g.Problem = p
		return g, nil
	}
	fail := func(reason, field, message string) (*Generation, error) {
		return report(&fault.Problem{Reason: reason, Message: field + ": " + message})
	}
	image, version, problem := img.forConfig()
	if problem != nil {
		return report(problem)
	}
	g.Image = image
	var (
		source, baseField string
		base              []byte
	)
	if d := img.dist; img.from != imageFromSpec && l.Spec.BaseConfig == nil {
		b, ok := d.BaseFor(version)
		if !ok {
			return fail(v1alpha2.ReasonBaseConfigRequired, "spec.baseConfig", fmt.Sprintf(
				"distribution %s runs image %s (server %s), for which the controller has no base config (it has them for %s): set spec.baseConfig",
				d.Name, g.Image, version, strings.Join(d.BaseVersions(), ", ")))
		}
		base = b
		source, baseField = "distribution:"+d.Name, "spec.distribution.name"
		if version != d.ServerVersion {
			source = "distribution:" + d.Name + "@" + version
		}
	}
	if bc := l.Spec.BaseConfig; bc != nil {
		key := string(bc.Key)
		if key == "" {
			key = llsd.UserConfigKey
		}
		content, problem, err := r.readBaseConfig(ctx, l, bc.ConfigMapName, key)
		if err != nil || problem != nil {
			g.Problem = problem
			return g, err
		}
		base, source, baseField = content, "baseConfig:"+bc.ConfigMapName+"/"+key, "spec.baseConfig"
	}
	in := configgen.Input{Name: l.Name, Spec: l.Spec, ServerVersion: version, Base: base, BaseField: baseField}
	if llsd.TLSEnabled(l) {
		in.TLS = &serverTLSFiles
	}
	out, err := configgen.Generate(in)
	if err != nil {
		var ge *configgen.Error
		if errors.As(err, &ge) {
			return fail(ge.Reason, ge.Field, ge.Message)
		}
		return fail(v1alpha2.ReasonConfigInvalid, "spec", err.Error())
	}
	g.Out = out
	g.Resolved = v1alpha2.ResolvedDistributionStatus{Image: g.Image, ServerVersion: version, ConfigSource: source, ConfigHash: out.Hash}
	return g, nil
}

// readBaseConfig returns the content of spec.baseConfig's key. The ConfigMap cache says
// whether it exists, has the key, and the hash of its content; the content itself is
// read live only when that hash differs from the one last read for this CR.
func (r *Resolver) readBaseConfig(ctx context.Context, l *v1alpha2.LlamaStackDistribution, name, key string) ([]byte, *fault.Problem, error) {
	cm, problem := r.referencedConfigMap(l, "spec.baseConfig", "ConfigMap", l.Namespace, name)
	if problem != nil {
		return nil, problem, nil
	}
	_, inData := cm.Data[key]
	_, inBinary := cm.BinaryData[key]
	if !inData && !inBinary {
		return nil, &fault.Problem{Reason: v1alpha2.ReasonConfigMapKeyMissing, Message: fmt.Sprintf(
			"ConfigMap %s/%s referenced by spec.baseConfig has no key %s", l.Namespace, name, key)}, nil
	}
	crKey := cache.ObjectName{Namespace: l.Namespace, Name: l.Name}
	content, exists, found, err := r.baseConfigs.Live(ctx, r.Client.CoreV1(), crKey, l.Namespace, name, key, ConfigMapHash(cm))
	switch {
	case err != nil:
		return nil, nil, err
	case !exists:
		return nil, &fault.Problem{Reason: v1alpha2.ReasonConfigMapNotFound, Message: fmt.Sprintf(
			"ConfigMap %s/%s referenced by spec.baseConfig was not found", l.Namespace, name)}, nil
	case !found:
		return nil, &fault.Problem{Reason: v1alpha2.ReasonConfigMapKeyMissing, Message: fmt.Sprintf(
			"ConfigMap %s/%s referenced by spec.baseConfig has no key %s", l.Namespace, name, key)}, nil
	}
	return content, nil, nil
}

// Live returns key of the ConfigMap ns/name: from the memo when it holds that content
// hash for the CR, else read live and remembered. exists and found say whether the
// ConfigMap and its key are there.
func (b *ConfigMapReads) Live(ctx context.Context, cms typedcorev1.ConfigMapsGetter, crKey cache.ObjectName, ns, name, key, hash string) (content []byte, exists, found bool, err error) {
	if v, ok := b.m.Load(crKey); ok {
		if m := v.(baseMemo); m.namespace == ns && m.name == name && m.key == key && m.hash == hash && m.found {
			return m.content, true, true, nil
		}
	}
	cm, err := cms.ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, false, nil
	}
	if err != nil {
		return nil, false, false, fmt.Errorf("reading ConfigMap %s/%s: %w", ns, name, err)
	}
	if s, ok := cm.Data[key]; ok {
		content, found = []byte(s), true
	} else if bin, ok := cm.BinaryData[key]; ok {
		content, found = bin, true
	}
	if found {
		b.m.Store(crKey, baseMemo{namespace: ns, name: name, key: key, hash: HashData(cm.Data, cm.BinaryData), content: content, found: true})
	}
	return content, true, found, nil
}
