package translate

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/internal/problem"
	"sluice.dev/sluice/internal/route"
)

// DefaultIngressClass is the IngressClass name served when
// Options.IngressClass is empty.
const DefaultIngressClass = "sluice"

// Build translates the Ingresses of our class into a route.Config. It never
// fails as a whole: whatever cannot be served is left out and reported as a
// Problem, sorted. The result does not depend on the order of the objects in
// in. Build does not modify in; the Config shares nothing mutable with it.
func Build(in Input, opts Options) (route.Config, []Problem) {
	return BuildCached(in, opts, nil)
}

// BuildCached is Build with parsed TLS Secrets taken from, and kept in,
// cache (nil for none): a rebuild parses only the Secrets that changed. The
// result is the same as Build's. The parsed certificates are shared between
// the Configs of successive builds; nothing modifies them.
func BuildCached(in Input, opts Options, cache *KeyPairCache) (route.Config, []Problem) {
	opts = opts.withDefaults()
	b := newBuilder(in, opts)
	cfg := b.build(in, cache)
	return cfg, sortProblems(b.problems)
}

// build translates the Ingresses of in with the lookup maps of b. A partial
// builder (incremental.go) leaves the default certificate out and keeps the
// cache's entries that it did not look up.
func (b *builder) build(in Input, cache *KeyPairCache) route.Config {
	opts := b.opts
	b.cache = cache
	if cache != nil && !b.partial {
		defer cache.sweep()
	}

	filter := NewClassFilter(in.IngressClasses, opts)
	ings := make([]*networkingv1.Ingress, 0, len(in.Ingresses))
	for _, ing := range in.Ingresses {
		if ing != nil && filter.Serves(ing) {
			ings = append(ings, ing)
		}
	}
	slices.SortFunc(ings, olderFirst)
	gw := b.gatewayRules(in) // nil without opts.Gateway
	b.gw = gw
	b.own = in.Ownership
	b.alone = in.Ownership != nil
	if b.own == nil {
		b.own = hostOwnership(in, opts, gw) // hostowner.go
	}
	b.classes = filter
	b.addIngresses(ings) // canaries last (canary.go)
	b.cur = ""
	b.addHostDefaults()
	if gw != nil {
		b.addGateway(gw)
	}

	b.nameBackends()
	cfg := route.Config{
		VirtualHosts:          b.virtualHosts(),
		DefaultBackend:        b.defaultBackend,
		Certificates:          b.certificates(),
		Owners:                b.own.owners(),
		NoWildcardCertificate: b.noWildcard(),
	}
	if !b.partial {
		cfg.DefaultCertificate = b.defaultCertificate()
		if gw != nil {
			cfg.Scopes, cfg.ScopedPorts = b.gatewayScopes(gw, cfg.DefaultCertificate) // scope.go
		}
	}
	return cfg
}

// builder holds the state of one Build call.
type builder struct {
	opts     Options
	services map[string]*corev1.Service              // namespace/name
	slices   map[string][]*discoveryv1.EndpointSlice // namespace/service
	pods     PodAddresses                            // Input.Pods; nil: not watched
	secrets  map[string]*corev1.Secret               // namespace/name
	resolved map[serviceKey]resolved                 // Service ports looked up
	backends map[backendKey]*route.Backend           // shared backends
	variants map[serviceKey]int                      // policies per Service port
	keyPairs map[string]keyPair                      // parsed Secrets
	cache    *KeyPairCache                           // parsed Secrets of earlier builds; nil for none
	sni      map[string]sniOwner                     // TLS host → owner
	certs    map[string][]string                     // Secret → claimed hosts
	certOf   map[string]*tls.Certificate             // Secret → key pair
	vhosts   map[string]*vhostRoutes                 // host → routes
	tlsHosts map[string]string                       // hosts the owner's spec.tls entries name → its namespace
	own      *Ownership                              // who owns each host
	classes  ClassFilter                             // the served classes; which are ingress-nginx's
	alone    bool                                    // Input.Ownership set: one Ingress translated alone
	hostDefs []hostDefault                           // tenants' default backends, for their own hosts
	problems []Problem
	// policiesOf are the request policies of each Ingress that sets any,
	// by namespace/name (policy.go).
	policiesOf map[string]*route.Policies

	defaultBackend *route.Backend
	defaultOwner   string

	// partial: only some Ingresses are translated, into a table spliced
	// with an earlier one (incremental.go).
	partial bool
	// deps, when not nil, receives the Services ("s:namespace/name") and
	// Secrets ("k:namespace/name") each Ingress looks up, by its
	// namespace/name (cur: the Ingress being added).
	deps map[string][]string
	cur  string
	gw   *gatewayResult // the Gateway API translation of this build; nil without
	// gatewayDefault is the certificate of the first Gateway listener
	// without a hostname: the default certificate when Options has none.
	gatewayDefault *route.Certificate
}

