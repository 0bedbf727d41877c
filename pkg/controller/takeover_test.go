package controller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// takeOverPatch gives our manager what upstream's two managers own (its apply manager,
// named after the CR, and the manager that created the object) and nothing of anyone
// else's.
func TestTakeOverPatch(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	later := metav1.NewTime(created.Add(time.Minute))
	fields := func(path string) *metav1.FieldsV1 {
		return &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:` + path + `":{}}}`)}
	}
	entry := func(manager string, op metav1.ManagedFieldsOperationType, at metav1.Time, path, sub string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "apps/v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: fields(path), Subresource: sub}
	}
	obj := &metav1.ObjectMeta{
		Name: "demo", ResourceVersion: "42", CreationTimestamp: created,
		ManagedFields: []metav1.ManagedFieldsEntry{
			entry("manager", metav1.ManagedFieldsOperationUpdate, created, "template", ""),
			entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, created, "revisionHistoryLimit", ""),
			entry("demo", metav1.ManagedFieldsOperationApply, created, "replicas", ""),
			entry("kubectl-edit", metav1.ManagedFieldsOperationUpdate, later, "paused", ""),
			entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, later, "status", "status"),
		},
	}
	patch, from, err := takeOverPatch(obj, "demo")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"demo", "manager"}, from)
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	require.NoError(t, json.Unmarshal(patch, &ops))
	require.Len(t, ops, 2)
	assert.Equal(t, "/metadata/resourceVersion", ops[1].Path)
	assert.JSONEq(t, `"42"`, string(ops[1].Value), "the patch fails if the object changed meanwhile")
	var entries []metav1.ManagedFieldsEntry
	require.NoError(t, json.Unmarshal(ops[0].Value, &entries))
	owners := map[string]string{}
	for _, e := range entries {
		owners[e.Manager+"/"+string(e.Operation)+"/"+e.Subresource] = string(e.FieldsV1.Raw)
	}
	assert.Len(t, owners, 4, "upstream's two entries became one of ours: %v", owners)
	ours := owners[FieldManager+"/Apply/"]
	assert.Contains(t, ours, `"f:replicas"`)
	assert.Contains(t, ours, `"f:template"`)
	assert.NotContains(t, ours, "revisionHistoryLimit", "Kubernetes' own fields stay theirs")
	assert.NotContains(t, ours, "paused", "a user's later edit stays theirs")
	assert.Contains(t, owners, "kubectl-edit/Update/")
	assert.Contains(t, owners, "kube-controller-manager/Update/status")

	// Once ours, or with nothing of upstream's, there is nothing to do.
	obj.ManagedFields = []metav1.ManagedFieldsEntry{entry(FieldManager, metav1.ManagedFieldsOperationApply, created, "replicas", "")}
	patch, _, err = takeOverPatch(obj, "demo")
	require.NoError(t, err)
	assert.Nil(t, patch)
}
