package gateway

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/route"
)

// attachment is a route attached to one listener, for some hosts.
type attachment struct {
	ln    *listener
	hosts []string // lower case; "" for any host
}

// httpRoute evaluates one HTTPRoute against the served Gateways its
// parentRefs name, records its status and emits its rules.
func (b *builder) httpRoute(r *gatewayv1.HTTPRoute) {
	routeHosts, badHost := routeHostnames(r.Spec.Hostnames)
	// Rules first: their outcome is the same for every parent.
	rules, unsupported, refsOK, refReason, refMsg := b.rules(r)
	parents, atts := b.routeParents("HTTPRoute", r.ObjectMeta, r.Spec.ParentRefs, routeHosts, badHost, len(rules), unsupported, refsOK, refReason, refMsg)
	if len(parents) == 0 {
		return
	}
	b.res.HTTPRoutes = append(b.res.HTTPRoutes, RouteStatus{Namespace: r.Namespace, Name: r.Name, Parents: parents})
	b.emit(r.Namespace+"/"+r.Name, atts, rules)
}

// attachKind attaches a route of kind in namespace ns to the listeners of
// one parentRef, and says whether it is accepted there and why not.
func (b *builder) attachKind(kind gatewayv1.Kind, ns string, pr gatewayv1.ParentReference, lns []*listener, routeHosts []string, badHost string, atts *[]attachment) (ok bool, reason, msg string) {
	if badHost != "" {
		return false, string(gatewayv1.RouteReasonUnsupportedValue), badHost
	}
	var candidates []*listener
	for _, ln := range lns {
		if pr.SectionName != nil && *pr.SectionName != ln.spec.Name {
			continue
		}
		if pr.Port != nil && *pr.Port != ln.spec.Port {
			continue
		}
		candidates = append(candidates, ln)
	}
	if len(candidates) == 0 {
		return false, string(gatewayv1.RouteReasonNoMatchingParent), "no listener of the Gateway matches the parentRef's sectionName and port"
	}
	var allowed []*listener
	for _, ln := range candidates {
		if b.allows(ln, ns) && ln.takes(kind) {
			allowed = append(allowed, ln)
		}
	}
	if len(allowed) == 0 {
		return false, string(gatewayv1.RouteReasonNotAllowedByListeners), "no listener the parentRef matches allows " + string(kind) + "s from namespace " + ns + " (or none is programmed)"
	}
	n := 0
	for _, ln := range allowed {
		hosts := intersect(ln.host, routeHosts)
		if len(hosts) == 0 {
			continue
		}
		ln.status.AttachedRoutes++
		*atts = append(*atts, attachment{ln: ln, hosts: hosts})
		n++
	}
	if n == 0 {
		return false, string(gatewayv1.RouteReasonNoMatchingListenerHostname), "no hostname of the route matches a hostname of the listeners it may attach to"
	}
	return true, string(gatewayv1.RouteReasonAccepted), "accepted"
}

