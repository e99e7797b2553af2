package translate

import (
	"cmp"
	"crypto/tls"
	"net/netip"
	"slices"

	"sluice.dev/sluice/internal/route"
)

// gatewayScopes builds the tables of the Gateways served apart
// (route.Scope): one per address of Options.Gateway.Addresses, holding only
// the rules and certificates of the Gateway that holds the address (none
// yet: an empty table, so requests to it get 404 and never the shared
// table's routes). Host ownership is the build's, so a tenant cannot take
// another's host through a Gateway of its own either. The default
// certificate of a scope is its Gateway's listener without a hostname,
// else dflt (the shared table's).
func (b *builder) gatewayScopes(g *gatewayResult, dflt *route.Certificate) []route.Scope {
	if b.opts.Gateway == nil || len(b.opts.Gateway.Addresses) == 0 {
		return nil
	}
	addrs := slices.Clone(b.opts.Gateway.Addresses)
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	out := make([]route.Scope, 0, len(addrs))
	for _, a := range addrs {
		sb := b.sibling()
		sb.addGatewayScope(g, a.String())
		sb.nameBackends()
		cfg := route.Config{
			VirtualHosts:          sb.virtualHosts(),
			Certificates:          sb.certificates(),
			DefaultCertificate:    cmp.Or(sb.gatewayDefault, dflt),
			Owners:                b.own.owners(),
			NoWildcardCertificate: sb.noWildcard(),
		}
		b.problems = append(b.problems, sb.problems...)
		out = append(out, route.Scope{Address: a, Config: cfg})
	}
	return out
}

// sibling returns a builder sharing b's lookups and decisions (objects,
// resolved Services, parsed Secrets, host ownership) with empty tables.
func (b *builder) sibling() *builder {
	return &builder{
		opts:     b.opts,
		services: b.services,
		slices:   b.slices,
		pods:     b.pods,
		secrets:  b.secrets,
		resolved: b.resolved,
		backends: map[backendKey]*route.Backend{},
		variants: map[serviceKey]int{},
		keyPairs: b.keyPairs,
		cache:    b.cache,
		sni:      map[string]sniOwner{},
		certs:    map[string][]string{},
		certOf:   map[string]*tls.Certificate{},
		vhosts:   map[string]*vhostRoutes{},
		tlsHosts: map[string]string{},
		own:      b.own,
		classes:  b.classes,
		gw:       b.gw,
	}
}
