package children

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// TransformStripManagedFields drops every managedFields entry except the controller's
// own Apply entry, which Extract<Kind> needs to tell what the controller owns.
func TransformStripManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		stripManagedFields(o)
	}
	return obj, nil
}

func stripManagedFields(o metav1.Object) {
	mf := o.GetManagedFields()
	if len(mf) == 0 {
		return
	}
	var kept []metav1.ManagedFieldsEntry
	for _, e := range mf {
		if e.Manager == llsd.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			kept = append(kept, e)
		}
	}
	o.SetManagedFields(kept)
}

// ManagedSelector selects the children of every CR: the child informers list and watch
// only these.
func ManagedSelector() string {
	return labels.SelectorFromSet(labels.Set{llsd.LabelManagedBy: llsd.ManagedByValue}).String()
}
