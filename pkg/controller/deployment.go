package controller

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
)

// controlledDeployment is the CR's Deployment in the cache; nil when there is none, or
// when the object of that name is not the CR's.
func (c *Controller) controlledDeployment(l *v1alpha2.LlamaStackDistribution) *appsv1.Deployment {
	d, err := c.deployments.Cached(l.Namespace, llsd.DeploymentName(l))
	if err != nil || !llsd.IsControlledBy(d, l) {
		return nil
	}
	return d
}

// deploymentPlan is the Deployment a sync is about to apply, decided before any child
// is written: the children in front of the pods follow what the pods will run.
type deploymentPlan struct {
	o children.EnsureOptions[*appsv1.Deployment]
	// desired is the Deployment to apply; nil when there is nothing to apply (the
	// object of that name is not the CR's, or is being deleted).
	desired *appsv1.Deployment
	rb      rollout.Outcome
	// keep: the plan keeps the Deployment's template as it runs and changes only its
	// replica count, while a problem holds the rest (planScale).
	keep bool
}

// planDeployment decides the Deployment of the CR's inputs: its replicas, its template
// (the CR's, or the one a rollback holds or makes now). With autoscaling, spec.replicas
// is handed over to the HPA without a dip: the controller keeps applying the live value
// for as long as it still owns the field, and drops it once the HPA (or anyone) has
// written it. It writes nothing but the take-over of a Deployment the upstream
// operator made.
func (c *Controller) planDeployment(ctx context.Context, l *v1alpha2.LlamaStackDistribution, in revision.Inputs) (*deploymentPlan, error) {
	p := &deploymentPlan{o: children.EnsureOptions[*appsv1.Deployment]{Name: llsd.DeploymentName(l)}}
	// On a cache miss (the Deployment lost its managed-by label, say) it is read live:
	// choosing replicas without the running count would scale it down. The write
	// reuses this lookup rather than reading again.
	looked, err := c.deployments.LookUp(ctx, l, p.o.Name)
	if err != nil {
		return nil, err
	}
	cur, found := c.rollouts.SinceCached(l, looked.Obj, looked.Found), looked.Found
	p.o.Looked = &children.Lookup[*appsv1.Deployment]{Obj: cur, Found: found}
	if found && (!llsd.IsControlledBy(cur, l) || cur.DeletionTimestamp != nil) {
		// The write refuses it, or waits for the next one.
		p.o.Build = func(context.Context, *appsv1.Deployment, bool) (metav1.Object, error) { return nil, nil }
		return p, nil
	}
	if l.Spec.Workload.Autoscaling == nil {
		in.Replicas = ptr.To(llsd.SpecReplicas(l))
	} else if !found {
		in.Replicas = ptr.To(children.HPAMinReplicas(l))
	} else {
		owned, err := c.deployments.Extract(cur, FieldManager)
		if err != nil {
			return nil, fmt.Errorf("extracting our fields of Deployment %s/%s: %w", cur.Namespace, cur.Name, err)
		}
		if owned.Spec != nil && owned.Spec.Replicas != nil && cur.Spec.Replicas != nil {
			in.Replicas = ptr.To(*cur.Spec.Replicas)
			// The count comes from the cache: a stale one must not undo the HPA's write.
			p.o.Precondition = true
		}
	}
	desired, err := c.desiredDeployment(l, in, cur, found)
	if err != nil {
		return nil, err
	}
	if desired, err = c.rollouts.Apply(ctx, l, cur, found, desired, &p.rb); err != nil {
		return nil, err
	}
	p.desired, p.o.Build = desired, children.Fixed[*appsv1.Deployment](desired)
	return p, nil
}

// applyDeployment applies the plan; a rollback it makes is told in a Warning Event,
// counted, and remembered until the cache has it.
func (c *Controller) applyDeployment(ctx context.Context, l *v1alpha2.LlamaStackDistribution, p *deploymentPlan) (*appsv1.Deployment, rollout.Outcome, error) {
	dep, err := c.deployments.EnsureWith(ctx, l, p.o)
	if err == nil && p.rb.RolledBack {
		c.recorder.Event(l, corev1.EventTypeWarning, v1alpha2.ReasonRolledBack, rollout.RolledBackMessage(p.rb.Status))
		rollbacksTotal.Inc()
		// A rollback is made only of a Deployment there was (Looked found).
		c.rollouts.Remember(l, p.o.Looked.Obj, dep)
	}
	return dep, p.rb, err
}

