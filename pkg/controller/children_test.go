package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
)

// The children's life through whole syncs: made, changed, deleted when no longer wanted,
// never someone else's (the fixture and its helpers: fixture_test.go).

func TestEveryChildIsCreatedByServerSideApply(t *testing.T) {
	l := newLLSDv1("app", allChildren)
	f := newFixture(t, append(allChildrenObjects(), l)...)

	actions := f.sync("app")
	requireApplies(t, actions)
	for _, a := range mutating(actions) {
		if a.GetResource().Resource != "llamastackdistributions" {
			assert.Equal(t, "patch", a.GetVerb(), "children are only ever applied: %s", describe([]core.Action{a}))
		}
	}
	for _, k := range allOwnedKinds {
		t.Run(k.kind, func(t *testing.T) {
			assert.Equal(t, []string{fmt.Sprintf("patch %s %s", k.resource, k.name(hub(l)))}, writesTo(actions, k.resource, k.name(hub(l))))
			obj := f.stored(k, k.name(hub(l)))
			require.NotNil(t, obj, "%s %s not created", k.kind, k.name(hub(l)))
			assertControlledChild(t, obj, hub(l))
			applied := slices.ContainsFunc(obj.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
				return e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationApply
			})
			assert.True(t, applied, "%s has no Apply entry of %s: %+v", k.kind, FieldManager, obj.GetManagedFields())
		})
	}
	assert.Equal(t, "user-config", f.stored(kindConfigMapCopy, sharedConfigCopyName(hub(l))).GetLabels()["app.kubernetes.io/component"])

	f.converge("app")
	require.Empty(t, describe(f.sync("app")), "a resync of an unchanged CR sends nothing")
}

// Each child of a CR that asks for all of them is applied exactly as its builder makes
// it (the Deployment and the user-config copy, which carry the sync's inputs, are
// compared in their own tests).
func TestEveryChildIsWrittenAsItsBuilderMakesIt(t *testing.T) {
	l := hub(newLLSDv1("app", allChildren))
	f := newFixture(t, append(allChildrenObjects(), l)...)
	checkWrites(t, f.sync("app"), []expectedWrite{
		{"patch", "persistentvolumeclaims", "app-pvc", children.NewPVC(l)},
		{"patch", "services", "app-service", children.NewService(l, children.AskedListening(l, starterVersion()))},
		{"patch", "networkpolicies", "app-network-policy", children.NewNetworkPolicy(l, testOperatorNamespace, children.AskedListening(l, starterVersion()))},
		{"patch", "configmaps", sharedConfigCopyName(l), nil},
		{"patch", "deployments", "app", nil},
		{"patch", "horizontalpodautoscalers", "app-hpa", children.NewHPA(l)},
		{"patch", "poddisruptionbudgets", "app-pdb", children.NewPDB(l)},
		{"patch", "ingresses", "app-ingress", children.NewIngress(l)},
		{"update", "llamastackdistributions/status", "app", nil},
	})
}

func TestMinimalCRGetsOnlyDeploymentAndService(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	actions := f.sync("app")
	for _, k := range allOwnedKinds {
		want := k.kind == "Deployment" || k.kind == "Service"
		assert.Equal(t, want, f.stored(k, k.name(f.llsd("app"))) != nil, k.kind)
	}
	assert.Empty(t, writesTo(actions, "persistentvolumeclaims", "app-pvc"))
	f.converge("app")
	require.Empty(t, describe(f.sync("app")))
}

