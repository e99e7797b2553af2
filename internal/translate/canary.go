package translate

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/internal/route"
)

// Canary Ingresses (issue 27): a second Ingress for a host and path that
// another Ingress routes, marked AnnotationCanary, sends part of that
// route's requests to its own Service: those with a header or a cookie,
// and a weight of the rest (ingress-nginx's canary semantics; precedence
// header > cookie > weight). It becomes the route's route.Split. A canary
// attaches only to a route of an Ingress of its own namespace, or, with
// host ownership on, of a host its namespace owns: a tenant the owner
// merely shares a host with cannot divert the owner's traffic
// (ReasonCanaryRefused). Canary Ingresses are added after every other
// Ingress, so the route they attach to exists whatever their age; their
// own TLS section is ignored, and the main route's filters apply to the
// canary's requests too.
const (
	// AnnotationCanary "true" makes the Ingress a canary.
	AnnotationCanary = "sluice.dev/canary"
	// AnnotationCanaryWeight is the share of requests (those no header or
	// cookie decided) sent to the canary, 0 to AnnotationCanaryWeightTotal.
	AnnotationCanaryWeight      = "sluice.dev/canary-weight"
	AnnotationCanaryWeightTotal = "sluice.dev/canary-weight-total"
	// AnnotationCanaryByHeader names a request header: value "always"
	// sends the request to the canary, "never" to the main backend, any
	// other falls through to the cookie and the weight. With
	// AnnotationCanaryByHeaderValue, only that exact value means always.
	AnnotationCanaryByHeader      = "sluice.dev/canary-by-header"
	AnnotationCanaryByHeaderValue = "sluice.dev/canary-by-header-value"
	// AnnotationCanaryByCookie names a cookie with the same "always" and
	// "never" values.
	AnnotationCanaryByCookie = "sluice.dev/canary-by-cookie"
	// AnnotationCanarySticky "true" pins a client to its weighted choice
	// with a cookie (sluice-canary-<hash of host and path>) while the
	// chosen side's weight is above 0.
	AnnotationCanarySticky = "sluice.dev/canary-sticky"
)

// Reasons of canary problems.
const (
	// ReasonCanaryRefused: the canary's route belongs to another
	// namespace's Ingress on a host its namespace does not own.
	ReasonCanaryRefused = "CanaryRefused"
	// ReasonCanaryWithoutMain: no Ingress routes the canary's host and
	// path.
	ReasonCanaryWithoutMain = "CanaryWithoutMain"
)

// canaryAnnotations are the parsed canary annotations of one Ingress.
type canaryAnnotations struct {
	weightSet     bool
	weight, total uint32
	header, value string // value "" means always/never
	cookie        string
	sticky        bool
}

// isCanary reports whether ann marks a canary Ingress ("true").
func isCanary(ann map[string]string) bool {
	v, _ := parseBool(ann[AnnotationCanary])
	return v
}

// parseCanary reads the canary annotations of a canary Ingress.
func parseCanary(ann map[string]string) (canaryAnnotations, []annotationError) {
	c := canaryAnnotations{total: 100}
	var errs []annotationError
	fail := func(key, msg string) { errs = append(errs, annotationError{key, msg}) }
	if v, ok := ann[AnnotationCanaryWeightTotal]; ok {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 1 || n > 1_000_000 {
			fail(AnnotationCanaryWeightTotal, "must be an integer from 1 to 1000000; using 100")
		} else {
			c.total = uint32(n)
		}
	}
	if v, ok := ann[AnnotationCanaryWeight]; ok {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil || n > uint64(c.total) {
			fail(AnnotationCanaryWeight, "must be an integer from 0 to the weight total (100 unless "+AnnotationCanaryWeightTotal+"); using 0")
		} else {
			c.weight = uint32(n)
		}
		c.weightSet = true
	}
	if v, ok := ann[AnnotationCanaryByHeader]; ok {
		h, valid := parseToken(v)
		if !valid {
			fail(AnnotationCanaryByHeader, "must be an HTTP header name; no header decides")
		} else {
			c.header = http.CanonicalHeaderKey(h)
		}
	}
	if v, ok := ann[AnnotationCanaryByHeaderValue]; ok {
		v = strings.TrimSpace(v)
		switch {
		case c.header == "":
			fail(AnnotationCanaryByHeaderValue, "has no effect without a valid "+AnnotationCanaryByHeader)
		case v == "" || len(v) > maxL7Value || !isPrint(v):
			fail(AnnotationCanaryByHeaderValue, "must be a non-empty printable value; the header decides with always/never")
		default:
			c.value = v
		}
	}
	if v, ok := ann[AnnotationCanaryByCookie]; ok {
		name, valid := parseToken(v)
		if !valid {
			fail(AnnotationCanaryByCookie, "must be a cookie name (token characters); no cookie decides")
		} else {
			c.cookie = name
		}
	}
	if v, ok := ann[AnnotationCanarySticky]; ok {
		b, valid := parseBool(v)
		if !valid {
			fail(AnnotationCanarySticky, `must be "true" or "false"; not sticky`)
		}
		c.sticky = b
	}
	return c, errs
}

