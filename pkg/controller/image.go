package controller

import (
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// The server image is chosen in the package revision (Resolver.Resolve); what it reads
// of the running Deployment is read here, where the Deployment cache and the field
// manager's applied fields are (the Resolver's RunningImage).

// runningImage is the image the controller last chose for the CR's Deployment, if it
// runs the same distribution: read from the fields the controller still owns (its
// llamastack.io/image annotation, else the server container's image), so that a hand
// edit of either (which takes the field from the controller) is repaired, not adopted.
func (c *Controller) runningImage(l *v1alpha2.LlamaStackDistribution) string {
	d, err := c.deployments.Cached(l.Namespace, llsd.DeploymentName(l))
	if err != nil || !llsd.IsControlledBy(d, l) || d.Annotations[llsd.AnnotationDistribution] != l.Spec.Distribution.Name {
		return ""
	}
	owned, ok := children.AppliedFields(d, FieldManager)
	if !ok {
		return ""
	}
	if image := d.Annotations[llsd.AnnotationImage]; image != "" && owned.Has(fieldpath.MakePathOrDie("metadata", "annotations", llsd.AnnotationImage)) {
		return image
	}
	name := llsd.ContainerName(l)
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if ctr.Name == name && ctr.Image != "" &&
			owned.Has(fieldpath.MakePathOrDie("spec", "template", "spec", "containers", fieldpath.KeyByFields("name", name), "image")) {
			return ctr.Image
		}
	}
	return ""
}