// vhostRoutes collects one host's routes and which Ingress owns each match.
type vhostRoutes struct {
	routes []route.Route
	owners map[string]string // matchKey → Ingress namespace/name
	// anyDepth: an HTTPRoute serves this wildcard host, which then matches
	// names of any depth below it (route.VirtualHost.AnyDepth).
	anyDepth bool
}

func newBuilder(in Input, opts Options) *builder {
	b := &builder{
		opts:     opts,
		pods:     in.Pods,
		services: make(map[string]*corev1.Service, len(in.Services)),
		slices:   make(map[string][]*discoveryv1.EndpointSlice, len(in.EndpointSlices)),
		secrets:  make(map[string]*corev1.Secret, len(in.Secrets)),
		resolved: make(map[serviceKey]resolved, len(in.Services)),
		backends: make(map[backendKey]*route.Backend, len(in.Services)),
		variants: make(map[serviceKey]int, len(in.Services)),
		keyPairs: make(map[string]keyPair),
		sni:      make(map[string]sniOwner),
		certs:    make(map[string][]string),
		certOf:   make(map[string]*tls.Certificate),
		vhosts:   make(map[string]*vhostRoutes, len(in.Ingresses)),
		tlsHosts: make(map[string]string),
	}
	for _, s := range in.Services {
		if s != nil {
			b.services[s.Namespace+"/"+s.Name] = s
		}
	}
	for _, s := range in.EndpointSlices {
		if s == nil {
			continue
		}
		if svc := s.Labels[discoveryv1.LabelServiceName]; svc != "" {
			k := s.Namespace + "/" + svc
			b.slices[k] = append(b.slices[k], s)
		}
	}
	for _, s := range in.Secrets {
		if s != nil {
			b.secrets[s.Namespace+"/"+s.Name] = s
		}
	}
	return b
}

// olderFirst orders Ingresses by precedence: the oldest creationTimestamp,
// then namespace, then name.
func olderFirst(a, b *networkingv1.Ingress) int {
	return cmp.Or(
		a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Name, b.Name),
	)
}

func (b *builder) problem(ing *networkingv1.Ingress, reason, message string) {
	b.problems = append(b.problems, Problem{
		Kind: "Ingress", Namespace: ing.Namespace, Name: ing.Name, Reason: reason, Message: message,
	})
}