// desiredDeployment is the Deployment made of the CR's inputs, given the one that exists.
func (c *Controller) desiredDeployment(l *v1alpha2.LlamaStackDistribution, in revision.Inputs, cur *appsv1.Deployment, found bool) (*appsv1.Deployment, error) {
	desired := children.NewDeployment(l, in)
	if !found || children.HasSpreading(&cur.Spec.Template.Spec) {
		return desired, nil
	}
	// A Deployment made by an earlier release at one replica has no default
	// spreading: adding it alone would roll every such server once, at the
	// controller's upgrade (with storage, an outage). It is added with the next
	// change of the pod template, which rolls the pods anyway; a write of the
	// Deployment's own metadata or replicas rolls nothing and does not bring it,
	// scaling up included: scaling never rolls pods.
	in.LegacySpread = true
	legacy := children.NewDeployment(l, in)
	owned, err := c.deployments.Extract(cur, FieldManager)
	if err != nil {
		return nil, fmt.Errorf("extracting our fields of Deployment %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	ac, err := children.ToApplyConfiguration[appsac.DeploymentApplyConfiguration](legacy)
	if err != nil {
		return nil, err
	}
	if owned.Spec != nil && ac.Spec != nil && equality.Semantic.DeepEqual(owned.Spec.Template, ac.Spec.Template) {
		return legacy, nil
	}
	return desired, nil
}

// planScale is the plan of a sync whose problem holds the Deployment's template: the
// Deployment that serves keeps its template exactly as it runs, and only its replica
// count follows the CR, so that scaling is never held by a change refused. Server-side
// apply with one field manager drops what an apply leaves out, so the object applied is
// what our manager owns in the Deployment, with the CR's replica count. The count
// comes from the CR; the rest from the cache, so the apply carries its resourceVersion:
// a stale cache must not put back a template the controller has since replaced. nil
// when there is nothing to scale: no Deployment of the CR's in the cache (nothing
// serves), or autoscaling, which leaves the count to the HPA. replicas is the count to
// apply (the CR's, or what runs while a scale-up must wait: holdTemplate).
func (c *Controller) planScale(l *v1alpha2.LlamaStackDistribution, replicas int32) *deploymentPlan {
	if l.Spec.Workload.Autoscaling != nil {
		return nil
	}
	cur := c.controlledDeployment(l)
	if cur == nil {
		return nil
	}
	// A rollback this controller wrote may not be in the cache yet: its template is the
	// one that runs.
	cur = c.rollouts.SinceCached(l, cur, true)
	return &deploymentPlan{keep: true, o: children.EnsureOptions[*appsv1.Deployment]{
		Name:         llsd.DeploymentName(l),
		Looked:       &children.Lookup[*appsv1.Deployment]{Obj: cur, Found: true},
		Precondition: true,
		Build: func(_ context.Context, cur *appsv1.Deployment, _ bool) (metav1.Object, error) {
			return c.scaledDeployment(cur, replicas)
		},
	}}
}

// scaledDeployment is what our manager owns in cur with spec.replicas set to replicas.
func (c *Controller) scaledDeployment(cur *appsv1.Deployment, replicas int32) (*appsv1.Deployment, error) {
	owned, err := c.deployments.Extract(cur, FieldManager)
	if err != nil {
		return nil, fmt.Errorf("extracting our fields of Deployment %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	// Read into a Deployment of its own, field for field: the apply holds exactly what
	// our manager owns.
	raw, err := json.Marshal(owned)
	if err != nil {
		return nil, err
	}
	d := &appsv1.Deployment{}
	if err := json.Unmarshal(raw, d); err != nil {
		return nil, fmt.Errorf("reading our fields of Deployment %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	d.Spec.Replicas = ptr.To(replicas)
	return d, nil
}
