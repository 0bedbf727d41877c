package controller

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// findings collects what a sync finds wrong: problems the user can act on, in the order
// they are found, and errors that are retried.
type findings struct {
	problems []fault.Problem
	errs     []error
}

// add records the problems that are not nil.
func (f *findings) add(ps ...*fault.Problem) {
	for _, p := range ps {
		if p != nil {
			f.problems = append(f.problems, *p)
		}
	}
}

// report turns a foreign object, or a child the API server rejects as invalid, into a
// problem for the user, and records other errors to be returned and retried. It tells
// whether err was a problem for the user.
func (f *findings) report(err error) bool {
	var no *children.NotOwnedError
	if errors.As(err, &no) {
		f.problems = append(f.problems, fault.Problem{Reason: v1alpha2.ReasonResourceNotOwned, Message: no.Error()})
		return true
	}
	if apierrors.IsInvalid(err) {
		f.problems = append(f.problems, fault.Problem{Reason: v1alpha2.ReasonResourceInvalid, Message: "the spec makes a child the API server rejects: " + err.Error()})
		return true
	}
	if err != nil {
		f.errs = append(f.errs, err)
	}
	return false
}

// blocked tells whether anything found so far keeps the children as they are.
func (f *findings) blocked() bool {
	return len(f.problems) > 0 || len(f.errs) > 0
}

// err is the errors to retry, joined.
func (f *findings) err() error { return errors.Join(f.errs...) }

// newResolver is the controller's revision.Resolver: it reads the ConfigMap cache, the
// operator ConfigMap and the Deployment cache through the controller, and the time of
// c.clock, which tests replace.
func (c *Controller) newResolver() *revision.Resolver {
	return &revision.Resolver{
		Client:         c.kubeclient,
		ConfigMap:      c.cachedConfigMap,
		OperatorConfig: c.currentOperatorConfig,
		RunningImage:   c.runningImage,
		SecretVersion:  c.cachedSecretVersion,
		RecheckAfter:   func(key cache.ObjectName, d time.Duration) { c.queue.AddAfter(key, d) },
		Now:            func() time.Time { return c.clock.Now() },
		Recorder:       c.recorder,
		Distributions:  c.distributions,
		WatchNamespace: c.watchNamespace,
	}
}

// currentOperatorConfig parses the operator ConfigMap from the cache.
func (c *Controller) currentOperatorConfig() revision.OperatorConfig {
	cm, err := c.operatorConfig.ConfigMaps(c.operatorNamespace).Get(OperatorConfigMapName)
	if err != nil {
		return revision.MissingOperatorConfig()
	}
	return revision.ParseOperatorConfig(cm, c.distributions)
}

// resolveRevision resolves the CR's revision (revision.Resolver.Resolve): what it finds
// wrong is in rev.Problems, and the errors it met are reported to f.
func (c *Controller) resolveRevision(ctx context.Context, l *v1alpha2.LlamaStackDistribution, f *findings) *revision.Revision {
	rev, errs := c.resolver.Resolve(ctx, l)
	for _, err := range errs {
		f.report(err)
	}
	return rev
}

// writeConfigMaps writes the ConfigMaps the revision mounts (the copy of the user's
// config, the CA bundle, the generated config) when its inputs have no problem and
// nothing failed so far; the revision then names what it mounts.
func (c *Controller) writeConfigMaps(ctx context.Context, l *v1alpha2.LlamaStackDistribution, rev *revision.Revision, f *findings) {
	for _, p := range rev.Problems {
		if p != nil {
			return
		}
	}
	if len(f.errs) > 0 {
		return
	}
	for _, cm := range c.table.configs {
		problem, err := cm.write(ctx, l, rev)
		f.report(err)
		rev.Problems = append(rev.Problems, problem)
	}
}
