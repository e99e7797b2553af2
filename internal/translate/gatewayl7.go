package translate

import (
	"fmt"
	"strings"

	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/route"
)

// The request conditions, weighted backends, mirrors and timeouts of
// HTTPRoute rules (internal/gateway matches.go, backends.go, filters.go)
// onto route.Route.

// gatewayMatchKey is the claim key of a rule in its virtual host: its path,
// and its conditions when it has some. A rule with conditions on a path an
// Ingress claimed is refused: the Ingress keeps the whole path (false).
func (b *builder) gatewayMatchKey(vh *vhostRoutes, r gateway.Rule) (string, bool) {
	mk := matchKey(r.PathType, r.Path)
	if r.Conditions == nil {
		return mk, true
	}
	if owner, taken := vh.owners[mk]; taken && !strings.HasPrefix(owner, GatewayRouteID("")) && !strings.HasPrefix(owner, grpcPrefix) {
		b.routeProblem(routeKey(r), "Conflict", fmt.Sprintf("host %s %s %s is routed by %s, which takes precedence over an HTTPRoute; the rule%s is skipped", hostLabel(r.Host), r.PathType, r.Path, owner, conditionsLabel(r.Conditions)))
		return "", false
	}
	return mk + conditionsLabel(r.Conditions), true
}

// conditionsLabel describes conditions in messages and claim keys, "" for
// none.
func conditionsLabel(c *route.Conditions) string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(" when")
	if c.Method != "" {
		b.WriteString(" method=" + c.Method)
	}
	for _, h := range c.Headers {
		fmt.Fprintf(&b, " header %s%s%q", h.Name, op(h.Regex), h.Value)
	}
	for _, q := range c.Query {
		fmt.Fprintf(&b, " query %s%s%q", q.Name, op(q.Regex), q.Value)
	}
	return b.String()
}

func op(regex bool) string {
	if regex {
		return "~"
	}
	return "="
}

// gatewayBackends sets rt's backend, weighted split and mirrors from r. A
// share that cannot be used gets the route's unresolved backend, which
// answers 500.
func (b *builder) gatewayBackends(rt *route.Route, r gateway.Rule, unresolved map[string]*route.Backend) {
	backend := func(ref *gateway.BackendRef) *route.Backend {
		if ref == nil {
			return b.invalidBackend(routeKey(r), unresolved)
		}
		return b.gatewayBackend(*ref, routeKey(r), r.Timeout, r.GRPC)
	}
	rt.Backend = backend(r.Backend)
	if len(r.Backends) > 1 {
		s := &route.Split{}
		for _, w := range r.Backends {
			s.Weighted = append(s.Weighted, route.WeightedBackend{Backend: backend(w.Ref), Weight: uint32(w.Weight), Ingress: rt.Ingress})
		}
		rt.Split = s
	}
	for _, m := range r.Mirrors {
		rt.Mirrors = append(rt.Mirrors, b.gatewayBackend(m, routeKey(r), 0, r.GRPC))
	}
}

// invalidBackend is the one backend without endpoints of an HTTPRoute's
// references that cannot be used: its requests answer 500, never reach
// another route's backend.
func (b *builder) invalidBackend(key string, unresolved map[string]*route.Backend) *route.Backend {
	if be := unresolved[key]; be != nil {
		return be
	}
	kind := "HTTPRoute"
	nsName, isGRPC := strings.CutPrefix(key, grpcPrefix)
	if isGRPC {
		kind = "GRPCRoute"
	}
	ns, name, _ := strings.Cut(nsName, "/")
	be := &route.Backend{Name: ns + "/" + kind + ":" + name + ":unresolved", Namespace: ns, Service: kind + ":" + name, Port: "unresolved",
		Policy: route.Policy{Retries: -1}, Invalid: true}
	unresolved[key] = be
	return be
}

// grpcPrefix marks a GRPCRoute in a routeKey and a route ID.
const grpcPrefix = "GRPCRoute:"

// routeKey names a rule's route for problems and maps: "namespace/name"
// for an HTTPRoute, "GRPCRoute:namespace/name" for a GRPCRoute.
func routeKey(r gateway.Rule) string {
	if r.GRPC {
		return grpcPrefix + r.Route
	}
	return r.Route
}

// ruleID is the route.Route Ingress field of a rule: GatewayRouteID, or
// "GRPCRoute:namespace/name".
func ruleID(r gateway.Rule) string {
	if r.GRPC {
		return grpcPrefix + r.Route
	}
	return GatewayRouteID(r.Route)
}
