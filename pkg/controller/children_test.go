package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// Helpers shared by the sync-level tests (children, HPA handover, user config, operator
// config, status, handlers).

// ownedKind describes one kind the controller writes, for table tests over all of them.
type ownedKind struct {
	kind     string // as in the controller's messages
	resource string // as in describe()
	gvr      schema.GroupVersionResource
	name     func(*v1alpha2.LlamaStackDistribution) string
	// newObject is an empty object of the kind.
	newObject func() runtime.Object
}

var (
	kindDeployment = ownedKind{"Deployment", "deployments", appsv1.SchemeGroupVersion.WithResource("deployments"),
		deploymentName, func() runtime.Object { return &appsv1.Deployment{} }}
	kindService = ownedKind{"Service", "services", corev1.SchemeGroupVersion.WithResource("services"),
		serviceName, func() runtime.Object { return &corev1.Service{} }}
	kindPVC = ownedKind{"PersistentVolumeClaim", "persistentvolumeclaims", corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
		pvcName, func() runtime.Object { return &corev1.PersistentVolumeClaim{} }}
	kindHPA = ownedKind{"HorizontalPodAutoscaler", "horizontalpodautoscalers", autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers"),
		hpaName, func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} }}
	kindPDB = ownedKind{"PodDisruptionBudget", "poddisruptionbudgets", policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"),
		pdbName, func() runtime.Object { return &policyv1.PodDisruptionBudget{} }}
	kindIngress = ownedKind{"Ingress", "ingresses", networkingv1.SchemeGroupVersion.WithResource("ingresses"),
		ingressName, func() runtime.Object { return &networkingv1.Ingress{} }}
	kindNetworkPolicy = ownedKind{"NetworkPolicy", "networkpolicies", networkingv1.SchemeGroupVersion.WithResource("networkpolicies"),
		networkPolicyName, func() runtime.Object { return &networkingv1.NetworkPolicy{} }}
	kindConfigMapCopy = ownedKind{"ConfigMap", "configmaps", corev1.SchemeGroupVersion.WithResource("configmaps"),
		userConfigCopyName, func() runtime.Object { return &corev1.ConfigMap{} }}

	allOwnedKinds = []ownedKind{kindDeployment, kindService, kindPVC, kindHPA, kindPDB, kindIngress, kindNetworkPolicy, kindConfigMapCopy}
)

const (
	// sharedNamespace holds the cross-namespace user ConfigMap of allChildren.
	sharedNamespace  = "shared"
	sharedConfigName = "shared-config"
	// featureFlagsOn and featureFlagsOff are featureFlags values of the operator ConfigMap.
	featureFlagsOn  = "enableNetworkPolicy:\n  enabled: true\n"
	featureFlagsOff = "enableNetworkPolicy:\n  enabled: false\n"
)

// startingUserConfig is a user config the pinned server starts with.
const startingUserConfig = "version: 2\ndistro_name: mine\napis: [inference]\nproviders:\n  inference:\n  - {provider_id: vllm, provider_type: remote::vllm, config: {base_url: 'http://vllm:8000/v1'}}\n"

// userConfigNamed is startingUserConfig told apart by a comment.
func userConfigNamed(name string) string {
	return startingUserConfig + "# " + strings.ReplaceAll(name, "\n", " ") + "\n"
}

// allChildren asks for every optional child: storage, autoscaling, a PDB, an Ingress and a
// cross-namespace user ConfigMap (copied). The NetworkPolicy comes from the operator ConfigMap.
func allChildren(l *v1alpha1.LlamaStackDistribution) {
	l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
	l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 5}
	l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true}
	l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: sharedConfigName, ConfigMapNamespace: sharedNamespace}
}

// allChildrenObjects are the cluster objects allChildren needs: the opted-in source
// ConfigMap and an operator ConfigMap that enables NetworkPolicies.
func allChildrenObjects() []runtime.Object {
	return []runtime.Object{
		configMap(sharedNamespace, sharedConfigName, map[string]string{"config.yaml": startingUserConfig},
			map[string]string{AllowedNamespacesAnnotation: "*"}),
		operatorConfigMap(map[string]string{"featureFlags": featureFlagsOn}),
	}
}

