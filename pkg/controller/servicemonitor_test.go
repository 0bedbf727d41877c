package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// serviceMonitorCRD is the Prometheus Operator's ServiceMonitor CRD, established.
func serviceMonitorCRD() *apiextensionsv1.CustomResourceDefinition {
	return establishedCRD(children.ServiceMonitorResource, children.ServiceMonitorKind)
}

// establishedCRD is the established CRD serving resource (one served version) of kind.
func establishedCRD(resource schema.GroupVersionResource, kind string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: resource.Resource + "." + resource.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group:    resource.Group,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: resource.Resource, Kind: kind},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: resource.Version, Served: true, Storage: true}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
		}},
	}
}

// monitorActions are the requests of actions to the ServiceMonitor API.
func monitorActions(actions []core.Action) []core.Action {
	return actionsOn(children.ServiceMonitorResource, actions)
}

// actionsOn are the requests of actions to resource.
func actionsOn(resource schema.GroupVersionResource, actions []core.Action) []core.Action {
	var out []core.Action
	for _, a := range actions {
		if a.GetResource().GroupResource() == resource.GroupResource() {
			out = append(out, a)
		}
	}
	return out
}

// storedMonitor reads the CR's ServiceMonitor from the fake API; nil when there is none.
func (f *fixture) storedMonitor(name string) *unstructured.Unstructured {
	return f.storedUnstructured(children.ServiceMonitorResource, name)
}

// storedUnstructured reads an object of the dynamic fake in the CR namespace; nil when
// there is none.
func (f *fixture) storedUnstructured(resource schema.GroupVersionResource, name string) *unstructured.Unstructured {
	f.t.Helper()
	obj, err := f.dynamicclient.Resource(resource).Namespace(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(f.t, err)
	return obj
}

// On a cluster that serves the Prometheus Operator's API, a server that serves metrics
// gets a ServiceMonitor, applied once and then left alone; when the operator ConfigMap
// turns ServiceMonitors off, it goes.
func TestServiceMonitorLifecycle(t *testing.T) {
	f := newFixture(t, newLLSD("app"), operatorConfigMap(map[string]string{revision.KeyFeatureFlags: featureFlagsOff}))
	f.serveServiceMonitors()
	applied := monitorActions(mutating(f.sync("app")))
	require.Len(t, applied, 1, "%s", describe(applied))
	assert.Equal(t, "patch", applied[0].GetVerb())
	stored := f.storedMonitor("app-service-monitor")
	require.NotNil(t, stored)
	assertControlledChild(t, stored, f.llsd("app"))
	spec, _, _ := unstructured.NestedMap(stored.Object, "spec")
	assert.Equal(t, children.NewServiceMonitor(f.llsd("app")).Object["spec"], spec)

	f.converge("app")
	assert.Empty(t, mutating(f.sync("app")), "a converged sync writes nothing")

	// Someone edits a field the controller owns: it is put back.
	require.NoError(t, unstructured.SetNestedSlice(stored.Object, []any{map[string]any{"port": "http"}}, "spec", "endpoints"))
	_, err := f.dynamicclient.Resource(children.ServiceMonitorResource).Namespace(testNamespace).Update(f.ctx, stored, metav1.UpdateOptions{FieldManager: "someone"})
	require.NoError(t, err)
	f.refreshCaches()
	require.Len(t, monitorActions(mutating(f.sync("app"))), 1, "the edit is undone")
	endpoints, _, _ := unstructured.NestedSlice(f.storedMonitor("app-service-monitor").Object, "spec", "endpoints")
	assert.Equal(t, "metrics", endpoints[0].(map[string]any)["port"])

	// featureFlags that cannot be read leave it as it is.
	f.setOperatorConfig(map[string]string{revision.KeyFeatureFlags: "enableServiceMonitor: [oops"})
	f.converge("app")
	require.NotNil(t, f.storedMonitor("app-service-monitor"), "kept while the ConfigMap does not say")

	f.setOperatorConfig(map[string]string{revision.KeyFeatureFlags: featureFlagsOff + "enableServiceMonitor: {enabled: false}\n"})
	f.converge("app")
	assert.Nil(t, f.storedMonitor("app-service-monitor"), "turned off: deleted")
}

// No ServiceMonitor where none can scrape anything or none may be made: a server
// version without the endpoint, the API on the metrics port, a cluster without the
// API, and no operator ConfigMap (which says nothing).
func TestServiceMonitorOnlyWhereItScrapesSomething(t *testing.T) {
	opConfig := operatorConfigMap(map[string]string{revision.KeyFeatureFlags: featureFlagsOff})
	for name, tc := range map[string]struct {
		cr       *v1alpha2.LlamaStackDistribution
		opConfig bool
		served   bool
	}{
		"a llama-stack image": {cr: newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
			l.Spec.Distribution = v1alpha2.DistributionSpec{Image: "docker.io/llamastack/distribution-starter:0.7.1"}
		}), opConfig: true, served: true},
		"the API on 9464": {cr: newLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
			l.Spec.Networking = &v1alpha2.NetworkingSpec{Port: 9464}
		}), opConfig: true, served: true},
		"the API not served":    {cr: newLLSD("app"), opConfig: true},
		"no operator ConfigMap": {cr: newLLSD("app"), served: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.cr)
			if tc.opConfig {
				f.putConfigMap(opConfig.DeepCopy())
			}
			if tc.served {
				f.serveServiceMonitors()
			}
			for range 3 {
				for _, a := range monitorActions(f.sync("app")) {
					t.Errorf("a ServiceMonitor request: %s", describe([]core.Action{a}))
				}
			}
			assert.Nil(t, f.storedMonitor("app-service-monitor"))
			require.NotNil(t, f.deployment("app"), "the rest is made as ever")
		})
	}
}

