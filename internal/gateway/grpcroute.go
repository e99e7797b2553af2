package gateway

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/route"
)

// GRPCRoutes onto the same routing table: a gRPC call is an HTTP/2 POST to
// "/package.Service/Method", so a method match is a path match:
//
//   - service and method (Exact): the Exact path "/service/method";
//   - service alone: the PathPrefix "/service";
//   - method alone, or RegularExpression: a RegularExpression path
//     "/service/method" anchored at both ends ([^/]+ for a part left out);
//   - no method match: every call (PathPrefix "/").
//
// Header matches become route.Conditions, the filters
// RequestHeaderModifier, ResponseHeaderModifier and RequestMirror those of
// HTTPRoute, backendRefs are weighted alike, and the backends are spoken
// to in gRPC over HTTP/2 (h2c; appProtocol kubernetes.io/h2c as h2c).
// Precedence between GRPCRoutes and HTTPRoutes of one host is the table's:
// an Exact path, then RegularExpression paths (longest first), then the
// longest prefix.

// grpcName: a service ("pkg.Service") or method name as protobuf allows.
var grpcName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// grpcRoute evaluates one GRPCRoute as httpRoute does an HTTPRoute.
func (b *builder) grpcRoute(r *gatewayv1.GRPCRoute) {
	routeHosts, badHost := routeHostnames(r.Spec.Hostnames)
	rules, unsupported, refsOK, refReason, refMsg := b.grpcRules(r)
	parents, atts := b.routeParents("GRPCRoute", r.ObjectMeta, r.Spec.ParentRefs, routeHosts, badHost, len(rules), unsupported, refsOK, refReason, refMsg)
	if len(parents) == 0 {
		return
	}
	b.res.GRPCRoutes = append(b.res.GRPCRoutes, RouteStatus{Namespace: r.Namespace, Name: r.Name, Parents: parents})
	for i := range rules {
		rules[i].GRPC = true
	}
	b.emit(r.Namespace+"/"+r.Name, atts, rules)
}

// routeParents evaluates a route's parentRefs (the served Gateways among
// them), records problems and returns the parent statuses and the
// attachments.
func (b *builder) routeParents(kind gatewayv1.Kind, m metav1.ObjectMeta, prs []gatewayv1.ParentReference, routeHosts []string, badHost string,
	nrules int, unsupported []string, refsOK bool, refReason, refMsg string) ([]gatewayv1.RouteParentStatus, []attachment) {
	gen := m.Generation
	var parents []gatewayv1.RouteParentStatus
	var atts []attachment
	for _, pr := range prs {
		if (pr.Group != nil && *pr.Group != Group) || (pr.Kind != nil && *pr.Kind != "Gateway") {
			continue // not a Gateway: not ours to answer
		}
		ns := m.Namespace
		if pr.Namespace != nil && *pr.Namespace != "" {
			ns = string(*pr.Namespace)
		}
		lns, ours := b.gateways[ns+"/"+string(pr.Name)]
		if !ours {
			continue
		}
		ps := gatewayv1.RouteParentStatus{ParentRef: pr, ControllerName: ControllerName}
		acc, reason, msg := b.attachKind(kind, m.Namespace, pr, lns, routeHosts, badHost, &atts)
		if acc && nrules == 0 && len(unsupported) > 0 {
			acc, reason, msg = false, string(gatewayv1.RouteReasonUnsupportedValue), "no rule can be served: "+strings.Join(unsupported, "; ")
		}
		ps.Conditions = []metav1.Condition{
			condition(string(gatewayv1.RouteConditionAccepted), acc, reason, msg, gen),
			condition(string(gatewayv1.RouteConditionResolvedRefs), refsOK, refReason, refMsg, gen),
		}
		if acc && len(unsupported) > 0 {
			ps.Conditions = append(ps.Conditions, condition(string(gatewayv1.RouteConditionPartiallyInvalid), true,
				string(gatewayv1.RouteReasonUnsupportedValue), "rules not served: "+strings.Join(unsupported, "; "), gen))
		}
		if !acc && !(reason == string(gatewayv1.RouteReasonUnsupportedValue) && len(unsupported) > 0) {
			b.problem(string(kind), m.Namespace, m.Name, reason, fmt.Sprintf("parentRef %s/%s: %s", ns, truncate(string(pr.Name), 253), msg))
		}
		parents = append(parents, ps)
	}
	if len(parents) > 0 {
		if len(unsupported) > 0 {
			b.problem(string(kind), m.Namespace, m.Name, string(gatewayv1.RouteReasonUnsupportedValue), "rules not served: "+strings.Join(unsupported, "; "))
		}
		if !refsOK {
			b.problem(string(kind), m.Namespace, m.Name, refReason, refMsg)
		}
	}
	return parents, atts
}

