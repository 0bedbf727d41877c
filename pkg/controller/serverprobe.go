package controller

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/probe"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// probeService is how the prober reaches l's server: its Service, at the port the CR
// asks for (the Service's, whatever port the pods listen on).
func probeService(l *v1alpha2.LlamaStackDistribution) probe.Service {
	return probe.Service{Namespace: l.Namespace, Name: llsd.ServiceName(l), Port: llsd.Port(l)}
}

// probeTLS is how the controller reaches the server of d: nil when d's pods serve plain
// HTTP; else trusting serverRoots.
func (c *Controller) probeTLS(ctx context.Context, l *v1alpha2.LlamaStackDistribution, d *appsv1.Deployment) *probe.TLS {
	if !children.ServesTLS(d) {
		return nil
	}
	return &probe.TLS{RootCAs: c.serverRoots(ctx, l, d)}
}

// serverRoots are the CA certificates (PEM) that verify the server of d: the last good
// read of the TLS Secret's ca.crt and the CA bundle d mounts (read live only when its
// content changes: caTrust); empty when neither is known.
func (c *Controller) serverRoots(ctx context.Context, l *v1alpha2.LlamaStackDistribution, d *appsv1.Deployment) []byte {
	key := cache.ObjectName{Namespace: l.Namespace, Name: l.Name}
	var roots []byte
	if last := c.resolver.LastTLS(key); last != nil {
		roots = append(roots, last.CA...)
	}
	hash := ""
	if d != nil {
		hash = d.Spec.Template.Annotations[llsd.AnnotationCABundleHash]
	}
	if hash != "" {
		name := llsd.CABundleConfigMapName(l)
		content, _, found, err := c.caTrust.Live(ctx, c.kubeclient.CoreV1(), key, l.Namespace, name, revision.CABundleKey, hash)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Could not read the CA bundle the server trusts", "configMap", klog.KRef(l.Namespace, name), "err", err)
		} else if found {
			if len(roots) > 0 && !strings.HasSuffix(string(roots), "\n") {
				roots = append(roots, '\n')
			}
			roots = append(roots, content...)
		}
	}
	return roots
}
