package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// sync converges one CR: it resolves its inputs, ensures every child in a fixed order,
// and writes the status when it changed.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	logger.V(4).Info("Started syncing")
	defer func() { logger.V(4).Info("Finished syncing", "duration", time.Since(start)) }()

	cached, err := c.llsdLister.LlamaStackDistributions(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.forgetRecheck(key)
		c.prober.forget(key)
		c.caFailures.Delete(key)
		readyGauge.DeleteLabelValues(key.Namespace, key.Name)
		return nil // deleted: its children go with it (garbage collection)
	}
	if err != nil {
		return err
	}
	l := cached.DeepCopy()
	now := metav1.Now()

	if l.DeletionTimestamp != nil {
		return c.updateStatus(ctx, l, c.calculateStatus(l, observed{}, now), nil)
	}

	obs, err := c.ensureChildren(ctx, l)
	if err != nil {
		if !apierrors.IsConflict(err) && !namespaceTerminating(err) && ctx.Err() == nil {
			// Retried with backoff; meanwhile the CR says what is wrong, as upstream did.
			obs.problems = append(obs.problems, userError{v1alpha1.ReasonDeploymentFailed, "Resource reconciliation failed: " + err.Error()})
			if serr := c.updateStatus(ctx, l, c.calculateStatus(l, obs, now), obs.problems); serr != nil {
				klog.FromContext(ctx).V(2).Info("Could not report the failure in status", "err", serr)
			}
		}
		return err
	}
	if slices.ContainsFunc(obs.problems, func(p userError) bool { return p.reason == v1alpha1.ReasonResourceNotOwned }) {
		// No event announces that someone else's object went away: look again later.
		c.scheduleRecheck(key)
	} else {
		c.forgetRecheck(key)
	}
	if c.prober.enabled() && serving(obs.deployment) {
		// The server answers for itself; asked again every interval, off the workers.
		next := c.prober.cfg.Interval
		if res, ok := c.prober.result(ctx, key, l); ok {
			obs.probe = &res
			next = max(time.Until(res.at.Add(c.prober.cfg.Interval)), time.Second)
		}
		c.queue.AddAfter(key, next)
	}
	st := c.calculateStatus(l, obs, now)
	ready := 0.0
	if meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) {
		ready = 1
	}
	readyGauge.WithLabelValues(key.Namespace, key.Name).Set(ready)
	return c.updateStatus(ctx, l, st, obs.problems)
}

// ensureChildren resolves the CR's inputs and ensures each child. A user error in the
// inputs leaves every child as it is; an object of someone else's under a child's name
// blocks only that child.
func (c *Controller) ensureChildren(ctx context.Context, l *v1alpha1.LlamaStackDistribution) (observed, error) {
	var obs observed
	cfg := c.currentOperatorConfig()

	image, imgProblem := c.resolveImage(l, cfg)
	uc, ucProblem := c.resolveUserConfig(l)
	caRefs, caProblem := c.resolveCABundle(l)
	var errs []error
	// report turns a foreign object, or a child the API server rejects as invalid, into
	// a problem for the user; other errors are returned and retried.
	report := func(err error) bool {
		var no *notOwnedError
		if errors.As(err, &no) {
			obs.problems = append(obs.problems, userError{v1alpha1.ReasonResourceNotOwned, no.Error()})
			return true
		}
		if apierrors.IsInvalid(err) {
			obs.problems = append(obs.problems, userError{v1alpha1.ReasonResourceInvalid,
				"the spec makes a child the API server rejects: " + err.Error()})
			return true
		}
		if err != nil {
			errs = append(errs, err)
		}
		return false
	}

	var copyProblem, bundleProblem *userError
	var caHash string
	if imgProblem == nil && ucProblem == nil && caProblem == nil {
		var err error
		copyProblem, err = c.ensureUserConfigCopy(ctx, l, uc)
		report(err)
		caHash, bundleProblem, err = c.ensureCABundle(ctx, l, caRefs)
		report(err)
	}
	for _, p := range []*userError{imgProblem, ucProblem, caProblem, copyProblem, bundleProblem} {
		if p != nil {
			obs.problems = append(obs.problems, *p)
		}
	}
	if len(obs.problems) > 0 || len(errs) > 0 {
		// Keep what runs: observe the children without changing them.
		obs.deployment, _ = c.deployments.cached(l.Namespace, deploymentName(l))
		obs.service, _ = c.services.cached(l.Namespace, serviceName(l))
		obs.pvc, _ = c.pvcs.cached(l.Namespace, pvcName(l))
		obs.ingress, _ = c.ingresses.cached(l.Namespace, ingressName(l))
		return obs, errors.Join(errs...)
	}

	if l.Spec.Server.Storage != nil {
		pvc, state, err := c.ensurePVC(ctx, l, meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionStorageInSync))
		if !report(err) && err == nil {
			obs.pvc, obs.storage = pvc, &state
		}
	}

	svc, err := c.services.ensure(ctx, c, l, newService(l))
	if !report(err) && err == nil {
		obs.service = svc
	}

	if cfg.networkPolicyKnown {
		if cfg.enableNetworkPolicy {
			_, err := c.networkPolicies.ensure(ctx, c, l, newNetworkPolicy(l, c.operatorNamespace))
			report(err)
		} else {
			report(c.networkPolicies.deleteIfOwned(ctx, c, l, networkPolicyName(l)))
		}
	}

	in := deploymentInputs{image: image, caBundleHash: caHash, openShift: c.openShift}
	if conflict := podConflict(l, in, uc); conflict != nil {
		// The API server would reject the Deployment: say why, and keep what runs.
		obs.problems = append(obs.problems, *conflict)
		obs.deployment, _ = c.deployments.cached(l.Namespace, deploymentName(l))
	} else {
		dep, err := c.ensureDeployment(ctx, l, in, uc)
		if !report(err) && err == nil {
			obs.deployment = dep
		}
	}

	if l.Spec.Server.Autoscaling != nil {
		_, err := c.hpas.ensure(ctx, c, l, newHPA(l))
		report(err)
	} else {
		report(c.hpas.deleteIfOwned(ctx, c, l, hpaName(l)))
	}

	if wantsPDB(l) {
		_, err := c.pdbs.ensure(ctx, c, l, newPDB(l))
		report(err)
	} else {
		report(c.pdbs.deleteIfOwned(ctx, c, l, pdbName(l)))
	}

	if wantsIngress(l) {
		ing, err := c.ingresses.ensure(ctx, c, l, newIngress(l))
		if !report(err) && err == nil {
			obs.ingress = ing
		}
	} else {
		report(c.ingresses.deleteIfOwned(ctx, c, l, ingressName(l)))
	}

	return obs, errors.Join(errs...)
}

