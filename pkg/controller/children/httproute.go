package children

import (
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// HTTPRouteResource is the Gateway API resource of the HTTPRoute child.
var HTTPRouteResource = gatewayv1.SchemeGroupVersion.WithResource("httproutes")

// WantsHTTPRoute tells whether the server is exposed through a Gateway API HTTPRoute.
func WantsHTTPRoute(l *v1alpha2.LlamaStackDistribution) bool {
	e := llsd.Networking(l).Expose
	return e != nil && ptr.Deref(e.Enabled, true) && e.Type == v1alpha2.ExposeHTTPRoute && e.HTTPRoute != nil
}

// httpRoutePath is the path prefix the HTTPRoute routes to the server.
func httpRoutePath(e *v1alpha2.ExposeSpec) string {
	if e.HTTPRoute == nil || e.HTTPRoute.Path == "" {
		return "/"
	}
	return e.HTTPRoute.Path
}

// NewHTTPRoute builds the HTTPRoute attaching the server Service to the Gateways of
// networking.expose.httpRoute: one rule, the path prefix to the Service's port, for
// hostname when one is set. It carries the values the API server would default in it
// (a parent's group and kind, a backend's group, kind and weight): parentRefs and rules
// are atomic lists, so the API server's defaults in them are our manager's fields when
// read back, and a route built without them would differ from its stored self on every
// sync and be applied again.
func NewHTTPRoute(l *v1alpha2.LlamaStackDistribution) *gatewayv1.HTTPRoute {
	e := llsd.Networking(l).Expose
	route := &gatewayv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.SchemeGroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: llsd.ChildObjectMeta(l, llsd.HTTPRouteName(l)),
		Spec: gatewayv1.HTTPRouteSpec{
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
					Type:  ptr.To(gatewayv1.PathMatchPathPrefix),
					Value: ptr.To(httpRoutePath(e)),
				}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{
						Group: ptr.To(gatewayv1.Group("")),
						Kind:  ptr.To(gatewayv1.Kind("Service")),
						Name:  gatewayv1.ObjectName(llsd.ServiceName(l)),
						Port:  ptr.To(gatewayv1.PortNumber(llsd.Port(l))),
					},
					Weight: ptr.To[int32](1),
				}}},
			}},
		},
	}
	for _, ref := range e.HTTPRoute.ParentRefs {
		p := gatewayv1.ParentReference{
			Group: ptr.To(gatewayv1.Group(gatewayv1.GroupName)),
			Kind:  ptr.To(gatewayv1.Kind("Gateway")),
			Name:  gatewayv1.ObjectName(ref.Name),
		}
		if ref.Namespace != "" {
			p.Namespace = ptr.To(gatewayv1.Namespace(ref.Namespace))
		}
		if ref.SectionName != "" {
			p.SectionName = ptr.To(gatewayv1.SectionName(ref.SectionName))
		}
		route.Spec.ParentRefs = append(route.Spec.ParentRefs, p)
	}
	if e.Hostname != "" {
		route.Spec.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(e.Hostname)}
	}
	if len(e.Annotations) > 0 {
		route.Annotations = maps.Clone(e.Annotations)
	}
	return route
}

// HTTPRouteURL is status.routeURL of an HTTPRoute: <scheme>://<hostname>[:port]<path>
// once every Gateway has accepted it, "" without a hostname (or with a wildcard one)
// or before; the scheme and port are those of the listener it attaches to (at), plain
// HTTP on the default port when the Gateway is not known.
func HTTPRouteURL(l *v1alpha2.LlamaStackDistribution, route *gatewayv1.HTTPRoute, at RouteEndpoint) string {
	e := llsd.Networking(l).Expose
	if route == nil || e.Hostname == "" || strings.HasPrefix(e.Hostname, "*") {
		return ""
	}
	if status, _, _ := HTTPRouteAcceptance(route); status != metav1.ConditionTrue {
		return ""
	}
	path := httpRoutePath(e)
	if path == "/" {
		path = ""
	}
	if at.Scheme == "" {
		at.Scheme = "http"
	}
	return at.URL(e.Hostname, path)
}

// HTTPRouteAcceptance is what the Gateways an HTTPRoute names say of it (its
// status.parents): True when each has accepted it and resolved its backend, False with
// the first refusal, Unknown while one has not reported.
func HTTPRouteAcceptance(route *gatewayv1.HTTPRoute) (metav1.ConditionStatus, string, string) {
	var pending, accepted []string
	for _, ref := range route.Spec.ParentRefs {
		name := parentName(route.Namespace, ref)
		reported := false
		for _, p := range route.Status.Parents {
			if !sameParent(route.Namespace, p.ParentRef, ref) {
				continue
			}
			reported = true
			for _, condType := range []string{string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteConditionResolvedRefs)} {
				if c := meta.FindStatusCondition(p.Conditions, condType); c != nil && c.Status == metav1.ConditionFalse {
					return metav1.ConditionFalse, v1alpha2.ReasonRouteNotAccepted,
						fmt.Sprintf("Gateway %s (%s) reports %s=False, %s: %s", name, p.ControllerName, condType, c.Reason, c.Message)
				}
			}
			if c := meta.FindStatusCondition(p.Conditions, string(gatewayv1.RouteConditionAccepted)); c == nil || c.Status != metav1.ConditionTrue {
				reported = false
			}
		}
		if reported {
			accepted = append(accepted, name)
		} else {
			pending = append(pending, name)
		}
	}
	if len(pending) > 0 {
		return metav1.ConditionUnknown, v1alpha2.ReasonRoutePending,
			fmt.Sprintf("HTTPRoute %s is waiting for Gateway %s to accept it", route.Name, strings.Join(pending, ", "))
	}
	return metav1.ConditionTrue, v1alpha2.ReasonRouteAccepted,
		fmt.Sprintf("HTTPRoute %s is accepted by Gateway %s", route.Name, strings.Join(accepted, ", "))
}

// parentName renders a parent reference as namespace/name[/section].
func parentName(routeNamespace string, ref gatewayv1.ParentReference) string {
	ns := routeNamespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	name := ns + "/" + string(ref.Name)
	if ref.SectionName != nil {
		name += "/" + string(*ref.SectionName)
	}
	return name
}

// sameParent tells whether a parent status's reference is the route's reference ref.
func sameParent(routeNamespace string, reported, ref gatewayv1.ParentReference) bool {
	return parentName(routeNamespace, reported) == parentName(routeNamespace, ref) &&
		ptr.Deref(reported.Port, 0) == ptr.Deref(ref.Port, 0)
}
