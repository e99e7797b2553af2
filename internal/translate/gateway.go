package translate

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/route"
)

// GatewayInput holds the Gateway API objects (and the Namespaces their
// listeners select routes by) beside the Ingresses of an Input.
type GatewayInput struct {
	GatewayClasses  []*gatewayv1.GatewayClass
	Gateways        []*gatewayv1.Gateway
	HTTPRoutes      []*gatewayv1.HTTPRoute
	ReferenceGrants []*gatewayv1.ReferenceGrant
	Namespaces      []*corev1.Namespace
}

// GatewayRouteID is the route.Route Ingress field of a route that comes
// from an HTTPRoute: "HTTPRoute:namespace/name".
func GatewayRouteID(nsName string) string { return "HTTPRoute:" + nsName }

// gatewayResult is the Gateway API translation of one build and the
// HTTPRoutes it came from.
type gatewayResult struct {
	res    gateway.Result
	routes map[string]*gatewayv1.HTTPRoute // namespace/name
}

// gatewayRules translates the Gateway API objects (internal/gateway); nil
// without Options.Gateway.
func (b *builder) gatewayRules(in Input) *gatewayResult {
	if b.opts.Gateway == nil {
		return nil
	}
	opts := *b.opts.Gateway
	opts.SecretsUnread = opts.SecretsUnread || b.opts.SecretsUnread
	g := &gatewayResult{routes: map[string]*gatewayv1.HTTPRoute{}}
	g.res = gateway.Build(gateway.Input{
		GatewayClasses:  in.Gateway.GatewayClasses,
		Gateways:        in.Gateway.Gateways,
		HTTPRoutes:      in.Gateway.HTTPRoutes,
		ReferenceGrants: in.Gateway.ReferenceGrants,
		Namespaces:      in.Gateway.Namespaces,
		Services:        in.Services,
		Secrets:         in.Secrets,
	}, opts)
	for _, r := range in.Gateway.HTTPRoutes {
		if r != nil {
			g.routes[r.Namespace+"/"+r.Name] = r
		}
	}
	return g
}

// claims are the hosts the attached HTTPRoutes serve, as Ingress-shaped
// claims for NewOwnership: a host belongs to the namespace of its oldest
// Ingress or attached route, so an Ingress of another namespace cannot
// take a route's host (nor a route an Ingress's). Nil-safe.
func (g *gatewayResult) claims() []*networkingv1.Ingress {
	if g == nil {
		return nil
	}
	byRoute := map[string]*networkingv1.Ingress{}
	var out []*networkingv1.Ingress
	for _, r := range g.res.Rules {
		src := g.routes[r.Route]
		if r.Host == "" || src == nil {
			continue
		}
		c := byRoute[r.Route]
		if c == nil {
			c = &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: src.Name, CreationTimestamp: src.CreationTimestamp}}
			byRoute[r.Route] = c
			out = append(out, c)
		}
		c.Spec.Rules = append(c.Spec.Rules, networkingv1.IngressRule{Host: r.Host})
	}
	return out
}

// addGateway adds the Gateway API rules and listener certificates after
// every Ingress: a host and path or a TLS host name an Ingress claimed
// stays with it, and a host owned by another namespace is not served from
// an HTTPRoute (tenancy is the same for both APIs).
func (b *builder) addGateway(g *gatewayResult) {
	b.problems = append(b.problems, g.res.Problems...)
	unresolved := map[string]*route.Backend{}
	for _, r := range g.res.Rules {
		b.addGatewayRule(r, unresolved)
	}
	for _, c := range g.res.Certificates {
		b.addGatewayCertificate(c)
	}
}

func (b *builder) routeProblem(nsName, reason, msg string) {
	ns, name, _ := strings.Cut(nsName, "/")
	b.problems = append(b.problems, Problem{Kind: "HTTPRoute", Namespace: ns, Name: name, Reason: reason, Message: msg})
}