// resolveImage picks the server image: spec.server.distribution.image as given, or the
// image of the named distribution, overridden by the operator ConfigMap. While
// image-overrides does not parse, a running Deployment keeps its image.
func (c *Controller) resolveImage(l *v1alpha1.LlamaStackDistribution, cfg operatorConfig) (string, *userError) {
	dist := l.Spec.Server.Distribution
	if dist.Image != "" {
		return dist.Image, nil
	}
	if dist.Name == "" {
		return "", &userError{v1alpha1.ReasonDistributionNotSupported,
			"spec.server.distribution needs a name or an image"}
	}
	image, ok := c.distributions[dist.Name]
	if !ok {
		names := make([]string, 0, len(c.distributions))
		for n := range c.distributions {
			names = append(names, n)
		}
		slices.Sort(names)
		return "", &userError{v1alpha1.ReasonDistributionNotSupported, fmt.Sprintf(
			"distribution %q is not supported; supported distributions: %s (or set spec.server.distribution.image)",
			dist.Name, strings.Join(names, ", "))}
	}
	if cfg.overridesInvalid {
		if running := c.runningImage(l); running != "" {
			return running, nil
		}
		return image, nil
	}
	if override, ok := cfg.imageOverrides[dist.Name]; ok {
		return override, nil
	}
	return image, nil
}

// runningImage is the image of the server container of the CR's Deployment, if it runs
// the same distribution.
func (c *Controller) runningImage(l *v1alpha1.LlamaStackDistribution) string {
	d, err := c.deployments.cached(l.Namespace, deploymentName(l))
	if err != nil || !isControlledBy(d, l) || d.Annotations[annotationDistribution] != l.Spec.Server.Distribution.Name {
		return ""
	}
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if ctr.Name == containerName(l) {
			return ctr.Image
		}
	}
	return ""
}

// ensureDeployment applies the Deployment. With autoscaling, spec.replicas is handed
// over to the HPA without a dip: the controller keeps applying the live value for as
// long as it still owns the field, and drops it once the HPA (or anyone) has written it.
func (c *Controller) ensureDeployment(ctx context.Context, l *v1alpha1.LlamaStackDistribution, in deploymentInputs, uc *userConfig) (*appsv1.Deployment, error) {
	if uc != nil {
		in.userConfigMap, in.userConfigHash = uc.mountName, uc.hash
	}
	if l.Spec.Server.Autoscaling == nil {
		in.replicas = &l.Spec.Replicas
	} else {
		cur, err := c.deployments.cached(l.Namespace, deploymentName(l))
		switch {
		case apierrors.IsNotFound(err):
			in.replicas = ptr.To(hpaMinReplicas(l))
		case err != nil:
			return nil, err
		case isControlledBy(cur, l):
			owned, err := c.deployments.extract(cur, FieldManager)
			if err != nil {
				return nil, fmt.Errorf("extracting our fields of Deployment %s/%s: %w", cur.Namespace, cur.Name, err)
			}
			if owned.Spec != nil && owned.Spec.Replicas != nil && cur.Spec.Replicas != nil {
				in.replicas = ptr.To(*cur.Spec.Replicas)
				// The count comes from the cache: a stale one must not undo the HPA's write.
				return c.deployments.ensureObject(ctx, c, l, newDeployment(l, in), true)
			}
		}
	}
	return c.deployments.ensure(ctx, c, l, newDeployment(l, in))
}

// scheduleRecheck queues the CR again after a backoff that grows with each recheck (2s
// doubling to 5 minutes). Syncs for other reasons in between do not grow it, but they
// re-arm it: the delaying queue keeps one entry per key and moves it to the earliest
// time asked for, so a rate-limited retry can consume a pending recheck.
func (c *Controller) scheduleRecheck(key cache.ObjectName) {
	c.recheckMu.Lock()
	defer c.recheckMu.Unlock()
	at, pending := c.recheckAt[key]
	if !pending || !time.Now().Before(at) {
		at = time.Now().Add(c.recheck.When(key))
		c.recheckAt[key] = at
	}
	c.queue.AddAfter(key, time.Until(at))
}

func (c *Controller) forgetRecheck(key cache.ObjectName) {
	c.recheckMu.Lock()
	defer c.recheckMu.Unlock()
	delete(c.recheckAt, key)
	c.recheck.Forget(key)
}
