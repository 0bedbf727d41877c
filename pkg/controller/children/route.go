package children

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// The OpenShift Route of networking.expose type Route: route.openshift.io/v1, an
// optional kind (the controller's optionalkinds.go) made while the cluster serves it.
// No typed client of OpenShift's API is a dependency (the module proxy serves
// github.com/openshift/api only as v3.9.0+incompatible, from 2018): the kind is written
// and watched as unstructured objects through the dynamic client (unstructured.go), and
// only the fields below are set.

// RouteResource is the resource of the Route child.
var RouteResource = schema.GroupVersionResource{Group: "route.openshift.io", Version: "v1", Resource: "routes"}

// RouteKind is the kind of the Route child.
const RouteKind = "Route"

// WantsRoute tells whether the server is exposed through an OpenShift Route.
func WantsRoute(l *v1alpha2.LlamaStackDistribution) bool {
	e := llsd.Networking(l).Expose
	return e != nil && ptr.Deref(e.Enabled, true) && e.Type == v1alpha2.ExposeRoute
}

// routeTermination is where the Route's TLS ends: as asked, else Reencrypt for a
// server that serves TLS and Edge for one that does not.
func routeTermination(l *v1alpha2.LlamaStackDistribution, https bool) v1alpha2.RouteTermination {
	if r := llsd.Networking(l).Expose.Route; r != nil && r.Termination != "" {
		return r.Termination
	}
	if https {
		return v1alpha2.RouteTerminationReencrypt
	}
	return v1alpha2.RouteTerminationEdge
}

// NewRoute builds the Route that has the router serve the server Service's API port
// over HTTPS: for hostname when one is set (else the router picks the host), with TLS
// terminated as routeTermination says for what the pods listen on. A reencrypting
// route trusts the ca.crt of the server's TLS Secret (serverCA) when it has one, else
// the router's default (the cluster's service CA). Plain HTTP is redirected unless the
// CR says otherwise.
func NewRoute(l *v1alpha2.LlamaStackDistribution, listening Listening, serverCA []byte) *unstructured.Unstructured {
	e := llsd.Networking(l).Expose
	meta := llsd.ChildObjectMeta(l, llsd.RouteName(l))
	termination := routeTermination(l, listening.HTTPS)
	tls := map[string]any{
		"termination":                   strings.ToLower(string(termination)),
		"insecureEdgeTerminationPolicy": "Redirect",
	}
	if r := e.Route; r != nil && r.InsecureEdgeTerminationPolicy != "" {
		tls["insecureEdgeTerminationPolicy"] = r.InsecureEdgeTerminationPolicy
	}
	if termination == v1alpha2.RouteTerminationReencrypt && len(serverCA) > 0 {
		tls["destinationCACertificate"] = string(serverCA)
	}
	portName := ServicePortName
	if listening.HTTPS {
		portName = ServicePortNameTLS
	}
	spec := map[string]any{
		"to":   map[string]any{"kind": "Service", "name": llsd.ServiceName(l), "weight": int64(100)},
		"port": map[string]any{"targetPort": portName},
		"tls":  tls,
	}
	if e.Hostname != "" {
		spec["host"] = e.Hostname
	}
	metadata := ObjectMetaMap(meta)
	if len(e.Annotations) > 0 {
		metadata["annotations"] = AnyMap(e.Annotations)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": RouteResource.GroupVersion().String(),
		"kind":       RouteKind,
		"metadata":   metadata,
		"spec":       spec,
	}}
}

// routeIngress is one router's report in a Route's status.ingress.
type routeIngress struct {
	host, routerName string
	// admitted is the Admitted condition's status ("" when it has none), with its
	// reason and message.
	admitted, reason, message string
}

// routeIngresses reads a Route's status.ingress; entries that are not what the API
// writes are skipped.
func routeIngresses(route *unstructured.Unstructured) []routeIngress {
	list, _, _ := unstructured.NestedSlice(route.Object, "status", "ingress")
	var out []routeIngress
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		ri := routeIngress{}
		ri.host, _, _ = unstructured.NestedString(m, "host")
		ri.routerName, _, _ = unstructured.NestedString(m, "routerName")
		conds, _, _ := unstructured.NestedSlice(m, "conditions")
		for _, c := range conds {
			cm, ok := c.(map[string]any)
			if !ok {
				continue
			}
			if t, _, _ := unstructured.NestedString(cm, "type"); t != "Admitted" {
				continue
			}
			ri.admitted, _, _ = unstructured.NestedString(cm, "status")
			ri.reason, _, _ = unstructured.NestedString(cm, "reason")
			ri.message, _, _ = unstructured.NestedString(cm, "message")
		}
		out = append(out, ri)
	}
	return out
}

// RouteAdmission is what the routers say of a Route: True once one has admitted it,
// False when every router that reported refused it, Unknown before any reports.
func RouteAdmission(route *unstructured.Unstructured) (metav1.ConditionStatus, string, string) {
	ingresses := routeIngresses(route)
	var refused *routeIngress
	for i := range ingresses {
		switch ri := &ingresses[i]; ri.admitted {
		case string(metav1.ConditionTrue):
			return metav1.ConditionTrue, v1alpha2.ReasonRouteAccepted,
				fmt.Sprintf("Route %s is admitted by router %s for host %s", route.GetName(), ri.routerName, ri.host)
		case string(metav1.ConditionFalse):
			if refused == nil {
				refused = ri
			}
		}
	}
	if refused != nil {
		return metav1.ConditionFalse, v1alpha2.ReasonRouteNotAccepted,
			fmt.Sprintf("Route %s is not admitted by router %s, %s: %s", route.GetName(), refused.routerName, refused.reason, refused.message)
	}
	return metav1.ConditionUnknown, v1alpha2.ReasonRoutePending,
		fmt.Sprintf("Route %s is waiting for a router to admit it", route.GetName())
}

// RouteHostURL is status.routeURL of a Route: https://<host> of the first router that
// admitted it, "" before one has.
func RouteHostURL(route *unstructured.Unstructured) string {
	if route == nil {
		return ""
	}
	for _, ri := range routeIngresses(route) {
		if ri.admitted == string(metav1.ConditionTrue) && ri.host != "" {
			return "https://" + ri.host
		}
	}
	return ""
}
