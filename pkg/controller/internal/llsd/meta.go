package llsd

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// ChildObjectMeta is the metadata every child carries: its name, the CR's namespace, the
// child labels and a controller reference to the CR. A child adds annotations of its own
// where it needs them (the Deployment: its distribution, image and rollback record).
func ChildObjectMeta(l *v1alpha2.LlamaStackDistribution, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       l.Namespace,
		Labels:          ChildLabels(l),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(l, ControllerKind)},
	}
}

// IsControlledBy reports whether obj's controller reference points at l, by Kind and UID.
func IsControlledBy(obj metav1.Object, l *v1alpha2.LlamaStackDistribution) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.Kind == ControllerKind.Kind && ref.UID == l.UID
}
