package children

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// The ServiceMonitor selects the CR's Service alone and scrapes its metrics port.
func TestNewServiceMonitor(t *testing.T) {
	l := newLLSD("app")
	sm := NewServiceMonitor(l)
	assert.Equal(t, "monitoring.coreos.com/v1", sm.GetAPIVersion())
	assert.Equal(t, "ServiceMonitor", sm.GetKind())
	assert.Equal(t, "app-service-monitor", sm.GetName())
	assert.Equal(t, testNamespace, sm.GetNamespace())
	assert.Equal(t, llsd.ChildLabels(l), sm.GetLabels())
	assertControlledChild(t, sm, l)

	matchLabels, found, err := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	require.NoError(t, err)
	require.True(t, found)
	selector := labels.SelectorFromSet(matchLabels)
	svc := NewService(l, AskedListening(l, starterVersion()))
	assert.True(t, selector.Matches(labels.Set(svc.Labels)), "selects the CR's Service")
	other := NewService(newLLSD("app-2"), AskedListening(newLLSD("app-2"), starterVersion()))
	assert.False(t, selector.Matches(labels.Set(other.Labels)), "and not another CR's")

	endpoints, found, err := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, []any{map[string]any{"port": "metrics", "path": "/metrics", "scheme": "http"}}, endpoints)
	names := map[string]bool{}
	for _, p := range svc.Spec.Ports {
		names[p.Name] = true
	}
	assert.True(t, names["metrics"], "the Service has the port the ServiceMonitor names: %v", svc.Spec.Ports)
}
