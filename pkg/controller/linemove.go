package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// userConfigMemo is the last user config read live for a CR.
type userConfigMemo struct {
	namespace, name, hash string
	content               []byte
}

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
	content, err := c.readUserConfig(ctx, cache.ObjectName{Namespace: l.Namespace, Name: l.Name}, ns, name, uc.hash)
	if err != nil || content == nil {
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

// readUserConfig returns config.yaml of the ConfigMap ns/name, read live unless the
// content of that hash was read before for this CR; nil when it is gone.
func (c *Controller) readUserConfig(ctx context.Context, key cache.ObjectName, ns, name, hash string) ([]byte, error) {
	if v, ok := c.userConfigs.Load(key); ok {
		if m := v.(userConfigMemo); m.namespace == ns && m.name == name && m.hash == hash {
			return m.content, nil
		}
	}
	cm, err := c.kubeclient.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", ns, name, err)
	}
	content := []byte(cm.Data[userConfigKey])
	if b, ok := cm.BinaryData[userConfigKey]; ok && cm.Data[userConfigKey] == "" {
		content = b
	}
	c.userConfigs.Store(key, userConfigMemo{namespace: ns, name: name, hash: hashData(cm.Data, cm.BinaryData), content: content})
	return content, nil
}
