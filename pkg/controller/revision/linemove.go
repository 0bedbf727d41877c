package revision

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// A config its user wrote (overrideConfig, v1alpha1 userConfig) is checked before it
// is rolled out, against the server version that will read it (the image's, when its
// pin or tag tells it): configgen.Preflight finds what that server refuses at start-up
// as far as the file tells (an API or provider type it lacks, a provider whose
// dependency is missing or without a field it requires). A file that would not start
// is never rolled out: the CR keeps what runs and says which line fails on which
// version. Keys that version merely ignores (configgen.Ignored: a top-level safety on
// 1.x, ...) do not hold a file back: it is rolled out, and a ConfigKeyIgnored Warning
// names them, once per file content and version. When the image changes version under an unchanged file (a new pin, or
// image-overrides), the message also says how to keep the old line. The file is read
// live only when its content (or the image) changes, and remembered by its content
// hash. The annotation llamastack.io/skip-config-check: "true" on the CR skips the
// check (an Event says so, once per file content), for a file the check is wrong about.

// AnnotationSkipConfigCheck on a CR skips the pre-flight check of its user config.
const AnnotationSkipConfigCheck = "llamastack.io/skip-config-check"

// ReasonConfigCheckSkipped is the Event of a user config rolled out unchecked.
const ReasonConfigCheckSkipped = "ConfigCheckSkipped"

// ReasonConfigKeyIgnored is the Warning Event of what a config says that its server
// version does not read (a key it dropped, a disabled API it lacks): rolled out, not
// refused, and told once per file content and version.
const ReasonConfigKeyIgnored = "ConfigKeyIgnored"

// UserConfigField names the user config in both versions.
const UserConfigField = "spec.overrideConfig (v1alpha1 spec.server.userConfig)"

// checkUserConfig returns a problem when the CR's user config would not start the
// server version of image. A transient error reading the file is returned as such.
func (r *Resolver) checkUserConfig(ctx context.Context, l *v1alpha2.LlamaStackDistribution, image string, uc *UserConfig) (*fault.Problem, error) {
	if uc == nil {
		return nil, nil
	}
	to := ImageServerVersion(image)
	v, err := configgen.ParseVersion(to)
	if err != nil || !configgen.Known(v) {
		// No version, or one whose shape the controller does not know (overrideConfig
		// is the way to run those): nothing to check against.
		return nil, nil
	}
	key := cache.ObjectName{Namespace: l.Namespace, Name: l.Name}
	if l.Annotations[AnnotationSkipConfigCheck] == "true" {
		if prev, ok := r.skippedChecks.Load(key); !ok || prev.(string) != uc.Hash+"@"+to {
			r.skippedChecks.Store(key, uc.Hash+"@"+to)
			r.Recorder.Eventf(l, corev1.EventTypeWarning, ReasonConfigCheckSkipped,
				"%s: the check of the user config against server %s is skipped (annotation %s); the file is rolled out as it is", UserConfigField, to, AnnotationSkipConfigCheck)
		}
		return nil, nil
	}
	r.skippedChecks.Delete(key)
	ns, name := uc.SourceName(l)
	content, found, err := r.readUserConfig(ctx, l, uc)
	if err != nil || !found {
		return nil, err
	}
	perr := configgen.Preflight(content, v)
	if perr == nil {
		r.tellIgnored(l, uc.Hash+"@"+to, func() string {
			ignored := configgen.Ignored(content, v)
			if len(ignored) == 0 {
				return ""
			}
			return fmt.Sprintf("%s (ConfigMap %s/%s) is rolled out on server %s (image %s), which starts without what these keys say: %s. Remove them from the file to silence this warning",
				UserConfigField, ns, name, to, image, strings.Join(ignored, "; "))
		})
		return nil, nil
	}
	running := r.RunningImage(l)
	from := ImageServerVersion(running)
	if l.Spec.Distribution.Name != "" && running != "" && running != image && from != "" && from != to {
		return &fault.Problem{Reason: v1alpha2.ReasonConfigInvalid, Message: fmt.Sprintf(
			"%s (ConfigMap %s/%s) does not fit server %s, which distribution %s now runs (%s): %v. "+
				"It keeps running %s (server %s). Update the config for server %s, or hold the old line with image-overrides in the operator ConfigMap "+
				"(for example %s: docker.io/ogxai/distribution-%s:0.6.1, a published pre-rename image)",
			UserConfigField, ns, name, to, l.Spec.Distribution.Name, image, perr, running, from, to,
			l.Spec.Distribution.Name, l.Spec.Distribution.Name)}, nil
	}
	return &fault.Problem{Reason: v1alpha2.ReasonConfigInvalid, Message: fmt.Sprintf(
		"%s (ConfigMap %s/%s) would stop server %s (image %s) at start-up: %v. Nothing is rolled out; fix the file, or set the annotation %s: \"true\" on the CR to roll it out unchecked",
		UserConfigField, ns, name, to, image, perr, AnnotationSkipConfigCheck)}, nil
}

// SourceName is the namespace and name of the ConfigMap the user wrote uc in.
func (uc *UserConfig) SourceName(l *v1alpha2.LlamaStackDistribution) (ns, name string) {
	if uc.Source != nil {
		return uc.Source.Namespace, uc.Source.Name
	}
	return l.Namespace, uc.MountName
}

// readUserConfig is the content of the CR's user config, read live only when its
// content hash differs from the one last read for the CR (userConfigs); found is
// false when the ConfigMap or its key is gone.
func (r *Resolver) readUserConfig(ctx context.Context, l *v1alpha2.LlamaStackDistribution, uc *UserConfig) ([]byte, bool, error) {
	ns, name := uc.SourceName(l)
	content, _, found, err := r.userConfigs.Live(ctx, r.Client.CoreV1(), cache.ObjectName{Namespace: l.Namespace, Name: l.Name}, ns, name, llsd.UserConfigKey, uc.Hash)
	return content, found, err
}

// tellIgnored records, once per CR and key (the file's content hash and server
// version), the ConfigKeyIgnored Warning that message returns, if any.
func (r *Resolver) tellIgnored(l *v1alpha2.LlamaStackDistribution, key string, message func() string) {
	name := cache.ObjectName{Namespace: l.Namespace, Name: l.Name}
	if prev, ok := r.ignoredTold.Load(name); ok && prev.(string) == key {
		return
	}
	r.ignoredTold.Store(name, key)
	if m := message(); m != "" {
		r.Recorder.Event(l, corev1.EventTypeWarning, ReasonConfigKeyIgnored, m)
	}
}
