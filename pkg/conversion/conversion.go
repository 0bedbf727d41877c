// Package conversion converts LlamaStackDistributions between the served versions for
// the conversion webhook: an unstructured object in, the same object in the asked
// version out. The conversion itself is the types' own (v1alpha1's ConvertTo and
// ConvertFrom, with v1alpha2 the hub); this package only moves objects in and out of
// their typed form.
package conversion

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// Versions are the versions the converter converts between, hub last.
var Versions = []string{v1alpha1.SchemeGroupVersion.Version, v1alpha2.SchemeGroupVersion.Version}

// Convert converts a LlamaStackDistribution (v1alpha1 or v1alpha2) to toAPIVersion
// (llamastack.io/v1alpha1 or llamastack.io/v1alpha2). Fields the schema does not know
// cannot reach it (the API server prunes them), so the typed form holds everything.
func Convert(in *unstructured.Unstructured, toAPIVersion string) (*unstructured.Unstructured, error) {
	from := in.GetAPIVersion()
	if from == toAPIVersion {
		return in.DeepCopy(), nil
	}
	hub := &v1alpha2.LlamaStackDistribution{}
	switch from {
	case v1alpha2.SchemeGroupVersion.String():
		if err := fromUnstructured(in, hub); err != nil {
			return nil, err
		}
	case v1alpha1.SchemeGroupVersion.String():
		spoke := &v1alpha1.LlamaStackDistribution{}
		if err := fromUnstructured(in, spoke); err != nil {
			return nil, err
		}
		if err := spoke.ConvertTo(hub); err != nil {
			return nil, fmt.Errorf("converting %s to %s: %w", from, v1alpha2.SchemeGroupVersion, err)
		}
	default:
		return nil, fmt.Errorf("cannot convert from %q: the versions are %s and %s", from, v1alpha1.SchemeGroupVersion, v1alpha2.SchemeGroupVersion)
	}

	var out runtime.Object
	switch toAPIVersion {
	case v1alpha2.SchemeGroupVersion.String():
		hub.APIVersion, hub.Kind = toAPIVersion, "LlamaStackDistribution"
		out = hub
	case v1alpha1.SchemeGroupVersion.String():
		spoke := &v1alpha1.LlamaStackDistribution{}
		if err := spoke.ConvertFrom(hub); err != nil {
			return nil, fmt.Errorf("converting %s to %s: %w", v1alpha2.SchemeGroupVersion, toAPIVersion, err)
		}
		spoke.APIVersion, spoke.Kind = toAPIVersion, "LlamaStackDistribution"
		out = spoke
	default:
		return nil, fmt.Errorf("cannot convert to %q: the versions are %s and %s", toAPIVersion, v1alpha1.SchemeGroupVersion, v1alpha2.SchemeGroupVersion)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s object: %w", toAPIVersion, err)
	}
	if r := hub.Spec.Workload.Replicas; r != nil && toAPIVersion == v1alpha1.SchemeGroupVersion.String() {
		// v1alpha1's replicas is an int that its Go type leaves out at 0; left out, the
		// API server's default (1) would fill a v1alpha1 client's write of it and undo
		// a scale to zero.
		if err := unstructured.SetNestedField(content, int64(*r), "spec", "replicas"); err != nil {
			return nil, fmt.Errorf("encoding the %s object: %w", toAPIVersion, err)
		}
	}
	return &unstructured.Unstructured{Object: content}, nil
}

// fromUnstructured decodes in into out, refusing fields out's type does not have: the
// API server prunes unknown fields, so one here means a schema and types out of step,
// and dropping it would lose data.
func fromUnstructured(in *unstructured.Unstructured, out runtime.Object) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(in.Object, out, true); err != nil {
		return fmt.Errorf("decoding the %s object %s/%s: %w", in.GetAPIVersion(), in.GetNamespace(), in.GetName(), err)
	}
	return nil
}