// addIngress adds one served Ingress. Ingresses arrive in precedence order,
// so whatever an earlier one claimed (a host and path, the default backend,
// an SNI name) stays with it.
func (b *builder) addIngress(ing *networkingv1.Ingress) {
	id := ing.Namespace + "/" + ing.Name
	b.cur = id
	ann, nginxRes := b.annotations(ing) // nginx.go
	b.reportNginx(ing, nginxRes)
	pol, errs := parsePolicy(ann)
	hp, httpsErrs := parseHTTPS(ann, b.opts.SSLRedirect)
	ua, upErrs := parseUpstream(ann)
	_, shareErrs := parseShareHostWith(ann)
	l7, l7Errs := parseL7(ann, nginxRes != nil) // rewrite.go
	errs = append(append(append(append(errs, httpsErrs...), upErrs...), shareErrs...), l7Errs...)
	for _, e := range errs {
		b.problem(ing, "InvalidAnnotation", "annotation "+e.key+": "+e.msg)
	}
	b.policies(ing, id)

	served := false
	var ownDefault *route.Backend // a tenant's default backend, for its own hosts
	if db := ing.Spec.DefaultBackend; db != nil {
		if be := b.backendFor(ing, db, pol, ua, "spec.defaultBackend"); be != nil {
			switch {
			case !b.opts.defaultBackendFrom(ing.Namespace):
				ownDefault = be
			case b.defaultBackend == nil:
				b.defaultBackend, b.defaultOwner = be, id
				served = true
			case b.defaultBackend == be:
				served = true
			default:
				b.problem(ing, "Conflict", "spec.defaultBackend: the default backend is already set by Ingress "+
					b.defaultOwner+", which takes precedence (older, or first by namespace/name); ignored")
			}
		}
	}

	var ruleHosts []string
	for i := range ing.Spec.Rules {
		rule := &ing.Spec.Rules[i]
		host, msg := checkHost(rule.Host)
		if msg != "" {
			b.problem(ing, "InvalidHost", fmt.Sprintf("spec.rules[%d]: host %q %s; rule skipped", i, host, msg))
			continue
		}
		if host == "" && !b.opts.defaultBackendFrom(ing.Namespace) {
			b.problem(ing, ReasonDefaultBackendRefused, fmt.Sprintf("spec.rules[%d]: a rule without a host would serve every host that has no rules of its own; only the platform's namespaces (--default-backend-namespaces) may do that; rule skipped", i))
			continue
		}
		if host != "" && !b.own.Serves(ing.Namespace, host) {
			b.problem(ing, ReasonHostOwnedElsewhere, fmt.Sprintf("host %s is owned by another namespace (the namespace of its oldest Ingress), which does not share it with this one; its rules, certificate and DNS record are not served from this Ingress", host))
			continue
		}
		if host != "" && !slices.Contains(ruleHosts, host) {
			ruleHosts = append(ruleHosts, host)
		}
		if rule.HTTP == nil {
			continue
		}
		for j := range rule.HTTP.Paths {
			if b.addPath(ing, id, host, &rule.HTTP.Paths[j], fmt.Sprintf("spec.rules[%d].http.paths[%d]", i, j), pol, hp, ua, &l7) {
				served = true
			}
		}
	}
	b.addAppRoot(ing, id, ruleHosts, &l7, hp) // rewrite_routes.go
	if b.addTLS(ing, ruleHosts) {
		served = true
	}
	if ownDefault != nil {
		// Its own hosts: owned, not merely shared with it (a sharee's
		// default backend must not take the owner's unmatched paths).
		var owned []string
		for _, h := range ruleHosts {
			if b.own.Owns(ing.Namespace, h) {
				owned = append(owned, h)
			}
		}
		if len(owned) == 0 {
			b.problem(ing, ReasonDefaultBackendRefused, "spec.defaultBackend: without hosts of its own it would be the default for every host; only the platform's namespaces (--default-backend-namespaces) may set that; ignored")
		} else {
			b.problem(ing, ReasonDefaultBackendRefused, "spec.defaultBackend: serves the unmatched paths of this Ingress's own hosts only; as the default for other hosts it is refused (only the platform's namespaces, --default-backend-namespaces, set that)")
			b.hostDefs = append(b.hostDefs, hostDefault{ing: ing, hosts: owned, backend: ownDefault, https: hp})
			served = true
		}
	}
	if !served {
		b.problem(ing, ReasonNotServed, "no rule, default backend or certificate of this Ingress is served (see its other problems); its status is not written")
	}
}

func (b *builder) addPath(ing *networkingv1.Ingress, id, host string, p *networkingv1.HTTPIngressPath, where string, pol route.Policy, hp httpsPolicy, ua upstreamAnnotations, l7 *l7Annotations) (added bool) {
	pt, path, msg := checkPath(p)
	if msg == "" {
		pt, path, msg = l7.routePath(pt, path) // rewrite_routes.go: regex paths
	}
	if msg != "" {
		b.problem(ing, "InvalidPath", where+": "+msg+"; skipped")
		return false
	}
	vh := b.vhosts[host]
	if vh == nil {
		vh = &vhostRoutes{owners: make(map[string]string)}
		b.vhosts[host] = vh
	}
	mk := matchKey(pt, path)
	if owner, taken := vh.owners[mk]; taken {
		if owner == id {
			b.problem(ing, "Conflict", fmt.Sprintf("%s: host %s %s %s repeats an earlier path of this Ingress; skipped", where, hostLabel(host), pt, path))
		} else {
			b.problem(ing, "Conflict", fmt.Sprintf("%s: host %s %s %s is already routed by Ingress %s, which takes precedence (older, or first by namespace/name); skipped", where, hostLabel(host), pt, path, owner))
		}
		return false
	}
	be := b.backendFor(ing, &p.Backend, pol, ua, where)
	if be == nil {
		return false
	}
	vh.owners[mk] = id
	// SSLRedirect is what the Ingress wants; virtualHosts keeps it only
	// for hosts with TLS, known once every Ingress is added.
	vh.routes = append(vh.routes, route.Route{PathType: pt, Path: path, Backend: be, Ingress: id,
		SSLRedirect: hp.redirect, HSTS: hp.hsts, Filters: l7.filters(pt, path), Policies: b.policiesOf[id]})
	return true
}

