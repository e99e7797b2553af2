package route

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"strings"
)

// Scope is a routing table of its own for the requests that reached one
// load-balancer address, one extra listener port, or both:
//
//   - a Gateway with an address of its own (LoadBalancerBinding
//     spec.gatewayAddresses) is served from its own scopes, so two
//     Gateways may serve the same host and path differently and a route is
//     reachable only through the Gateways it is attached to;
//   - a Gateway listener on an extra port (the proxies'
//     --gateway-extra-http-ports and --gateway-extra-https-ports) is
//     served from the scope of that port.
//
// The proxy learns the address and port a request reached from the PROXY
// protocol header of the load balancer (the header's destination), else
// from the connection's local address.
type Scope struct {
	// Address is the load-balancer address (unmapped); the zero Addr for
	// the shared addresses.
	Address netip.Addr
	// Port is an extra listener port (one of Config.ScopedPorts); 0 for
	// the main ports.
	Port uint16
	// Config is the scope's table; its own Scopes are ignored. An empty
	// Config (an address no Gateway holds yet) answers 404.
	Config Config
}

// scopeKey identifies a Scope.
type scopeKey struct {
	addr netip.Addr
	port uint16
}

// scopes is what a Table compiled from Config.Scopes.
type scopes struct {
	tables map[scopeKey]*Table
	addrs  map[netip.Addr]bool // addresses served apart
	ports  map[uint16]bool     // Config.ScopedPorts
	empty  *Table              // for a scoped address or port without a scope
}

// For returns the table serving requests that reached ap: the scope of its
// address (when served apart) and port (when an extra one); the empty
// table for a scoped address or port that has no scope; t itself for the
// shared addresses on the main ports. It does not allocate.
func (t *Table) For(ap netip.AddrPort) *Table {
	if t.sc == nil {
		return t
	}
	k := scopeKey{addr: ap.Addr().Unmap(), port: ap.Port()}
	if !t.sc.addrs[k.addr] {
		k.addr = netip.Addr{}
	}
	if !t.sc.ports[k.port] {
		k.port = 0
	}
	if k == (scopeKey{}) {
		return t
	}
	if s := t.sc.tables[k]; s != nil {
		return s
	}
	return t.sc.empty
}

// HasScopes reports whether the table has scopes, so a caller looks up the
// address a request reached only when it can matter.
func (t *Table) HasScopes() bool { return t.sc != nil }

// Scopes returns the scopes' tables, in Config order.
func (t *Table) Scopes() []*Table {
	if t.sc == nil {
		return nil
	}
	out := make([]*Table, 0, len(t.config.Scopes))
	for _, s := range t.config.Scopes {
		if st := t.sc.tables[scopeKey{s.Address.Unmap(), s.Port}]; st != nil {
			out = append(out, st)
		}
	}
	return out
}

// compileScopes compiles c's scopes into t, reusing prev's.
func (t *Table) compileScopes(prev *Table, c Config) {
	if len(c.Scopes) == 0 && len(c.ScopedPorts) == 0 {
		return
	}
	sc := &scopes{
		tables: make(map[scopeKey]*Table, len(c.Scopes)),
		addrs:  map[netip.Addr]bool{},
		ports:  map[uint16]bool{},
		empty:  &Table{exact: map[string]*vhost{}, wildcards: map[string]*vhost{}, certs: map[string]*tls.Certificate{}, wildCerts: map[string]*tls.Certificate{}},
	}
	for _, p := range c.ScopedPorts {
		if p != 0 {
			sc.ports[p] = true
		}
	}
	for i := range c.Scopes {
		s := &c.Scopes[i]
		k := scopeKey{s.Address.Unmap(), s.Port}
		if k == (scopeKey{}) || sc.tables[k] != nil || (k.port != 0 && !sc.ports[k.port]) {
			continue
		}
		if k.addr.IsValid() {
			sc.addrs[k.addr] = true
		}
		var p *Table
		if prev != nil && prev.sc != nil {
			p = prev.sc.tables[k]
		}
		cfg := s.Config
		cfg.Scopes, cfg.ScopedPorts = nil, nil
		sc.tables[k] = NewFrom(p, cfg)
	}
	t.sc = sc
}

// dumpScopes writes c's scopes for Dump, each indented under its key.
func dumpScopes(b *strings.Builder, c *Config) {
	if len(c.ScopedPorts) > 0 {
		fmt.Fprintf(b, "scoped ports %v\n", c.ScopedPorts)
	}
	for i := range c.Scopes {
		s := &c.Scopes[i]
		sc := s.Config
		sc.Scopes, sc.ScopedPorts = nil, nil
		addr, port := "*", "main"
		if s.Address.IsValid() {
			addr = s.Address.String()
		}
		if s.Port != 0 {
			port = fmt.Sprint(s.Port)
		}
		fmt.Fprintf(b, "scope %s port %s\n", addr, port)
		body := Dump(&sc)
		if body == "" {
			b.WriteString("  (empty: 404)\n")
			continue
		}
		for _, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
			b.WriteString("  " + line + "\n")
		}
	}
}
