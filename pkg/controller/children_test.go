package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
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
	assert.Equal(t, "user-config", f.stored(kindConfigMapCopy, "app-user-config").GetLabels()["app.kubernetes.io/component"])

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
		{"patch", "persistentvolumeclaims", "app-pvc", newPVC(l)},
		{"patch", "services", "app-service", newService(l)},
		{"patch", "networkpolicies", "app-network-policy", newNetworkPolicy(l, testOperatorNamespace)},
		{"patch", "configmaps", "app-user-config", nil},
		{"patch", "deployments", "app", nil},
		{"patch", "horizontalpodautoscalers", "app-hpa", newHPA(l)},
		{"patch", "poddisruptionbudgets", "app-pdb", newPDB(l)},
		{"patch", "ingresses", "app-ingress", newIngress(l)},
		{"update", "llamastackdistributions/status", "app", nil},
	})
}

func TestMinimalCRGetsOnlyDeploymentAndService(t *testing.T) {
	f := newFixture(t, newLLSDv1("app"))
	actions := f.sync("app")
	for _, k := range allOwnedKinds {
		want := k.kind == "Deployment" || k.kind == "Service"
		assert.Equal(t, want, f.stored(k, k.name(f.llsd("app"))) != nil, k.kind)
	}
	assert.Empty(t, writesTo(actions, "persistentvolumeclaims", "app-pvc"))
	f.converge("app")
	require.Empty(t, describe(f.sync("app")))
}

func TestChildIsUpdatedOnSpecChange(t *testing.T) {
	tests := map[string]struct {
		initial func(*v1alpha1.LlamaStackDistribution)
		edit    func(*v1alpha1.LlamaStackDistribution)
		kind    ownedKind
		name    string
		check   func(t *testing.T, f *fixture)
	}{
		"env change patches the Deployment": {
			initial: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "FOO", Value: "1"}}
			},
			edit: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "FOO", Value: "2"}}
			},
			kind: kindDeployment, name: "app",
			check: func(t *testing.T, f *fixture) {
				assert.Equal(t, "2", envValue(t, serverOf(t, f.deployment("app")).Env, "FOO"))
			},
		},
		"port change patches the Service": {
			edit: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Port = 9000 },
			kind: kindService, name: "app-service",
			check: func(t *testing.T, f *fixture) {
				svc := f.stored(kindService, "app-service").(*corev1.Service)
				require.Len(t, svc.Spec.Ports, 1)
				assert.Equal(t, int32(9000), svc.Spec.Ports[0].Port)
			},
		},
		"maxReplicas change patches the HPA": {
			initial: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 5}
			},
			edit: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Autoscaling.MaxReplicas = 7 },
			kind: kindHPA, name: "app-hpa",
			check: func(t *testing.T, f *fixture) {
				assert.Equal(t, int32(7), f.stored(kindHPA, "app-hpa").(*autoscalingv2.HorizontalPodAutoscaler).Spec.MaxReplicas)
			},
		},
		"maxUnavailable change patches the PDB": {
			initial: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
			},
			edit: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.PodDisruptionBudget.MaxUnavailable = ptr.To(intstr.FromInt32(2))
			},
			kind: kindPDB, name: "app-pdb",
			check: func(t *testing.T, f *fixture) {
				assert.Equal(t, ptr.To(intstr.FromInt32(2)), f.stored(kindPDB, "app-pdb").(*policyv1.PodDisruptionBudget).Spec.MaxUnavailable)
			},
		},
		"exposeRoute turned on creates the Ingress": {
			initial: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Network = &v1alpha1.NetworkSpec{} },
			edit:    func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Network.ExposeRoute = true },
			kind:    kindIngress, name: "app-ingress",
			check: func(t *testing.T, f *fixture) {
				assert.NotNil(t, f.stored(kindIngress, "app-ingress"))
			},
		},
		"allowedFrom change patches the NetworkPolicy": {
			edit: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Network = &v1alpha1.NetworkSpec{AllowedFrom: &v1alpha1.AllowedFromSpec{Namespaces: []string{"monitoring"}}}
			},
			kind: kindNetworkPolicy, name: "app-network-policy",
			check: func(t *testing.T, f *fixture) {
				np := f.stored(kindNetworkPolicy, "app-network-policy").(*networkingv1.NetworkPolicy)
				require.Len(t, np.Spec.Ingress, 1)
				assert.Contains(t, np.Spec.Ingress[0].From, peerNamespace("monitoring"))
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var mods []func(*v1alpha1.LlamaStackDistribution)
			if tc.initial != nil {
				mods = append(mods, tc.initial)
			}
			f := newFixture(t, newLLSDv1("app", mods...), operatorConfigMap(map[string]string{"featureFlags": featureFlagsOn}))
			f.converge("app")
			require.Empty(t, describe(f.sync("app")))

			f.updateLLSD("app", tc.edit)
			actions := f.sync("app")
			requireApplies(t, actions)
			assert.Equal(t, []string{fmt.Sprintf("patch %s %s", tc.kind.resource, tc.name)}, writesTo(actions, tc.kind.resource, tc.name))
			tc.check(t, f)
			assertControlledChild(t, f.stored(tc.kind, tc.name), f.llsd("app"))

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
			kind: kindConfigMapCopy, name: "app-user-config",
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
	f := newFixture(t, newLLSDv1("app"))
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