// emit adds a route's rules for every host it is attached for, in the
// scope of each Gateway it is attached through (the shared table, or a
// Gateway's own address).
func (b *builder) emit(id string, atts []attachment, rules []Rule) {
	if len(rules) == 0 {
		return
	}
	type scopedHost struct {
		scope string
		port  int32
		host  string
	}
	httpsOnly := map[scopedHost]bool{}
	var hosts []scopedHost
	for _, a := range atts {
		if !a.ln.usable || a.ln.unserved {
			continue // attached, not served until its references resolve (or its Gateway has an address)
		}
		for _, h := range a.hosts {
			k := scopedHost{a.ln.scope, a.ln.port, h}
			only, seen := httpsOnly[k]
			if !seen {
				hosts = append(hosts, k)
				only = true
			}
			httpsOnly[k] = only && a.ln.https
			a.ln.attached[h] = true
		}
	}
	slices.SortFunc(hosts, func(x, y scopedHost) int {
		return cmp.Or(strings.Compare(x.scope, y.scope), cmp.Compare(x.port, y.port), strings.Compare(x.host, y.host))
	})
	for _, rl := range rules {
		for _, k := range hosts {
			rl.Host, rl.Scope, rl.Port, rl.Route, rl.HTTPSOnly = k.host, k.scope, k.port, id, httpsOnly[k]
			b.res.Rules = append(b.res.Rules, rl)
		}
	}
}

// grpcRules returns the servable rules of a GRPCRoute, the rules left out
// and why, and the ResolvedRefs outcome.
func (b *builder) grpcRules(r *gatewayv1.GRPCRoute) (out []Rule, unsupported []string, refsOK bool, refReason, refMsg string) {
	refsOK, refReason, refMsg = true, string(gatewayv1.RouteReasonResolvedRefs), "all references resolved"
	for i := range r.Spec.Rules {
		rule := &r.Spec.Rules[i]
		where := fmt.Sprintf("rules[%d]", i)
		if why := unsupportedGRPCRule(rule); why != "" {
			unsupported = append(unsupported, where+": "+why)
			continue
		}
		filters, mirrorRefs, why := filtersOf(grpcFilters(rule.Filters), route.PathExact)
		if why != "" {
			unsupported = append(unsupported, where+": "+why)
			continue
		}
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gatewayv1.GRPCRouteMatch{{}}
		}
		var paths []Rule
		bad := ""
		for j := range matches {
			m := &matches[j]
			pt, p, why := grpcPath(m.Method)
			if why == "" {
				var cond *route.Conditions
				cond, why = conditionsOf(&gatewayv1.HTTPRouteMatch{Headers: grpcHeaders(m.Headers)})
				paths = append(paths, Rule{PathType: pt, Path: p, Conditions: cond, Filters: filters})
			}
			if why != "" {
				bad = fmt.Sprintf("matches[%d]: %s", j, why)
				break
			}
		}
		if bad != "" {
			unsupported = append(unsupported, where+": "+bad)
			continue
		}
		refs := make([]gatewayv1.BackendRef, len(rule.BackendRefs))
		for k := range rule.BackendRefs {
			refs[k] = rule.BackendRefs[k].BackendRef
		}
		single, shares, reason, msg := b.ruleBackends("GRPCRoute", r.Namespace, refs, where)
		if reason != "" && refsOK {
			refsOK, refReason, refMsg = false, reason, msg
		}
		mirrors, reason, msg := b.mirrorBackends("GRPCRoute", r.Namespace, mirrorRefs, where)
		if reason != "" && refsOK {
			refsOK, refReason, refMsg = false, reason, msg
		}
		for _, p := range paths {
			p.Backend, p.Backends, p.Mirrors = single, shares, mirrors
			out = append(out, p)
		}
	}
	return out, unsupported, refsOK, refReason, refMsg
}

