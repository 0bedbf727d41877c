package controller

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
)

// A CR that runs a config its user wrote (overrideConfig, v1alpha1 userConfig) keeps
// that file when its image changes server version: when a new pin (or image-overrides)
// moves the distribution from one version to another, the file is checked against the
// version it would meet (configgen.Fits: the APIs, provider types and keys that
// version lacks). A file that does not fit is never rolled onto it: the CR keeps what
// runs and says which line fails on which version and how to keep the old line. The
// file is read live only when such a move is due, and remembered by its content hash.

// checkUserConfigMove returns a problem when the CR's user config does not fit the
// server version of image, which replaces the one running. A transient error reading
// the file is returned as such.
func (c *Controller) checkUserConfigMove(ctx context.Context, l *v1alpha2.LlamaStackDistribution, image string, uc *userConfig) (*userError, error) {
	if uc == nil || l.Spec.Distribution.Name == "" {
		return nil, nil
	}
	running := c.runningImage(l)
	if running == "" || running == image {
		return nil, nil
	}
	to, from := imageServerVersion(image), imageServerVersion(running)
	if to == "" || from == "" || to == from {
		return nil, nil
	}
	v, err := configgen.ParseVersion(to)
	if err != nil {
		return nil, nil
	}
	ns, name := l.Namespace, uc.mountName
	if uc.source != nil {
		ns, name = uc.source.Namespace, uc.source.Name
	}
	content, _, found, err := c.userConfigs.live(ctx, c.kubeclient.CoreV1(), cache.ObjectName{Namespace: l.Namespace, Name: l.Name}, ns, name, userConfigKey, uc.hash)
	if err != nil || !found {
		return nil, err
	}
	if err := configgen.Fits(content, v); err != nil {
		return &userError{v1alpha2.ReasonConfigInvalid, fmt.Sprintf(
			"spec.server.userConfig (ConfigMap %s/%s) does not fit server %s, which distribution %s now runs (%s): %v. "+
				"It keeps running %s (server %s). Update the config for server %s, or hold the old line with image-overrides in the operator ConfigMap "+
				"(for example %s: docker.io/ogxai/distribution-%s:0.6.1, a published pre-rename image)",
			ns, name, to, l.Spec.Distribution.Name, image, err, running, from, to,
			l.Spec.Distribution.Name, l.Spec.Distribution.Name)}, nil
	}
	return nil, nil
}
