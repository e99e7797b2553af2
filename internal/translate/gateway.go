package translate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

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
	GRPCRoutes      []*gatewayv1.GRPCRoute
	ReferenceGrants []*gatewayv1.ReferenceGrant
	Namespaces      []*corev1.Namespace
	// BackendTLSPolicies and the ConfigMaps their caCertificateRefs name
	// (only "ca.crt" is read); nil when the CRD is not served.
	BackendTLSPolicies []*gatewayv1.BackendTLSPolicy
	ConfigMaps         []*corev1.ConfigMap
}

// GatewayRouteID is the route.Route Ingress field of a route that comes
// from an HTTPRoute: "HTTPRoute:namespace/name".
func GatewayRouteID(nsName string) string { return "HTTPRoute:" + nsName }

// gatewayResult is the Gateway API translation of one build and the
// HTTPRoutes it came from.
type gatewayResult struct {
	res    gateway.Result
	routes map[string]metav1.ObjectMeta // routeKey: namespace/name, or GRPCRoute:namespace/name
}

// gatewayRules translates the Gateway API objects (internal/gateway); nil
// without Options.Gateway.
func (b *builder) gatewayRules(in Input) *gatewayResult { return buildGateway(in, b.opts) }

// buildGateway is gatewayRules for options o.
func buildGateway(in Input, o Options) *gatewayResult {
	if o.Gateway == nil {
		return nil
	}
	opts := *o.Gateway
	opts.SecretsUnread = opts.SecretsUnread || o.SecretsUnread
	g := &gatewayResult{routes: map[string]metav1.ObjectMeta{}}
	g.res = gateway.Build(gateway.Input{
		GatewayClasses:  in.Gateway.GatewayClasses,
		Gateways:        in.Gateway.Gateways,
		HTTPRoutes:      in.Gateway.HTTPRoutes,
		GRPCRoutes:      in.Gateway.GRPCRoutes,
		ReferenceGrants: in.Gateway.ReferenceGrants,
		Namespaces:      in.Gateway.Namespaces,
		Services:        in.Services,
		Secrets:         in.Secrets,

		BackendTLSPolicies: in.Gateway.BackendTLSPolicies,
		ConfigMaps:         in.Gateway.ConfigMaps,
	}, opts)
	for _, r := range in.Gateway.HTTPRoutes {
		if r != nil {
			g.routes[r.Namespace+"/"+r.Name] = r.ObjectMeta
		}
	}
	for _, r := range in.Gateway.GRPCRoutes {
		if r != nil {
			g.routes[grpcPrefix+r.Namespace+"/"+r.Name] = r.ObjectMeta
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
		key := routeKey(r)
		src, ok := g.routes[key]
		if r.Host == "" || !ok {
			continue
		}
		c := byRoute[key]
		if c == nil {
			c = &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: src.Name, CreationTimestamp: src.CreationTimestamp}}
			byRoute[key] = c
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
	b.addGatewayScope(g, "", 0)
}

// addGatewayScope adds the rules and certificates of one scope: scope ""
// for those of the Gateways sharing the table, else those of the Gateway
// holding that address; port 0 for the main ports, else an extra listener
// port (scope.go).
func (b *builder) addGatewayScope(g *gatewayResult, scope string, port int32) {
	unresolved := map[string]*route.Backend{}
	for _, r := range g.res.Rules {
		if r.Scope == scope && r.Port == port {
			b.addGatewayRule(r, unresolved)
		}
	}
	for _, c := range g.res.Certificates {
		if c.Scope == scope && c.Port == port {
			b.addGatewayCertificate(c)
		}
	}
}

// routeProblem reports a problem of the route named by key (routeKey).
func (b *builder) routeProblem(key, reason, msg string) {
	kind := "HTTPRoute"
	if rest, ok := strings.CutPrefix(key, grpcPrefix); ok {
		kind, key = "GRPCRoute", rest
	}
	ns, name, _ := strings.Cut(key, "/")
	b.problems = append(b.problems, Problem{Kind: kind, Namespace: ns, Name: name, Reason: reason, Message: msg})
}

func (b *builder) addGatewayRule(r gateway.Rule, unresolved map[string]*route.Backend) {
	ns, _, _ := strings.Cut(r.Route, "/")
	if r.Host != "" && !b.own.Serves(ns, r.Host) {
		b.routeProblem(routeKey(r), ReasonHostOwnedElsewhere, fmt.Sprintf("host %s is owned by another namespace (the namespace of its oldest Ingress or attached HTTPRoute), which does not share it with this one; not served from this HTTPRoute", r.Host))
		return
	}
	vh := b.vhosts[r.Host]
	if vh == nil {
		vh = &vhostRoutes{owners: make(map[string]string)}
		b.vhosts[r.Host] = vh
	}
	id := ruleID(r)                    // gatewayl7.go
	mk, ok := b.gatewayMatchKey(vh, r) // gatewayl7.go
	if !ok {
		return
	}
	if owner, taken := vh.owners[mk]; taken {
		if owner != id {
			b.routeProblem(routeKey(r), "Conflict", fmt.Sprintf("host %s %s %s%s is already routed by %s, which takes precedence (an Ingress, or an older route); skipped", hostLabel(r.Host), r.PathType, r.Path, conditionsLabel(r.Conditions), owner))
		}
		return
	}
	vh.owners[mk] = id
	vh.anyDepth = vh.anyDepth || strings.HasPrefix(r.Host, "*.") // Gateway API wildcards match any depth
	rt := route.Route{PathType: r.PathType, Path: r.Path, Ingress: id, SSLRedirect: r.HTTPSOnly,
		Conditions: r.Conditions, Filters: r.Filters}
	b.gatewayBackends(&rt, r, unresolved) // gatewayl7.go
	vh.routes = append(vh.routes, rt)
}

// gatewayBackend returns the shared Backend of a Service port an HTTPRoute
// names, with the default policy (its response timeout from the rule's
// timeouts) and the protocol of its appProtocol.
func (b *builder) gatewayBackend(ref gateway.BackendRef, routeID string, timeout time.Duration, grpc bool) *route.Backend {
	key := serviceKey{namespace: ref.Namespace, service: ref.Service, port: strconv.Itoa(int(ref.Port))}
	res, ok := b.resolved[key]
	if !ok {
		res = b.resolve(key)
		b.resolved[key] = res
	}
	if res.reason != "" {
		b.routeProblem(routeID, res.reason, res.message)
	}
	if res.refused != "" {
		b.routeProblem(routeID, ReasonEndpointsRefused, res.refused)
	}
	proto := protocolOf(res.appProtocol)
	if proto.TLS() {
		// Upstream TLS comes from a BackendTLSPolicy only (below).
		proto = route.ProtocolHTTP
	}
	if grpc && proto == route.ProtocolHTTP {
		proto = route.ProtocolGRPC // a GRPCRoute's backend speaks gRPC (h2c)
	}
	up := upstreamKey{protocol: proto}
	if t := ref.TLS; t != nil {
		up = backendTLSKey(t, grpc)
	}
	pol, _ := parsePolicy(nil) // the default, as an Ingress without annotations
	pol.ResponseTimeout = timeout
	bk := backendKey{svc: key, pol: keyOf(pol), up: up}
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
		Protocol:         up.protocol,
		RefusedEndpoints: res.refusedCount,
	}
	if t := ref.TLS; t != nil {
		be.TLS = &route.UpstreamTLS{ServerName: t.Hostname, CA: t.CA, CASource: t.CASource, SubjectAltNames: t.SubjectAltNames}
		if t.Invalid != "" {
			be.Endpoints = nil // reported by gateway.Build: 503, never plain HTTP
		}
	}
	b.backends[bk] = be
	b.variants[key]++
	return be
}

// backendTLSKey is the upstream key of a backend a BackendTLSPolicy makes
// TLS: HTTPS, or gRPC over TLS for a GRPCRoute's.
func backendTLSKey(t *gateway.BackendTLS, grpc bool) upstreamKey {
	up := upstreamKey{protocol: route.ProtocolHTTPS, caSecret: "BackendTLSPolicy " + t.Policy, sni: t.Hostname}
	if grpc {
		up.protocol = route.ProtocolGRPCS
	}
	return up
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
