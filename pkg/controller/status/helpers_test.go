package status

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

const testNamespace = "demo"

// newLLSD is a minimal CR of the test namespace; mods change it.
func newLLSD(name string, mods ...func(*v1alpha2.LlamaStackDistribution)) *v1alpha2.LlamaStackDistribution {
	l := &v1alpha2.LlamaStackDistribution{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha2.SchemeGroupVersion.String(), Kind: "LlamaStackDistribution"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name), Generation: 1,
		},
		Spec: v1alpha2.LlamaStackDistributionSpec{Distribution: v1alpha2.DistributionSpec{Name: "starter"}},
	}
	for _, m := range mods {
		m(l)
	}
	return l
}

// hubMods lists CR modifiers.
func hubMods(f ...func(*v1alpha2.LlamaStackDistribution)) []func(*v1alpha2.LlamaStackDistribution) {
	return f
}

// exposedThrough returns a CR modifier exposing the server through an HTTPRoute
// attached to refs, for hostname (may be empty) and path (may be empty).
func exposedThrough(hostname, path string, refs ...v1alpha2.GatewayParentRef) func(*v1alpha2.LlamaStackDistribution) {
	return func(l *v1alpha2.LlamaStackDistribution) {
		if l.Spec.Networking == nil {
			l.Spec.Networking = &v1alpha2.NetworkingSpec{}
		}
		l.Spec.Networking.Expose = &v1alpha2.ExposeSpec{Type: v1alpha2.ExposeHTTPRoute, Hostname: hostname,
			HTTPRoute: &v1alpha2.HTTPRouteSpec{ParentRefs: refs, Path: path}}
	}
}

// routeWithParents is an HTTPRoute naming refs, with the parent statuses given.
func routeWithParents(refs []gatewayv1.ParentReference, parents ...gatewayv1.RouteParentStatus) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "app-route", Namespace: testNamespace}}
	r.Spec.ParentRefs = refs
	r.Status.Parents = parents
	return r
}

func parentStatus(ref gatewayv1.ParentReference, conds ...metav1.Condition) gatewayv1.RouteParentStatus {
	return gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: "example.com/gateway", Conditions: conds}
}

func routeCond(condType gatewayv1.RouteConditionType, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: string(condType), Status: status, Reason: reason, Message: message}
}