func operatorConfigMap(data map[string]string) *corev1.ConfigMap {
	return configMap(testOperatorNamespace, OperatorConfigMapName, data, nil)
}

// putConfigMap creates or replaces a ConfigMap in the fake API and refreshes the caches.
func (f *fixture) putConfigMap(cm *corev1.ConfigMap) {
	f.t.Helper()
	cms := f.kubeclient.CoreV1().ConfigMaps(cm.Namespace)
	cur, err := cms.Get(f.ctx, cm.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(f.ctx, cm, metav1.CreateOptions{FieldManager: "kubectl"})
	case err == nil:
		cm = cm.DeepCopy()
		cm.ResourceVersion = cur.ResourceVersion
		_, err = cms.Update(f.ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl"})
	}
	require.NoError(f.t, err)
	f.refreshCaches()
}

// setOperatorConfig writes the operator ConfigMap with data.
func (f *fixture) setOperatorConfig(data map[string]string) {
	f.t.Helper()
	f.putConfigMap(operatorConfigMap(data))
}

// stored reads an object of the CR namespace from the fake API; nil when there is none.
func (f *fixture) stored(k ownedKind, name string) metav1.Object {
	f.t.Helper()
	obj, err := f.kubeclient.Tracker().Get(k.gvr, testNamespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(f.t, err)
	return obj.(metav1.Object)
}

func (f *fixture) deployment(name string) *appsv1.Deployment {
	f.t.Helper()
	o := f.stored(kindDeployment, name)
	require.NotNil(f.t, o, "Deployment %s", name)
	return o.(*appsv1.Deployment)
}

// updateDeployment edits the stored Deployment with a plain Update as another field
// manager, as kubectl, the HPA or another controller would, and refreshes the caches.
func (f *fixture) updateDeployment(name, manager string, edit func(*appsv1.Deployment)) {
	f.t.Helper()
	d := f.deployment(name).DeepCopy()
	edit(d)
	_, err := f.kubeclient.AppsV1().Deployments(testNamespace).Update(f.ctx, d, metav1.UpdateOptions{FieldManager: manager})
	require.NoError(f.t, err)
	f.refreshCaches()
}

// writesTo returns the described actions that write the named object of that resource.
func writesTo(actions []core.Action, resource, name string) []string {
	var out []string
	for _, line := range describe(mutating(actions)) {
		fields := strings.Fields(line)
		if len(fields) == 3 && strings.Split(fields[1], "/")[0] == resource && fields[2] == name {
			out = append(out, line)
		}
	}
	return out
}

// childWrites describes the actions that write anything but the CR (its status).
func childWrites(actions []core.Action) []string {
	var out []string
	for _, line := range describe(mutating(actions)) {
		if !strings.Contains(line, " llamastackdistributions") {
			out = append(out, line)
		}
	}
	return out
}

// requireApplies checks that every patch among actions is a forced server-side apply by
// the controller's field manager.
func requireApplies(t *testing.T, actions []core.Action) {
	t.Helper()
	for _, a := range actions {
		if a.GetVerb() != "patch" {
			continue
		}
		p, ok := a.(core.PatchActionImpl)
		require.True(t, ok, "%T", a)
		assert.Equal(t, types.ApplyPatchType, p.GetPatchType(), "patch %s %s", p.GetResource().Resource, p.GetName())
		assert.Equal(t, FieldManager, p.GetPatchOptions().FieldManager, "patch %s %s", p.GetResource().Resource, p.GetName())
		assert.Equal(t, ptr.To(true), p.GetPatchOptions().Force, "patch %s %s", p.GetResource().Resource, p.GetName())
	}
}

// assertControlledChild checks the controller reference (Kind and UID) and the child labels.
func assertControlledChild(t *testing.T, obj metav1.Object, l *v1alpha2.LlamaStackDistribution) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if assert.NotNil(t, ref, "%s has no controller reference", obj.GetName()) {
		assert.Equal(t, "LlamaStackDistribution", ref.Kind)
		assert.Equal(t, "llamastack.io/v1alpha1", ref.APIVersion)
		assert.Equal(t, l.Name, ref.Name)
		assert.Equal(t, l.UID, ref.UID)
		assert.Equal(t, ptr.To(true), ref.BlockOwnerDeletion)
	}
	for k, v := range map[string]string{
		"app":                          "llama-stack",
		"app.kubernetes.io/instance":   l.Name,
		"app.kubernetes.io/managed-by": "llama-stack-operator",
		"app.kubernetes.io/part-of":    "llama-stack",
	} {
		assert.Equal(t, v, obj.GetLabels()[k], "%s label %s", obj.GetName(), k)
	}
}

// cond returns the CR's condition of that type, failing when it is absent.
func cond(t *testing.T, l *v1alpha2.LlamaStackDistribution, condType string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(l.Status.Conditions, condType)
	require.NotNil(t, c, "condition %s missing; conditions: %+v", condType, l.Status.Conditions)
	return *c
}

// requireUserError checks the status of a CR held up by a user error.
func requireUserError(t *testing.T, l *v1alpha2.LlamaStackDistribution, reason string, msgParts ...string) {
	t.Helper()
	assert.Equal(t, v1alpha2.PhaseFailed, l.Status.Phase)
	dr := cond(t, l, v1alpha2.ConditionDeploymentReady)
	assert.Equal(t, metav1.ConditionFalse, dr.Status)
	assert.Equal(t, reason, dr.Reason)
	for _, p := range msgParts {
		assert.Contains(t, dr.Message, p)
	}
	ready := cond(t, l, v1alpha2.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, reason, ready.Reason)
}

func countEvents(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

func containerNames(cs []corev1.Container) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestEveryChildIsCreatedByServerSideApply(t *testing.T) {
	l := newLLSD("app", allChildren)
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
			f := newFixture(t, newLLSD("app", mods...), operatorConfigMap(map[string]string{"featureFlags": featureFlagsOn}))
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
			f := newFixture(t, append(allChildrenObjects(), newLLSD("app", allChildren))...)
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
	f := newFixture(t, newLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
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

// foreignObject is an object of kind k named name in the CR namespace that the CR does not
// control: without labels and owner, or labelled as a child but controlled by another CR
// of the same name.
func foreignObject(k ownedKind, name string, labelled bool) runtime.Object {
	obj := k.newObject()
	m, _ := meta.Accessor(obj)
	m.SetName(name)
	m.SetNamespace(testNamespace)
	if labelled {
		m.SetLabels(map[string]string{
			"app": "llama-stack", "app.kubernetes.io/instance": "app",
			"app.kubernetes.io/managed-by": "llama-stack-operator", "app.kubernetes.io/part-of": "llama-stack",
		})
		m.SetOwnerReferences([]metav1.OwnerReference{{
			APIVersion: "llamastack.io/v1alpha1", Kind: "LlamaStackDistribution", Name: "app",
			UID: types.UID("uid-of-an-earlier-app"), Controller: ptr.To(true),
		}})
	} else {
		m.SetLabels(map[string]string{"owner": "someone-else"})
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		cm.Data = map[string]string{"config.yaml": "theirs"}
	}
	return obj
}

// serverContainerOf returns the server container of a Deployment that may carry sidecars.
func serverContainerOf(t testing.TB, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == defaultContainerName })
	require.GreaterOrEqual(t, i, 0, "no server container")
	return d.Spec.Template.Spec.Containers[i]
}

// defaultRollingUpdate stands in for the API server's defaulting of a RollingUpdate
// Deployment (the fakes do none): the server fills strategy.rollingUpdate with 25%/25%.
// Fields the API server defaults belong to no applier, so the controller dropping them
// from its apply configuration would not remove them.
func defaultRollingUpdate(d *appsv1.Deployment) {
	if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType && d.Spec.Strategy.RollingUpdate == nil {
		quarter := intstr.FromString("25%")
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: &quarter, MaxSurge: ptr.To(quarter)}
	}
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
