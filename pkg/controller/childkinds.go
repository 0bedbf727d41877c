package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	coreac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyac "k8s.io/client-go/applyconfigurations/policy/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/record"
)

// The owned kinds: each bound once to its lister, typed client and Extract function,
// so that one generic writer (apply.go) ensures and deletes every child.

func (c *Controller) wireChildKinds(
	deployments appslisters.DeploymentLister, services corelisters.ServiceLister,
	pvcs corelisters.PersistentVolumeClaimLister, hpas autoscalinglisters.HorizontalPodAutoscalerLister,
	pdbs policylisters.PodDisruptionBudgetLister, ingresses networkinglisters.IngressLister,
	nps networkinglisters.NetworkPolicyLister,
) {
	k := c.kubeclient
	c.deployments = newChildKind(c.recorder, "Deployment", fromLister(deployments.Deployments),
		k.AppsV1().Deployments, appsac.ExtractDeployment, 0)
	c.services = newChildKind(c.recorder, "Service", fromLister(services.Services),
		k.CoreV1().Services, coreac.ExtractService, 0)
	// The controller never deletes a PersistentVolumeClaim: it holds the user's data.
	// Nor takes over its fields from a previous manager: its spec is all but immutable,
	// and dropping a field from it would be refused.
	c.pvcs = newChildKind(c.recorder, "PersistentVolumeClaim", fromLister(pvcs.PersistentVolumeClaims),
		k.CoreV1().PersistentVolumeClaims, coreac.ExtractPersistentVolumeClaim, neverDelete|neverTakeOver)
	c.hpas = newChildKind(c.recorder, "HorizontalPodAutoscaler", fromLister(hpas.HorizontalPodAutoscalers),
		k.AutoscalingV2().HorizontalPodAutoscalers, autoscalingac.ExtractHorizontalPodAutoscaler, 0)
	c.pdbs = newChildKind(c.recorder, "PodDisruptionBudget", fromLister(pdbs.PodDisruptionBudgets),
		k.PolicyV1().PodDisruptionBudgets, policyac.ExtractPodDisruptionBudget, 0)
	c.ingresses = newChildKind(c.recorder, "Ingress", fromLister(ingresses.Ingresses),
		k.NetworkingV1().Ingresses, networkingac.ExtractIngress, 0)
	c.networkPolicies = newChildKind(c.recorder, "NetworkPolicy", fromLister(nps.NetworkPolicies),
		k.NetworkingV1().NetworkPolicies, networkingac.ExtractNetworkPolicy, 0)
	// The managed ConfigMaps are compared by content hash and written whole (see
	// userconfig.go, cabundleconfigmap.go), never through ensure: nothing to take over.
	c.configMapCopies = newChildKind(c.recorder, "ConfigMap", c.cachedConfigMap,
		k.CoreV1().ConfigMaps, coreac.ExtractConfigMap, neverTakeOver)
}

// childKindFlags leave out what the controller never does to a kind.
type childKindFlags uint8

const (
	// neverDelete leaves childKind.delete nil.
	neverDelete childKindFlags = 1 << iota
	// neverTakeOver leaves childKind.patch nil: objects are never taken over from
	// another manager.
	neverTakeOver
)

// typedClient is the part of a client-go typed client for one kind, in one namespace,
// that childKind calls. Every generated client has these methods with these shapes.
type typedClient[T any, AC any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Apply(ctx context.Context, ac *AC, opts metav1.ApplyOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// newChildKind binds one kind: cached reads the informer cache, client gives the typed
// client of a namespace (such as kubeClient.AppsV1().Deployments), and extract is the
// kind's Extract<Kind> function.
func newChildKind[T metav1.Object, AC any, C typedClient[T, AC]](
	recorder record.EventRecorder, kind string, cached func(namespace, name string) (T, error), client func(namespace string) C,
	extract func(obj T, fieldManager string) (*AC, error), flags childKindFlags,
) *childKind[T, AC] {
	k := &childKind[T, AC]{
		recorder: recorder,
		kind:     kind,
		cached:   cached,
		live: func(ctx context.Context, ns, n string) (T, error) {
			return client(ns).Get(ctx, n, metav1.GetOptions{})
		},
		extract: extract,
		apply: func(ctx context.Context, ns string, ac *AC, o metav1.ApplyOptions) (T, error) {
			return client(ns).Apply(ctx, ac, o)
		},
	}
	if flags&neverTakeOver == 0 {
		k.patch = func(ctx context.Context, ns, n string, data []byte, o metav1.PatchOptions) (T, error) {
			return client(ns).Patch(ctx, n, types.JSONPatchType, data, o)
		}
	}
	if flags&neverDelete == 0 {
		k.delete = func(ctx context.Context, ns, n string, o metav1.DeleteOptions) error {
			return client(ns).Delete(ctx, n, o)
		}
	}
	return k
}

// fromLister turns a lister's namespaced getter (such as DeploymentLister.Deployments)
// into childKind's cached function.
func fromLister[T any, L interface{ Get(name string) (T, error) }](namespaced func(namespace string) L) func(namespace, name string) (T, error) {
	return func(ns, n string) (T, error) { return namespaced(ns).Get(n) }
}
