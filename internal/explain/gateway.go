package explain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/gateway"
)

// Gateway explains the Gateway s.Namespace/s.Name: its class and whether
// sluice serves it, the binding(s) that give it an address, the
// conditions the controller wrote on it and on each listener, the routes
// attached to it with their per-parent conditions, and the Warning Events
// that still stand. It reads only what the controller published (status
// and Events): the conditions carry the spec's reasons and the controller's
// messages, which name the fix.
func Gateway(s State) Report {
	s = withDefaults(s)
	var r report
	gw := s.Gateway
	if gw == nil {
		r.bad(0, fmt.Sprintf("Gateway %s/%s does not exist (or you may not read it)", s.Namespace, s.Name),
			"Gateway %s/%s", s.Namespace, s.Name)
		return r.Report
	}
	r.ok(0, "Gateway %s/%s", gw.Namespace, gw.Name)
	class := string(gw.Spec.GatewayClassName)
	var gc *gatewayv1.GatewayClass
	for i := range s.GatewayClasses {
		if s.GatewayClasses[i].Name == class {
			gc = &s.GatewayClasses[i]
		}
	}
	switch {
	case gc == nil:
		r.bad(1, fmt.Sprintf("GatewayClass %q does not exist: create it with spec.controllerName %s", class, gateway.ControllerName),
			"class %q: not found", class)
		r.objectProblems(s, 1, "Gateway", gw.Namespace, gw.Name)
		return r.Report
	case gc.Spec.ControllerName != gateway.ControllerName:
		r.bad(1, fmt.Sprintf("the Gateway is not sluice's: its GatewayClass %q names controller %s, not %s", class, gc.Spec.ControllerName, gateway.ControllerName),
			"class %q (controller %s) is not served by sluice", class, gc.Spec.ControllerName)
		return r.Report
	}
	if c := meta.FindStatusCondition(gc.Status.Conditions, string(gatewayv1.GatewayClassConditionStatusAccepted)); c != nil && c.Status == metav1.ConditionFalse {
		r.bad(1, fmt.Sprintf("GatewayClass %q is not accepted (%s): %s", class, c.Reason, c.Message),
			"class %q, served by sluice, not accepted: %s", class, c.Reason)
	} else {
		r.ok(1, "class %q, served by sluice", class)
	}
	bs := gatewayBindings(s, gc)
	if len(bs) == 0 {
		fix := fmt.Sprintf("create a LoadBalancerBinding in %s", s.ControllerNamespace)
		if p := gc.Spec.ParametersRef; p != nil {
			fix = fmt.Sprintf("create the LoadBalancerBinding %s/%s its parametersRef names", ptrString(p.Namespace), p.Name)
		}
		r.bad(1, fmt.Sprintf("no LoadBalancerBinding serves GatewayClass %q: %s", class, fix), "binding: none")
	}
	for _, b := range bs {
		r.binding(s, b, 1)
	}
	r.gatewayConditions(gw, len(bs) > 0)
	r.listeners(gw)
	r.attached(s, gw)
	r.objectProblems(s, 1, "Gateway", gw.Namespace, gw.Name)
	return r.Report
}

// gatewayBindings returns the bindings serving a class: its parametersRef's
// LoadBalancerBinding, else every binding of the controller's namespace.
func gatewayBindings(s State, gc *gatewayv1.GatewayClass) []*v1alpha1.LoadBalancerBinding {
	var out []*v1alpha1.LoadBalancerBinding
	for i := range s.Bindings {
		b := &s.Bindings[i]
		if p := gc.Spec.ParametersRef; p != nil {
			if string(p.Group) == v1alpha1.GroupVersion.Group && string(p.Kind) == "LoadBalancerBinding" &&
				ptrString(p.Namespace) == b.Namespace && p.Name == b.Name {
				out = append(out, b)
			}
		} else if b.Namespace == s.ControllerNamespace {
			out = append(out, b)
		}
	}
	return out
}

func ptrString[T ~string](p *T) string {
	if p == nil {
		return ""
	}
	return string(*p)
}

// gatewayConditions reports the Gateway's Accepted and Programmed
// conditions and its addresses.
func (r *report) gatewayConditions(gw *gatewayv1.Gateway, bound bool) {
	if len(gw.Status.Conditions) == 0 {
		r.bad(1, "the Gateway has no status: is the controller running with --gateway-api (chart gatewayAPI.enabled)?", "status: none written")
		return
	}
	for _, t := range []gatewayv1.GatewayConditionType{gatewayv1.GatewayConditionAccepted, gatewayv1.GatewayConditionProgrammed} {
		r.condition(1, "Gateway", gw.Status.Conditions, string(t), gw.Generation)
	}
	var addrs []string
	for _, a := range gw.Status.Addresses {
		addrs = append(addrs, a.Value)
	}
	switch {
	case len(addrs) > 0:
		r.ok(1, "addresses %s", strings.Join(addrs, ", "))
	case bound:
		r.bad(1, "the Gateway has no address: its binding has published none yet (see the binding's conditions above)", "addresses: none")
	}
}

