package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	core "k8s.io/client-go/testing"

	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
)

// newMonitoringClient is a fake dynamic client that serves the optional kinds without
// a typed client (ServiceMonitors, OpenShift Routes) as the API server does,
// server-side apply included: its tracker keeps managed fields (deduced
// from the objects, the CRD's schema being unknown to it), so that what the controller
// owns can be extracted and compared.
func newMonitoringClient(t testing.TB, objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	t.Helper()
	scheme := runtime.NewScheme()
	listKinds := map[schema.GroupVersionResource]string{}
	for resource, kind := range map[schema.GroupVersionResource]string{children.ServiceMonitorResource: children.ServiceMonitorKind, children.RouteResource: children.RouteKind} {
		scheme.AddKnownTypeWithName(resource.GroupVersion().WithKind(kind), &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(resource.GroupVersion().WithKind(kind+"List"), &unstructured.UnstructuredList{})
		listKinds[resource] = kind + "List"
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, listKinds)
	tracker := core.NewFieldManagedObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder(),
		managedfields.NewDeducedTypeConverter())
	for _, o := range objs {
		if err := tracker.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	client.PrependReactor("*", "*", core.ObjectReaction(tracker))
	client.PrependWatchReactor("*", func(a core.Action) (bool, watch.Interface, error) {
		w, err := tracker.Watch(a.GetResource(), a.GetNamespace())
		return true, w, err
	})
	return client
}