func (b *builder) addGatewayRule(r gateway.Rule, unresolved map[string]*route.Backend) {
	ns, _, _ := strings.Cut(r.Route, "/")
	if r.Host != "" && !b.own.Serves(ns, r.Host) {
		b.routeProblem(r.Route, ReasonHostOwnedElsewhere, fmt.Sprintf("host %s is owned by another namespace (the namespace of its oldest Ingress or attached HTTPRoute), which does not share it with this one; not served from this HTTPRoute", r.Host))
		return
	}
	vh := b.vhosts[r.Host]
	if vh == nil {
		vh = &vhostRoutes{owners: make(map[string]string)}
		b.vhosts[r.Host] = vh
	}
	id := GatewayRouteID(r.Route)
	mk := matchKey(r.PathType, r.Path)
	if owner, taken := vh.owners[mk]; taken {
		if owner != id {
			b.routeProblem(r.Route, "Conflict", fmt.Sprintf("host %s %s %s is already routed by %s, which takes precedence (an Ingress, or an older route); skipped", hostLabel(r.Host), r.PathType, r.Path, owner))
		}
		return
	}
	var be *route.Backend
	if r.Backend == nil {
		// Claimed without endpoints: 500, never another route's backend.
		be = unresolved[r.Route]
		if be == nil {
			_, name, _ := strings.Cut(r.Route, "/")
			be = &route.Backend{Name: ns + "/HTTPRoute:" + name + ":unresolved", Namespace: ns, Service: "HTTPRoute:" + name, Port: "unresolved",
				Policy: route.Policy{Retries: -1}, Unresolved: true}
			unresolved[r.Route] = be
		}
	} else {
		be = b.gatewayBackend(r)
	}
	vh.owners[mk] = id
	vh.anyDepth = vh.anyDepth || strings.HasPrefix(r.Host, "*.") // Gateway API wildcards match any depth
	vh.routes = append(vh.routes, route.Route{PathType: r.PathType, Path: r.Path, Backend: be, Ingress: id, SSLRedirect: r.HTTPSOnly})
}

// gatewayBackend returns the shared Backend of a Service port an HTTPRoute
// names, with the default policy and the protocol of its appProtocol.
func (b *builder) gatewayBackend(r gateway.Rule) *route.Backend {
	key := serviceKey{namespace: r.Backend.Namespace, service: r.Backend.Service, port: strconv.Itoa(int(r.Backend.Port))}
	res, ok := b.resolved[key]
	if !ok {
		res = b.resolve(key)
		b.resolved[key] = res
	}
	if res.reason != "" {
		b.routeProblem(r.Route, res.reason, res.message)
	}
	if res.refused != "" {
		b.routeProblem(r.Route, ReasonEndpointsRefused, res.refused)
	}
	proto := protocolOf(res.appProtocol)
	if proto.TLS() {
		// Upstream TLS needs BackendTLSPolicy, not supported yet.
		proto = route.ProtocolHTTP
	}
	pol, _ := parsePolicy(nil) // the default, as an Ingress without annotations
	bk := backendKey{svc: key, pol: keyOf(pol), up: upstreamKey{protocol: proto}}
	if be := b.backends[bk]; be != nil {
		return be
	}
	be := &route.Backend{
		Name:             key.namespace + "/" + key.service + ":" + key.port,
		Namespace:        key.namespace,
		Service:          key.service,
		Port:             key.port,
		Endpoints:        res.endpoints,
		Policy:           pol,
		Protocol:         proto,
		RefusedEndpoints: res.refusedCount,
	}
	b.backends[bk] = be
	b.variants[key]++
	return be
}

// addGatewayCertificate claims a listener certificate's host names that no
// Ingress claimed.
func (b *builder) addGatewayCertificate(c gateway.Certificate) {
	ns, name, _ := strings.Cut(c.Secret, "/")
	gns, gname, _ := strings.Cut(c.Gateway, "/")
	kp := b.keyPair(ns, name)
	if kp.reason != "" && !b.opts.SecretsUnread {
		b.problems = append(b.problems, Problem{Kind: "Gateway", Namespace: gns, Name: gname, Reason: kp.reason,
			Message: "certificate " + c.Secret + ": " + kp.message + "; its hosts get the default certificate"})
	}
	if c.AnyHost && kp.cert != nil && b.gatewayDefault == nil {
		// A listener without a hostname serves every server name.
		b.gatewayDefault = &route.Certificate{Source: c.Secret, Cert: kp.cert}
	}
	for _, h := range c.Hosts {
		if owner, taken := b.sni[h]; taken {
			if owner.source != c.Secret {
				b.problems = append(b.problems, Problem{Kind: "Gateway", Namespace: gns, Name: gname, Reason: "Conflict",
					Message: fmt.Sprintf("TLS for host %s is already claimed with secret %s by %s, which takes precedence; skipped", h, owner.source, owner.ingress)})
			}
			continue
		}
		if !b.own.Serves(gns, h) {
			continue // an Ingress namespace owns the name: its certificate, not the Gateway's
		}
		b.sni[h] = sniOwner{ingress: "Gateway " + c.Gateway, source: c.Secret}
		b.tlsHosts[h] = gns
		if kp.cert != nil {
			b.certs[c.Secret] = append(b.certs[c.Secret], h)
			b.certOf[c.Secret] = kp.cert
		}
	}
}