func unsupportedGRPCRule(rule *gatewayv1.GRPCRouteRule) string {
	if rule.SessionPersistence != nil {
		return "sessionPersistence is not supported yet"
	}
	for _, br := range rule.BackendRefs {
		if len(br.Filters) > 0 {
			return "backendRef filters are not supported yet"
		}
	}
	return ""
}

// grpcFilters are a GRPCRoute's filters as HTTPRoute filters (the same
// configuration types); ExtensionRef stays an unsupported type.
func grpcFilters(fs []gatewayv1.GRPCRouteFilter) []gatewayv1.HTTPRouteFilter {
	out := make([]gatewayv1.HTTPRouteFilter, 0, len(fs))
	for _, f := range fs {
		out = append(out, gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterType(f.Type),
			RequestHeaderModifier: f.RequestHeaderModifier, ResponseHeaderModifier: f.ResponseHeaderModifier,
			RequestMirror: f.RequestMirror, ExtensionRef: f.ExtensionRef})
	}
	return out
}

func grpcHeaders(hs []gatewayv1.GRPCHeaderMatch) []gatewayv1.HTTPHeaderMatch {
	out := make([]gatewayv1.HTTPHeaderMatch, 0, len(hs))
	for _, h := range hs {
		m := gatewayv1.HTTPHeaderMatch{Name: gatewayv1.HTTPHeaderName(h.Name), Value: h.Value}
		if h.Type != nil {
			m.Type = ptr(gatewayv1.HeaderMatchType(*h.Type))
		}
		out = append(out, m)
	}
	return out
}

// grpcPath returns the path match of a gRPC method match, or why it
// cannot be served.
func grpcPath(m *gatewayv1.GRPCMethodMatch) (route.PathType, string, string) {
	if m == nil {
		return route.PathPrefix, "/", ""
	}
	svc, meth := "", ""
	if m.Service != nil {
		svc = *m.Service
	}
	if m.Method != nil {
		meth = *m.Method
	}
	if svc == "" && meth == "" {
		return 0, "", "a method match needs a service or a method"
	}
	if len(svc) > 1024 || len(meth) > 1024 {
		return 0, "", "service and method are at most 1024 bytes"
	}
	typ := gatewayv1.GRPCMethodMatchExact
	if m.Type != nil {
		typ = *m.Type
	}
	switch typ {
	case gatewayv1.GRPCMethodMatchExact:
		for _, n := range []string{svc, meth} {
			if n != "" && !grpcName.MatchString(n) {
				return 0, "", fmt.Sprintf("%q is not a gRPC service or method name", truncate(n, 80))
			}
		}
		switch {
		case svc != "" && meth != "":
			return route.PathExact, "/" + svc + "/" + meth, ""
		case svc != "":
			return route.PathPrefix, "/" + svc, ""
		}
		return route.PathRegex, "/[^/]+/" + regexp.QuoteMeta(meth) + "$", ""
	case gatewayv1.GRPCMethodMatchRegularExpression:
		part := func(p string) (string, string) {
			if p == "" {
				return "[^/]+", ""
			}
			if _, err := regexp.Compile(p); err != nil || strings.Contains(p, "/") {
				return "", fmt.Sprintf("pattern %q does not compile or has a '/'", truncate(p, 80))
			}
			return "(?:" + p + ")", ""
		}
		s, why := part(svc)
		if why != "" {
			return 0, "", why
		}
		mt, why := part(meth)
		if why != "" {
			return 0, "", why
		}
		p := "/" + s + "/" + mt + "$"
		if _, err := route.CompilePath(p); err != nil {
			return 0, "", fmt.Sprintf("pattern %q does not compile", truncate(p, 80))
		}
		return route.PathRegex, p, ""
	}
	return 0, "", fmt.Sprintf("method match type %q is not supported (Exact and RegularExpression are)", truncate(string(typ), 40))
}

// olderGRPCFirst is olderFirst for GRPCRoutes.
func olderGRPCFirst(a, b *gatewayv1.GRPCRoute) int {
	return cmp.Or(
		a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Name, b.Name),
	)
}