// A server that stops serving metrics (moved to an image without the endpoint) loses
// its ServiceMonitor.
func TestServiceMonitorGoesWithTheMetrics(t *testing.T) {
	f := newFixture(t, newLLSD("app"), operatorConfigMap(map[string]string{revision.KeyFeatureFlags: featureFlagsOff}))
	f.serveServiceMonitors()
	f.converge("app")
	require.NotNil(t, f.storedMonitor("app-service-monitor"))
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking = &v1alpha2.NetworkingSpec{Port: 9464}
	})
	f.converge("app")
	assert.Nil(t, f.storedMonitor("app-service-monitor"))
}

// A ServiceMonitor of that name that the CR does not control is never written:
// reported instead, as every child.
func TestServiceMonitorOfSomeoneElse(t *testing.T) {
	theirs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
		"metadata": map[string]any{"name": "app-service-monitor", "namespace": testNamespace,
			"labels": map[string]any{llsd.LabelManagedBy: ManagedByValue}},
		"spec": map[string]any{"endpoints": []any{map[string]any{"port": "web"}}},
	}}
	f := newFixture(t, newLLSD("app"), operatorConfigMap(map[string]string{revision.KeyFeatureFlags: featureFlagsOff}))
	_, err := f.dynamicclient.Resource(children.ServiceMonitorResource).Namespace(testNamespace).Create(f.ctx, theirs, metav1.CreateOptions{})
	require.NoError(t, err)
	f.serveServiceMonitors()
	for _, a := range monitorActions(mutating(f.sync("app"))) {
		t.Errorf("a write of someone else's ServiceMonitor: %s", describe([]core.Action{a}))
	}
	ready := meta.FindStatusCondition(f.llsd("app").Status.Conditions, v1alpha2.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, v1alpha2.ReasonResourceNotOwned, ready.Reason)
	assert.Contains(t, ready.Message, "ServiceMonitor")
	endpoints, _, _ := unstructured.NestedSlice(f.storedMonitor("app-service-monitor").Object, "spec", "endpoints")
	assert.Equal(t, "web", endpoints[0].(map[string]any)["port"], "theirs is untouched")
}

// enableServiceMonitor: {enabled: no} is not YAML 1.2's false: it deletes nothing, the
// ConfigMap gets a Warning Event naming the flag, the value and the valid values, and
// the CR's ServiceMonitor stays. enabled: false then deletes it, with an Event on the
// CR naming the flag.
func TestServiceMonitorFlagReadStrictly(t *testing.T) {
	f := newFixture(t, newLLSD("app"), operatorConfigMap(map[string]string{revision.KeyFeatureFlags: featureFlagsOff}))
	f.serveServiceMonitors()
	f.converge("app")
	require.NotNil(t, f.storedMonitor("app-service-monitor"))
	h := f.c.operatorConfigHandler(f.ctx)
	f.events()

	update := func(rv string, data map[string]string) {
		t.Helper()
		f.setOperatorConfig(data)
		cm, err := f.kubeclient.CoreV1().ConfigMaps(testOperatorNamespace).Get(f.ctx, OperatorConfigMapName, metav1.GetOptions{})
		require.NoError(t, err)
		old := operatorConfigMap(nil)
		old.ResourceVersion, cm.ResourceVersion = rv+"-old", rv
		h.OnUpdate(old, cm)
	}

	update("2", map[string]string{revision.KeyFeatureFlags: featureFlagsOff + "enableServiceMonitor: {enabled: no}\n"})
	events := f.events()
	require.Equal(t, 1, countEvents(events, "Warning InvalidConfiguration"), "events: %v", events)
	for _, s := range []string{"enableServiceMonitor.enabled", `"no" (a string)`, "valid values: true, false"} {
		assert.True(t, hasEvent(events, s), "the Event says %q: %v", s, events)
	}
	assert.Empty(t, monitorActions(mutating(f.sync("app"))), "nothing is deleted")
	f.converge("app")
	assert.NotNil(t, f.storedMonitor("app-service-monitor"), "the ServiceMonitor stays")
	assert.False(t, hasEvent(f.events(), "Deleted"))

	update("3", map[string]string{revision.KeyFeatureFlags: featureFlagsOff + "enableServiceMonitor: {enabled: false}\n"})
	assert.Zero(t, countEvents(f.events(), "Warning"), "false is valid")
	deleted := monitorActions(mutating(f.sync("app")))
	require.Len(t, deleted, 1, "%s", describe(deleted))
	assert.Equal(t, "delete", deleted[0].GetVerb())
	assert.Nil(t, f.storedMonitor("app-service-monitor"))
	events = f.events()
	assert.Contains(t, events,
		"Normal Deleted Deleted ServiceMonitor app-service-monitor: featureFlags enableServiceMonitor.enabled is false in the operator ConfigMap")
}