// routeHostnames lower-cases and checks a route's hostnames; "" with no
// hostnames means any host.
func routeHostnames(hs []gatewayv1.Hostname) (out []string, bad string) {
	if len(hs) == 0 {
		return []string{""}, ""
	}
	for _, h := range hs {
		s := strings.ToLower(string(h))
		if msg := checkHostname(s); msg != "" {
			return nil, fmt.Sprintf("hostname %q %s", truncate(s, 80), msg)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, ""
}

// intersect returns the hosts a route with hostnames routeHosts ("" for
// any) is served for on a listener with hostname lh ("" for any), as the
// specification defines: exact names equal, a wildcard covering a name
// yields the name, two wildcards yield the narrower one.
func intersect(lh string, routeHosts []string) []string {
	var out []string
	add := func(h string) {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	for _, rh := range routeHosts {
		switch {
		case lh == "":
			add(rh)
		case rh == "":
			add(lh)
		case rh == lh:
			add(rh)
		case strings.HasPrefix(lh, "*.") && strings.HasSuffix(rh, lh[1:]):
			add(rh) // a name, or a narrower wildcard, under the listener's
		case strings.HasPrefix(rh, "*.") && strings.HasSuffix(lh, rh[1:]):
			add(lh)
		}
	}
	slices.Sort(out)
	return out
}

// checkHostname returns why h (lower case, non-empty) is not a hostname the
// routing table can serve: a DNS-1123 subdomain, optionally with a "*."
// prefix, not an IP address; "" when it is fine.
func checkHostname(h string) string {
	name := strings.TrimPrefix(h, "*.")
	switch {
	case len(h) > 253:
		return "is longer than 253 characters"
	case name == "":
		return "is empty"
	case strings.Contains(name, "*"):
		return "may have a wildcard only as its first label"
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return "is an IP address"
	}
	for _, label := range strings.Split(name, ".") {
		if len(label) == 0 || len(label) > 63 {
			return "has an empty or too long label"
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			alnum := ('a' <= c && c <= 'z') || ('0' <= c && c <= '9')
			if !alnum && (c != '-' || i == 0 || i == len(label)-1) {
				return "is not a valid DNS name"
			}
		}
	}
	return ""
}

// rules returns the servable rules of a route (Host and Route unset), the
// rules left out and why, and the ResolvedRefs outcome.
func (b *builder) rules(r *gatewayv1.HTTPRoute) (out []Rule, unsupported []string, refsOK bool, refReason, refMsg string) {
	refsOK, refReason, refMsg = true, string(gatewayv1.RouteReasonResolvedRefs), "all references resolved"
	for i := range r.Spec.Rules {
		rule := &r.Spec.Rules[i]
		where := fmt.Sprintf("rules[%d]", i)
		if why := unsupportedRule(rule); why != "" {
			unsupported = append(unsupported, where+": "+why)
			continue
		}
		timeout, why := timeoutOf(rule.Timeouts)
		if why != "" {
			unsupported = append(unsupported, where+": "+why)
			continue
		}
		var paths []Rule
		var mirrorRefs []gatewayv1.BackendObjectReference
		bad := ""
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gatewayv1.HTTPRouteMatch{{}}
		}
		for j := range matches {
			m := &matches[j]
			pt, p, why := pathOf(m.Path)
			if why != "" {
				bad = fmt.Sprintf("matches[%d]: %s", j, why)
				break
			}
			cond, why := conditionsOf(m) // matches.go
			if why != "" {
				bad = fmt.Sprintf("matches[%d]: %s", j, why)
				break
			}
			filters, mirrors, why := filtersOf(rule.Filters, pt) // filters.go
			if why != "" {
				bad = why
				break
			}
			mirrorRefs = mirrors
			paths = append(paths, Rule{PathType: pt, Path: p, Conditions: cond, Filters: filters, Timeout: timeout})
		}
		if bad != "" {
			unsupported = append(unsupported, where+": "+bad)
			continue
		}
		// Backends (backends.go): one share is served alone, several by
		// weight; one that cannot be used answers 500 for its share.
		refs := make([]gatewayv1.BackendRef, len(rule.BackendRefs))
		for k := range rule.BackendRefs {
			refs[k] = rule.BackendRefs[k].BackendRef
		}
		single, shares, reason, msg := b.ruleBackends("HTTPRoute", r.Namespace, refs, where)
		if reason != "" && refsOK {
			refsOK, refReason, refMsg = false, reason, msg
		}
		mirrors, reason, msg := b.mirrorBackends("HTTPRoute", r.Namespace, mirrorRefs, where)
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

// refBackend resolves a backend reference of a route of kind fromKind in
// namespace rns, or says why it cannot be used with a ResolvedRefs reason.
func (b *builder) refBackend(fromKind string, rns string, ref gatewayv1.BackendObjectReference) (*BackendRef, string, string) {
	if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Service") {
		return nil, string(gatewayv1.RouteReasonInvalidKind), "only core Services are supported as backends"
	}
	ns := rns
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	name := string(ref.Name)
	if ns != rns && !b.granted(rns, fromKind, Group, ns, "", "Service", name) {
		return nil, string(gatewayv1.RouteReasonRefNotPermitted),
			fmt.Sprintf("Service %s/%s is in another namespace, and no ReferenceGrant there allows %ss of namespace %s to use it", truncate(ns, 64), truncate(name, 253), fromKind, rns)
	}
	if ref.Port == nil || *ref.Port < 1 || *ref.Port > 65535 {
		return nil, string(gatewayv1.RouteReasonUnsupportedValue), fmt.Sprintf("Service %s/%s: a port from 1 to 65535 is required", truncate(ns, 64), truncate(name, 253))
	}
	svc := b.services[ns+"/"+name]
	if svc == nil {
		return nil, string(gatewayv1.RouteReasonBackendNotFound), fmt.Sprintf("Service %s/%s not found", truncate(ns, 64), truncate(name, 253))
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == *ref.Port }) {
		return nil, string(gatewayv1.RouteReasonBackendNotFound), fmt.Sprintf("Service %s/%s has no port %d", ns, name, *ref.Port)
	}
	return &BackendRef{Namespace: ns, Service: name, Port: *ref.Port}, "", ""
}

// unsupportedRule says what of a rule the routing table cannot serve yet;
// "" when nothing.
func unsupportedRule(rule *gatewayv1.HTTPRouteRule) string {
	switch {
	case rule.Retry != nil:
		return "retry is not supported yet"
	case rule.SessionPersistence != nil:
		return "sessionPersistence is not supported yet"
	}
	for _, br := range rule.BackendRefs {
		if len(br.Filters) > 0 {
			return "backendRef filters are not supported yet"
		}
	}
	return ""
}

// pathOf returns the route table's form of a path match (default
// PathPrefix "/"), or why it cannot be served. A RegularExpression path
// becomes a PathRegex route anchored at both ends, as the specification
// matches the whole path (regexPath).
func pathOf(pm *gatewayv1.HTTPPathMatch) (route.PathType, string, string) {
	pt, p := route.PathPrefix, "/"
	if pm != nil {
		if pm.Value != nil {
			p = *pm.Value
		}
		if pm.Type != nil {
			switch *pm.Type {
			case gatewayv1.PathMatchExact:
				pt = route.PathExact
			case gatewayv1.PathMatchPathPrefix:
			case gatewayv1.PathMatchRegularExpression:
				return regexPath(p)
			default:
				return 0, "", fmt.Sprintf("path type %q is not supported (Exact, PathPrefix and RegularExpression are)", truncate(string(*pm.Type), 40))
			}
		}
	}
	if why := checkPath(p); why != "" {
		return 0, "", fmt.Sprintf("path %q %s", truncate(p, 80), why)
	}
	return pt, p, ""
}

// regexPath returns the PathRegex route of a RegularExpression path: an
// RE2 pattern of at most maxValuePattern bytes of printable UTF-8 that
// compiles, matched against the whole path.
func regexPath(p string) (route.PathType, string, string) {
	switch {
	case p == "":
		return 0, "", "path pattern is empty"
	case len(p) > maxValuePattern:
		return 0, "", fmt.Sprintf("path pattern is longer than %d bytes", maxValuePattern)
	case !utf8.ValidString(p) || strings.ContainsFunc(p, unicode.IsControl):
		return 0, "", fmt.Sprintf("path pattern %q has a control character or is not UTF-8", truncate(p, 80))
	}
	// p must compile alone, so that it cannot close the group ("a)|(b");
	// the table anchors the start, "$" the end.
	if _, err := route.CompilePath(p); err != nil {
		return 0, "", fmt.Sprintf("path pattern %q does not compile: %v", truncate(p, 80), err)
	}
	return route.PathRegex, "(?:" + p + ")$", ""
}

// checkPath: absolute, at most 1024 bytes, printable ASCII without '?',
// '#', "//" or dot segments (the API's validation of HTTPRoute paths).
func checkPath(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return "must begin with '/'"
	case len(p) > 1024:
		return "is longer than 1024 bytes"
	case strings.Contains(p, "//"):
		return "must not contain '//'"
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f || c == '?' || c == '#' || c == '%' && !validEscape(p, i) {
			return "has a character that is not allowed"
		}
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return "must not contain '.' or '..' segments"
		}
	}
	return ""
}

func validEscape(p string, i int) bool {
	hex := func(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
	return i+2 < len(p) && hex(p[i+1]) && hex(p[i+2])
}
