package controller

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// Generated config (v1alpha2): a CR that sets providers, resources, storage, disabled
// or baseConfig gets its config.yaml written by pkg/configgen, in an immutable
// ConfigMap <name>-config-<sha256 of the file>, mounted where a user config is
// (/etc/llama-stack/config.yaml), with the Secret-sourced variables in the server's
// environment. The package revision generates the file (Resolver.Resolve); it is
// written here. Every other CR is left exactly as before: nothing here runs for it but
// the clean-up of generated ConfigMaps it owns (none, unless it generated once).

// generatedConfigComponent is the app.kubernetes.io/component of a generated ConfigMap.
const generatedConfigComponent = "config"

// reasonSecretInSettings is the Event of a provider setting that looks like a credential.
const reasonSecretInSettings = "SecretInSettings"

// generationForStatus is what the status reads of the generation; nil when it did not
// run (g nil) or did not finish (an error reading its inputs, retried: neither a config
// nor a problem), so that ConfigGenerated keeps what it said.
func generationForStatus(g *revision.Generation, l *v1alpha2.LlamaStackDistribution) *status.Generation {
	if g == nil || (g.Out == nil && g.Problem == nil) {
		return nil
	}
	out := &status.Generation{Resolved: g.Resolved, Problem: g.Problem}
	if g.Out != nil {
		out.ConfigMapName = g.ConfigMapName(l)
	}
	return out
}

// newGeneratedConfigMap is the immutable ConfigMap holding the generated config.yaml.
func newGeneratedConfigMap(l *v1alpha2.LlamaStackDistribution, g *revision.Generation) *corev1.ConfigMap {
	meta := llsd.ChildObjectMeta(l, g.ConfigMapName(l))
	meta.Labels[llsd.LabelComponent] = generatedConfigComponent
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta,
		Immutable:  func() *bool { t := true; return &t }(),
		Data:       map[string]string{llsd.UserConfigKey: string(g.Out.Config)},
	}
}

// ensureGeneratedConfigMap creates the generated ConfigMap through the one ensure path:
// one of that name that is not the CR's is reported, never written. Its name carries
// the hash of its content, so an existing one of the CR's is up to date.
func (c *Controller) ensureGeneratedConfigMap(ctx context.Context, l *v1alpha2.LlamaStackDistribution, g *revision.Generation) error {
	desired := newGeneratedConfigMap(l, g)
	want := revision.HashData(desired.Data, nil)
	_, err := c.configMapCopies.EnsureWith(ctx, l, children.EnsureOptions[*corev1.ConfigMap]{
		Name:     desired.Name,
		UpToDate: func(cur *corev1.ConfigMap) bool { return revision.ConfigMapHash(cur) == want },
		// The ConfigMap is named by its content, so this runs once per new config: its
		// warnings are told once, not at every sync.
		Build: func(context.Context, *corev1.ConfigMap, bool) (metav1.Object, error) {
			for _, w := range g.Out.Warnings {
				c.recorder.Event(l, corev1.EventTypeWarning, reasonSecretInSettings, w)
			}
			if len(g.Out.Ignored) > 0 {
				c.recorder.Event(l, corev1.EventTypeWarning, revision.ReasonConfigKeyIgnored, strings.Join(g.Out.Ignored, "; "))
			}
			return desired, nil
		},
	})
	return err
}
