package controller

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

// httpRouteResource is the Gateway API resource of the HTTPRoute child.
var httpRouteResource = gatewayv1.SchemeGroupVersion.WithResource("httproutes")

// wantsHTTPRoute tells whether the server is exposed through a Gateway API HTTPRoute.
func wantsHTTPRoute(l *v1alpha2.LlamaStackDistribution) bool {
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

// newHTTPRoute builds the HTTPRoute attaching the server Service to the Gateways of
// networking.expose.httpRoute: one rule, the path prefix to the Service's port, for
// hostname when one is set. Group, kind and weight are left to the API's defaults.
func newHTTPRoute(l *v1alpha2.LlamaStackDistribution) *gatewayv1.HTTPRoute {
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
						Name: gatewayv1.ObjectName(llsd.ServiceName(l)),
						Port: ptr.To(gatewayv1.PortNumber(llsd.Port(l))),
					},
				}}},
			}},
		},
	}
	for _, ref := range e.HTTPRoute.ParentRefs {
		p := gatewayv1.ParentReference{Name: gatewayv1.ObjectName(ref.Name)}
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

// httpRouteURL is status.routeURL of an HTTPRoute: <scheme>://<hostname>[:port]<path>
// once every Gateway has accepted it, "" without a hostname (or with a wildcard one)
// or before; the scheme and port are those of the listener it attaches to (at), plain
// HTTP on the default port when the Gateway is not known.
func httpRouteURL(l *v1alpha2.LlamaStackDistribution, route *gatewayv1.HTTPRoute, at routeEndpoint) string {
	e := llsd.Networking(l).Expose
	if route == nil || e.Hostname == "" || strings.HasPrefix(e.Hostname, "*") {
		return ""
	}
	if status, _, _ := httpRouteAcceptance(route); status != metav1.ConditionTrue {
		return ""
	}
	path := httpRoutePath(e)
	if path == "/" {
		path = ""
	}
	if at.scheme == "" {
		at.scheme = "http"
	}
	return at.url(e.Hostname, path)
}

// httpRouteAcceptance is what the Gateways an HTTPRoute names say of it (its
// status.parents): True when each has accepted it and resolved its backend, False with
// the first refusal, Unknown while one has not reported.
func httpRouteAcceptance(route *gatewayv1.HTTPRoute) (metav1.ConditionStatus, string, string) {
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

// exposedCondition is Exposed: for a CR exposed through an HTTPRoute or a Route,
// whether the cluster serves the API and the Gateways (or routers) accept the route;
// absent otherwise. Until the controller knows (the API's discovery, the route's first
// write), the last report stands.
func exposedCondition(l *v1alpha2.LlamaStackDistribution, obs observed) conditionUpdate {
	switch {
	case wantsHTTPRoute(l):
		return routeCondition(obs.httpRouteAPI, obs.httpRoute != nil,
			"The cluster does not serve "+httpRouteResource.GroupVersion().String()+" HTTPRoute: install the Gateway API CRDs "+
				"(the standard channel), or expose the server with type Ingress",
			func() (metav1.ConditionStatus, string, string) { return httpRouteAcceptance(obs.httpRoute) })
	case wantsRoute(l):
		return routeCondition(obs.routeAPI, obs.route != nil,
			"The cluster does not serve "+routeResource.GroupVersion().String()+" Route (it is not OpenShift): "+
				"expose the server with type Ingress or HTTPRoute",
			func() (metav1.ConditionStatus, string, string) { return routeAdmission(obs.route) })
	}
	return dropped
}

// routeCondition is Exposed for a route of an optional kind: False with notServed
// while the cluster does not serve the kind, what accepted says once the route was
// seen, and the last report until then.
func routeCondition(api apiState, seen bool, notServed string, accepted func() (metav1.ConditionStatus, string, string)) conditionUpdate {
	switch {
	case api == apiAbsent:
		return setTo(metav1.ConditionFalse, v1alpha2.ReasonAPINotServed, notServed)
	case api == apiUnknown || !seen:
		return keepAsIs
	}
	return setTo(accepted())
}