func hostLabel(h string) string {
	if h == "" {
		return "*"
	}
	return h
}

// hostDefault is a tenant Ingress's spec.defaultBackend, served for the
// unmatched paths of its own hosts.
type hostDefault struct {
	ing     *networkingv1.Ingress
	hosts   []string
	backend *route.Backend
	https   httpsPolicy
}

// addHostDefaults adds the tenants' default backends as a Prefix "/" route
// of each of their own hosts that has none, after every Ingress's rules so
// that any rule wins over them. Older Ingresses come first.
func (b *builder) addHostDefaults() {
	for _, d := range b.hostDefs {
		id := d.ing.Namespace + "/" + d.ing.Name
		for _, h := range d.hosts {
			vh := b.vhosts[h]
			if vh == nil {
				vh = &vhostRoutes{owners: make(map[string]string)}
				b.vhosts[h] = vh
			}
			mk := matchKey(route.PathPrefix, "/")
			if owner, taken := vh.owners[mk]; taken {
				if owner != id && strings.HasPrefix(owner, "default:") {
					b.problem(d.ing, "Conflict", fmt.Sprintf("spec.defaultBackend: host %s already has the default backend of Ingress %s, which takes precedence (older, or first by namespace/name); ignored there", h, strings.TrimPrefix(owner, "default:")))
				}
				continue // a rule of the host serves every path
			}
			vh.owners[mk] = "default:" + id
			vh.routes = append(vh.routes, route.Route{PathType: route.PathPrefix, Path: "/", Backend: d.backend, Ingress: id,
				SSLRedirect: d.https.redirect, HSTS: d.https.hsts, Policies: b.policiesOf[id]})
		}
	}
}

// virtualHosts returns the hosts that have routes, sorted by host, each with
// its routes sorted by path type and path. Routes of hosts without TLS of
// their owner lose their SSLRedirect.
func (b *builder) virtualHosts() []route.VirtualHost {
	out := make([]route.VirtualHost, 0, len(b.vhosts))
	for host, vh := range b.vhosts {
		if len(vh.routes) == 0 {
			continue
		}
		if !b.coveredByTLS(host) {
			for i := range vh.routes {
				vh.routes[i].SSLRedirect = false
			}
		}
		// Stable: the routes of one path with route.Conditions are tried
		// in the order translation added them (the spec's precedence).
		slices.SortStableFunc(vh.routes, func(x, y route.Route) int {
			return cmp.Or(cmp.Compare(x.PathType, y.PathType), strings.Compare(x.Path, y.Path))
		})
		out = append(out, route.VirtualHost{Host: host, Routes: vh.routes, AnyDepth: vh.anyDepth})
	}
	slices.SortFunc(out, func(x, y route.VirtualHost) int { return strings.Compare(x.Host, y.Host) })
	return out
}

// sortProblems sorts and removes duplicates (an Ingress that names a missing
// Service twice gets one Problem).
func sortProblems(ps []Problem) []Problem {
	slices.SortFunc(ps, problem.Compare)
	return slices.Compact(ps)
}

// ReasonNotServed is the Problem of an Ingress none of whose rules, default
// backend or spec.tls certificates made it into the routing table.
const ReasonNotServed = "NotServed"

// Fatal reports whether problems (from Build) say that nothing of the
// Ingress namespace/name is served. Such an Ingress gets no status: a
// load balancer address there would claim it works.
func Fatal(problems []Problem, namespace, name string) bool {
	for _, p := range problems {
		if p.Kind == "Ingress" && p.Namespace == namespace && p.Name == name && p.Reason == ReasonNotServed {
			return true
		}
	}
	return false
}
