package translate

import (
	"cmp"
	"crypto/tls"
	"net/netip"
	"slices"

	"sluice.dev/sluice/internal/route"
)

// gatewayScopes builds the tables of what is served apart (route.Scope):
// for each address of Options.Gateway.Addresses, the rules and
// certificates of the Gateway holding it on the main ports (none yet: an
// empty table, so requests to it get 404 and never the shared table's
// routes); for each extra listener port with a listener, those of the
// listeners on that port, per address. Host ownership is the build's, so
// a tenant cannot take another's host through a Gateway or port of its
// own either. The default certificate of a scope is its own listener's
// without a hostname, else dflt (the shared table's).
func (b *builder) gatewayScopes(g *gatewayResult, dflt *route.Certificate) ([]route.Scope, []uint16) {
	o := b.opts.Gateway
	if o == nil {
		return nil, nil
	}
	type key struct {
		addr netip.Addr
		port int32
	}
	keys := map[key]bool{}
	for _, a := range o.Addresses {
		keys[key{addr: a.Unmap()}] = true
	}
	add := func(scope string, port int32) {
		if scope == "" && port == 0 {
			return
		}
		k := key{port: port}
		if scope != "" {
			a, err := netip.ParseAddr(scope)
			if err != nil {
				return
			}
			k.addr = a.Unmap()
		}
		keys[k] = true
	}
	for _, r := range g.res.Rules {
		add(r.Scope, r.Port)
	}
	for _, c := range g.res.Certificates {
		add(c.Scope, c.Port)
	}
	var ports []uint16
	for _, p := range slices.Concat(o.ExtraHTTPPorts, o.ExtraHTTPSPorts) {
		if p > 0 && p < 1<<16 {
			ports = append(ports, uint16(p))
		}
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	if len(keys) == 0 {
		return nil, ports
	}
	sorted := make([]key, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.SortFunc(sorted, func(x, y key) int { return cmp.Or(x.addr.Compare(y.addr), cmp.Compare(x.port, y.port)) })
	out := make([]route.Scope, 0, len(sorted))
	for _, k := range sorted {
		scope := ""
		if k.addr.IsValid() {
			scope = k.addr.String()
		}
		sb := b.sibling()
		sb.addGatewayScope(g, scope, k.port)
		sb.nameBackends()
		cfg := route.Config{
			VirtualHosts:          sb.virtualHosts(),
			Certificates:          sb.certificates(),
			DefaultCertificate:    cmp.Or(sb.gatewayDefault, dflt),
			Owners:                b.own.owners(),
			NoWildcardCertificate: sb.noWildcard(),
		}
		b.problems = append(b.problems, sb.problems...)
		out = append(out, route.Scope{Address: k.addr, Port: uint16(k.port), Config: cfg})
	}
	return out, ports
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