// isPrint reports printable ASCII (space included).
func isPrint(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// addIngresses adds the served Ingresses in precedence order, canaries
// last.
func (b *builder) addIngresses(ings []*networkingv1.Ingress) {
	var canaries []*networkingv1.Ingress
	for _, ing := range ings {
		if ann, _ := b.annotations(ing); isCanary(ann) {
			canaries = append(canaries, ing)
			continue
		}
		b.addIngress(ing)
	}
	for _, ing := range canaries {
		b.addCanary(ing)
	}
}

// addCanary attaches a canary Ingress's backends to the routes of its
// hosts and paths.
func (b *builder) addCanary(ing *networkingv1.Ingress) {
	id := ing.Namespace + "/" + ing.Name
	b.cur = id
	ann, nginxErrs := b.annotations(ing)
	b.reportNginx(ing, nginxErrs)
	c, errs := parseCanary(ann)
	pol, polErrs := parsePolicy(ann)
	ua, upErrs := parseUpstream(ann)
	errs = append(append(errs, polErrs...), upErrs...)
	for _, e := range errs {
		b.problem(ing, "InvalidAnnotation", "annotation "+e.key+": "+e.msg)
	}
	if ing.Spec.DefaultBackend != nil {
		b.problem(ing, "InvalidCanary", "spec.defaultBackend: a canary Ingress splits the routes of its rules only; ignored")
	}
	attached := false
	for i := range ing.Spec.Rules {
		rule := &ing.Spec.Rules[i]
		host, msg := checkHost(rule.Host)
		if msg != "" {
			b.problem(ing, "InvalidHost", fmt.Sprintf("spec.rules[%d]: host %q %s; rule skipped", i, host, msg))
			continue
		}
		if host != "" && !b.own.Serves(ing.Namespace, host) {
			b.problem(ing, ReasonHostOwnedElsewhere, fmt.Sprintf("host %s is owned by another namespace (the namespace of its oldest Ingress), which does not share it with this one; the canary is not attached", host))
			continue
		}
		if rule.HTTP == nil {
			continue
		}
		for j := range rule.HTTP.Paths {
			where := fmt.Sprintf("spec.rules[%d].http.paths[%d]", i, j)
			if b.attachCanary(ing, id, host, &rule.HTTP.Paths[j], where, c, pol, ua) {
				attached = true
			}
		}
	}
	if !attached && !b.alone {
		// Translated alone (the controller's status check), the main
		// route is out of view: only the full translation knows.
		b.problem(ing, ReasonNotServed, "no path of this canary Ingress is attached to a route (see its other problems); its status is not written")
	}
}

func (b *builder) attachCanary(ing *networkingv1.Ingress, id, host string, p *networkingv1.HTTPIngressPath, where string,
	c canaryAnnotations, pol route.Policy, ua upstreamAnnotations) bool {
	pt, path, msg := checkPath(p)
	if msg != "" {
		b.problem(ing, "InvalidPath", where+": "+msg+"; skipped")
		return false
	}
	vh := b.vhosts[host]
	var rt *route.Route
	owner := ""
	if vh != nil {
		// The main route may be a regex path (use-regex), nginx's
		// case-insensitive form included.
		for _, k := range []string{matchKey(pt, path), matchKey(route.PathRegex, path), matchKey(route.PathRegex, "(?i)"+path)} {
			if o, ok := vh.owners[k]; ok {
				owner = o
				for i := range vh.routes {
					if matchKey(vh.routes[i].PathType, vh.routes[i].Path) == k {
						rt = &vh.routes[i]
					}
				}
				break
			}
		}
	}
	if rt == nil || strings.HasPrefix(owner, "default:") {
		b.problem(ing, ReasonCanaryWithoutMain, fmt.Sprintf("%s: no Ingress routes host %s %s %s; the canary is not attached", where, hostLabel(host), pt, path))
		return false
	}
	ownerNS, _, _ := strings.Cut(owner, "/")
	if ownerNS != ing.Namespace && !(b.own != nil && b.own.on && host != "" && b.own.Owns(ing.Namespace, host)) {
		b.problem(ing, ReasonCanaryRefused, fmt.Sprintf("%s: host %s %s %s is routed by an Ingress of another namespace on a host this namespace does not own; a canary attaches only to its own namespace's routes; not attached", where, hostLabel(host), pt, path))
		return false
	}
	if rt.Split != nil {
		b.problem(ing, "Conflict", fmt.Sprintf("%s: host %s %s %s already has a canary (older, or first by namespace/name); not attached", where, hostLabel(host), pt, path))
		return false
	}
	be := b.backendFor(ing, &p.Backend, pol, ua, where)
	if be == nil {
		return false
	}
	s := &route.Split{}
	if c.header != "" {
		if c.value != "" {
			s.Conditional = append(s.Conditional, route.ConditionalBackend{Match: route.RequestMatch{Header: c.header, Value: c.value}, Backend: be, Ingress: id})
		} else {
			s.Conditional = append(s.Conditional,
				route.ConditionalBackend{Match: route.RequestMatch{Header: c.header, Value: "always"}, Backend: be, Ingress: id},
				route.ConditionalBackend{Match: route.RequestMatch{Header: c.header, Value: "never"}, Backend: rt.Backend, Ingress: rt.Ingress})
		}
	}
	if c.cookie != "" {
		s.Conditional = append(s.Conditional,
			route.ConditionalBackend{Match: route.RequestMatch{Cookie: c.cookie, Value: "always"}, Backend: be, Ingress: id},
			route.ConditionalBackend{Match: route.RequestMatch{Cookie: c.cookie, Value: "never"}, Backend: rt.Backend, Ingress: rt.Ingress})
	}
	if c.weightSet {
		s.Weighted = []route.WeightedBackend{
			{Backend: rt.Backend, Weight: c.total - c.weight, Ingress: rt.Ingress},
			{Backend: be, Weight: c.weight, Ingress: id},
		}
		if c.sticky {
			h := fnv.New32a()
			h.Write([]byte(host + " " + rt.Path))
			s.StickyCookie = fmt.Sprintf("sluice-canary-%08x", h.Sum32())
		}
	}
	if len(s.Conditional) == 0 && len(s.Weighted) == 0 {
		b.problem(ing, "InvalidCanary", where+": the canary has no weight, header or cookie; it gets no requests")
	}
	rt.Split = s
	return true
}