// A spec change reapplies the child it concerns, exactly as its builder now makes it,
// and nothing else but what the change also concerns.
func TestChildIsUpdatedOnSpecChange(t *testing.T) {
	type cr = v1alpha2.LlamaStackDistribution
	overrides := func(l *cr) *v1alpha2.WorkloadOverrides {
		if l.Spec.Workload.Overrides == nil {
			l.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{}
		}
		return l.Spec.Workload.Overrides
	}
	networking := func(l *cr) *v1alpha2.NetworkingSpec {
		if l.Spec.Networking == nil {
			l.Spec.Networking = &v1alpha2.NetworkingSpec{}
		}
		return l.Spec.Networking
	}
	tests := map[string]struct {
		initial, edit func(*cr)
		// writes are the children's writes the edit makes, given the CR as edited.
		writes func(l *cr) []expectedWrite
		check  func(t *testing.T, f *fixture)
	}{
		"env change patches the Deployment": {
			initial: func(l *cr) { overrides(l).Env = []corev1.EnvVar{{Name: "FOO", Value: "1"}} },
			edit:    func(l *cr) { overrides(l).Env = []corev1.EnvVar{{Name: "FOO", Value: "2"}} },
			writes:  func(*cr) []expectedWrite { return []expectedWrite{{"patch", "deployments", "app", nil}} },
			check: func(t *testing.T, f *fixture) {
				assert.Equal(t, "2", envValue(t, serverOf(t, f.deployment("app")).Env, "FOO"))
			},
		},
		"port change patches the Service and the Deployment": {
			edit: func(l *cr) { networking(l).Port = 9000 },
			writes: func(l *cr) []expectedWrite {
				return []expectedWrite{{"patch", "services", "app-service", children.NewService(l, children.AskedListening(l, starterVersion()))}, {"patch", "deployments", "app", nil},
					{"patch", "networkpolicies", "app-network-policy", children.NewNetworkPolicy(l, testOperatorNamespace, children.AskedListening(l, starterVersion()))}}
			},
		},
		"maxReplicas change patches the HPA": {
			initial: func(l *cr) { l.Spec.Workload.Autoscaling = &v1alpha2.AutoscalingSpec{MaxReplicas: 5} },
			edit:    func(l *cr) { l.Spec.Workload.Autoscaling.MaxReplicas = 7 },
			writes: func(l *cr) []expectedWrite {
				return []expectedWrite{{"patch", "horizontalpodautoscalers", "app-hpa", children.NewHPA(l)}}
			},
		},
		"maxUnavailable change patches the PDB": {
			initial: func(l *cr) {
				l.Spec.Workload.PodDisruptionBudget = &v1alpha2.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
			},
			edit: func(l *cr) { l.Spec.Workload.PodDisruptionBudget.MaxUnavailable = ptr.To(intstr.FromInt32(2)) },
			writes: func(l *cr) []expectedWrite {
				return []expectedWrite{{"patch", "poddisruptionbudgets", "app-pdb", children.NewPDB(l)}}
			},
		},
		"expose turned on creates the Ingress and admits the ingress controllers": {
			edit: func(l *cr) { networking(l).Expose = &v1alpha2.ExposeSpec{} },
			writes: func(l *cr) []expectedWrite {
				return []expectedWrite{{"patch", "ingresses", "app-ingress", children.NewIngress(l)},
					{"patch", "networkpolicies", "app-network-policy", children.NewNetworkPolicy(l, testOperatorNamespace, children.AskedListening(l, starterVersion()))}}
			},
		},
		"allowedFrom change patches the NetworkPolicy": {
			edit: func(l *cr) { networking(l).AllowedFrom = &v1alpha2.AllowedFromSpec{Namespaces: []string{"monitoring"}} },
			writes: func(l *cr) []expectedWrite {
				return []expectedWrite{{"patch", "networkpolicies", "app-network-policy", children.NewNetworkPolicy(l, testOperatorNamespace, children.AskedListening(l, starterVersion()))}}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var mods []func(*cr)
			if tc.initial != nil {
				mods = append(mods, tc.initial)
			}
			f := newFixture(t, newLLSD("app", mods...), operatorConfigMap(map[string]string{"featureFlags": featureFlagsOn}))
			f.converge("app")
			require.Empty(t, describe(f.sync("app")))

			f.updateHub("app", tc.edit)
			actions := f.sync("app")
			requireApplies(t, actions)
			checkWrites(t, actions, append(tc.writes(f.llsd("app")), expectedWrite{"update", "llamastackdistributions/status", "app", nil}))
			if tc.check != nil {
				tc.check(t, f)
			}

			f.converge("app")
			require.Empty(t, describe(f.sync("app")))
		})
	}
}