// condition reports one condition of an object: true is fine, false (or
// missing, or written for an older generation) is a cause.
func (r *report) condition(depth int, what string, conds []metav1.Condition, typ string, generation int64) {
	c := meta.FindStatusCondition(conds, typ)
	switch {
	case c == nil:
		r.bad(depth, fmt.Sprintf("%s has no %s condition: the controller has not written it yet", what, typ), "%s: not written", typ)
	case c.Status != metav1.ConditionTrue:
		r.bad(depth, fmt.Sprintf("%s: %s is %s (%s): %s", what, typ, c.Status, c.Reason, c.Message), "%s %s (%s): %s", typ, c.Status, c.Reason, c.Message)
	case generation != 0 && c.ObservedGeneration != 0 && c.ObservedGeneration < generation:
		r.bad(depth, fmt.Sprintf("%s: %s describes generation %d, not the current %d: the controller has not caught up", what, typ, c.ObservedGeneration, generation),
			"%s (generation %d of %d)", typ, c.ObservedGeneration, generation)
	default:
		r.ok(depth, "%s (%s)", typ, c.Reason)
	}
}

// listeners reports each listener of the spec with its status: Accepted,
// Programmed, ResolvedRefs, not Conflicted, and its attached routes.
func (r *report) listeners(gw *gatewayv1.Gateway) {
	status := map[gatewayv1.SectionName]gatewayv1.ListenerStatus{}
	for _, l := range gw.Status.Listeners {
		status[l.Name] = l
	}
	for _, l := range gw.Spec.Listeners {
		host := "*"
		if l.Hostname != nil {
			host = string(*l.Hostname)
		}
		st, ok := status[l.Name]
		what := fmt.Sprintf("listener %s (%s %s:%d)", l.Name, l.Protocol, host, l.Port)
		if !ok {
			r.bad(1, fmt.Sprintf("%s has no status: the controller has not written it yet", what), "%s", what)
			continue
		}
		r.ok(1, "%s, %d route(s) attached", what, st.AttachedRoutes)
		for _, t := range []gatewayv1.ListenerConditionType{gatewayv1.ListenerConditionAccepted, gatewayv1.ListenerConditionProgrammed, gatewayv1.ListenerConditionResolvedRefs} {
			r.condition(2, what, st.Conditions, string(t), gw.Generation)
		}
		if c := meta.FindStatusCondition(st.Conditions, string(gatewayv1.ListenerConditionConflicted)); c != nil && c.Status == metav1.ConditionTrue {
			r.bad(2, fmt.Sprintf("%s conflicts with another listener (%s): %s", what, c.Reason, c.Message), "Conflicted (%s): %s", c.Reason, c.Message)
		}
	}
}

// attached reports the routes (HTTPRoutes, then GRPCRoutes) whose
// parentRefs name the Gateway, with the conditions sluice wrote for that
// parent.
func (r *report) attached(s State, gw *gatewayv1.Gateway) {
	var routes []attachedRoute
	for i := range s.HTTPRoutes {
		hr := &s.HTTPRoutes[i]
		routes = append(routes, attachedRoute{"HTTPRoute", &hr.ObjectMeta, hr.Spec.ParentRefs, &hr.Status.RouteStatus})
	}
	for i := range s.GRPCRoutes {
		gr := &s.GRPCRoutes[i]
		routes = append(routes, attachedRoute{"GRPCRoute", &gr.ObjectMeta, gr.Spec.ParentRefs, &gr.Status.RouteStatus})
	}
	routes = slices.DeleteFunc(routes, func(a attachedRoute) bool {
		return !slices.ContainsFunc(a.parents, func(p gatewayv1.ParentReference) bool { return refersTo(p, a.meta.Namespace, gw) })
	})
	if len(routes) == 0 {
		r.ok(1, "no route names this Gateway as its parent")
		return
	}
	slices.SortStableFunc(routes, func(a, b attachedRoute) int {
		return cmp.Or(strings.Compare(a.kind, b.kind)*-1, strings.Compare(a.meta.Namespace, b.meta.Namespace), strings.Compare(a.meta.Name, b.meta.Name))
	})
	for _, a := range routes {
		what := fmt.Sprintf("%s %s/%s", a.kind, a.meta.Namespace, a.meta.Name)
		var ps *gatewayv1.RouteParentStatus
		for i := range a.status.Parents {
			p := &a.status.Parents[i]
			if p.ControllerName == gateway.ControllerName && refersTo(p.ParentRef, a.meta.Namespace, gw) {
				ps = p
				break
			}
		}
		if ps == nil {
			r.bad(1, fmt.Sprintf("%s has no status from sluice for this Gateway: the controller has not written it yet", what), "%s: no status", what)
			continue
		}
		r.ok(1, "%s", what)
		for _, t := range []gatewayv1.RouteConditionType{gatewayv1.RouteConditionAccepted, gatewayv1.RouteConditionResolvedRefs} {
			r.condition(2, what, ps.Conditions, string(t), a.meta.Generation)
		}
		r.objectProblems(s, 2, a.kind, a.meta.Namespace, a.meta.Name)
	}
}

// attachedRoute is what attached reads of a route of any kind.
type attachedRoute struct {
	kind    string
	meta    *metav1.ObjectMeta
	parents []gatewayv1.ParentReference
	status  *gatewayv1.RouteStatus
}

// refersTo reports whether a parentRef of a route in namespace ns names
// the Gateway gw.
func refersTo(p gatewayv1.ParentReference, ns string, gw *gatewayv1.Gateway) bool {
	if p.Group != nil && *p.Group != gatewayv1.GroupName || p.Kind != nil && *p.Kind != "Gateway" {
		return false
	}
	pns := ns
	if p.Namespace != nil {
		pns = string(*p.Namespace)
	}
	return pns == gw.Namespace && string(p.Name) == gw.Name
}
