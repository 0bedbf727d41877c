package children

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// NotOwnedError reports an object bearing a child's name that the CR does not control.
type NotOwnedError struct {
	kind, namespace, name string
	// orphaned is set when the object is controlled by an earlier LlamaStackDistribution
	// of the same name, deleted since: the garbage collector is about to delete it.
	Orphaned bool
}

// NewNotOwnedError describes obj, which l does not control.
func NewNotOwnedError(kind string, obj metav1.Object, l *v1alpha2.LlamaStackDistribution) *NotOwnedError {
	ref := metav1.GetControllerOfNoCopy(obj)
	return &NotOwnedError{
		kind: kind, namespace: obj.GetNamespace(), name: obj.GetName(),
		Orphaned: ref != nil && ref.Kind == llsd.ControllerKind.Kind && ref.Name == l.Name && ref.UID != l.UID,
	}
}

func (e *NotOwnedError) Error() string {
	if e.Orphaned {
		return fmt.Sprintf("%s %s/%s belongs to an earlier LlamaStackDistribution of this name, deleted since; the controller creates its own as soon as the garbage collector has deleted it",
			e.kind, e.namespace, e.name)
	}
	return fmt.Sprintf("%s %s/%s already exists and is not controlled by this LlamaStackDistribution; delete or rename it so the controller can create its own",
		e.kind, e.namespace, e.name)
}