func TestChildIsDeletedWhenNoLongerWanted(t *testing.T) {
	tests := map[string]struct {
		disable func(f *fixture)
		kind    ownedKind
		name    string
	}{
		"autoscaling removed deletes the HPA": {
			disable: func(f *fixture) {
				f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Autoscaling = nil })
			},
			kind: kindHPA, name: "app-hpa",
		},
		"podDisruptionBudget removed deletes the PDB": {
			disable: func(f *fixture) {
				f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.PodDisruptionBudget = nil })
			},
			kind: kindPDB, name: "app-pdb",
		},
		"exposeRoute off deletes the Ingress": {
			disable: func(f *fixture) {
				f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Network.ExposeRoute = false })
			},
			kind: kindIngress, name: "app-ingress",
		},
		"operator flag off deletes the NetworkPolicy": {
			disable: func(f *fixture) { f.setOperatorConfig(map[string]string{"featureFlags": featureFlagsOff}) },
			kind:    kindNetworkPolicy, name: "app-network-policy",
		},
		"userConfig removed deletes the managed ConfigMap copy": {
			disable: func(f *fixture) {
				f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.UserConfig = nil })
			},
			kind: kindConfigMapCopy, name: sharedConfigCopyName(hub(newLLSDv1("app"))),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, append(allChildrenObjects(), newLLSDv1("app", allChildren))...)
			f.converge("app")
			require.NotNil(t, f.stored(tc.kind, tc.name))
			// Rolled out (a managed ConfigMap goes only once no rollout is under way).
			f.setDeploymentStatus("app", rolledOut)

			tc.disable(f)
			actions := f.sync("app")
			assert.Equal(t, []string{fmt.Sprintf("delete %s %s", tc.kind.resource, tc.name)}, writesTo(actions, tc.kind.resource, tc.name))
			assert.Nil(t, f.stored(tc.kind, tc.name), "%s %s still exists", tc.kind.kind, tc.name)
			assert.NotNil(t, f.stored(kindPVC, "app-pvc"), "the PVC is never deleted")

			f.converge("app")
			require.Empty(t, describe(f.sync("app")))
		})
	}
}

// The claim grows with storage.size, but never shrinks and is never deleted.
func TestPVCGrowsButNeverShrinksOrIsDeleted(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{Size: ptr.To(resource.MustParse("10Gi"))}
	}))
	actions := f.sync("app")
	requireApplies(t, actions)
	assert.Equal(t, []string{"patch persistentvolumeclaims app-pvc"}, writesTo(actions, "persistentvolumeclaims", "app-pvc"))
	f.converge("app")

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage.Size = ptr.To(resource.MustParse("20Gi"))
	})
	assert.Equal(t, []string{"patch persistentvolumeclaims app-pvc"}, writesTo(f.sync("app"), "persistentvolumeclaims", "app-pvc"), "a larger size expands the claim")
	f.converge("app")
	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Storage.Size = ptr.To(resource.MustParse("5Gi"))
	})
	assert.Empty(t, writesTo(f.sync("app"), "persistentvolumeclaims", "app-pvc"), "a smaller size leaves the claim alone")
	f.converge("app")

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = nil })
	actions = f.sync("app")
	assert.Empty(t, writesTo(actions, "persistentvolumeclaims", "app-pvc"), "removing storage never deletes the claim")
	pvc := f.stored(kindPVC, "app-pvc")
	require.NotNil(t, pvc, "the PVC holds the user's data")
	size := pvc.(*corev1.PersistentVolumeClaim).Spec.Resources.Requests[corev1.ResourceStorage]
	assert.Equal(t, "20Gi", size.String())
	// The server goes back to an emptyDir.
	vols := f.deployment("app").Spec.Template.Spec.Volumes
	require.NotEmpty(t, vols)
	assert.Equal(t, "lls-storage", vols[0].Name)
	assert.NotNil(t, vols[0].EmptyDir)
	assert.Nil(t, vols[0].PersistentVolumeClaim)

	f.converge("app")
	require.Empty(t, describe(f.sync("app")))
}

// A real API server rejects spec.strategy.type Recreate with a rollingUpdate
// ("spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is
// 'Recreate'"), so adding storage to a running CR (which switches the Deployment to
// Recreate) must remove the defaulted rollingUpdate in the same apply.
func TestSwitchingToRecreateClearsTheDefaultedRollingUpdate(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	f.updateDeployment("app", "kube-apiserver", defaultRollingUpdate)
	f.converge("app")
	require.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, f.deployment("app").Spec.Strategy.Type)

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = &v1alpha1.StorageSpec{} })
	f.converge("app")
	strategy := f.deployment("app").Spec.Strategy
	assert.Equal(t, appsv1.RecreateDeploymentStrategyType, strategy.Type)
	assert.Nil(t, strategy.RollingUpdate, "the API server rejects Recreate with a rollingUpdate")
}
