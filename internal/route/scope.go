package route

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Scope is a routing table of its own for the requests that reach one
// load-balancer address: a Gateway with an address of its own
// (LoadBalancerBinding spec.gatewayAddresses) is served from its own
// scope, so two Gateways may serve the same host and path differently and
// a route is reachable only through the Gateways it is attached to. The
// proxy learns the address a request reached from the PROXY protocol
// header of the load balancer (the header's destination), else the
// connection's local address.
type Scope struct {
	// Address is the load-balancer address (unmapped).
	Address netip.Addr
	// Config is the scope's table; its own Scopes are ignored. An empty
	// Config (an address no Gateway holds yet) answers 404.
	Config Config
}

// For returns the table serving requests that reached addr: the scope of
// addr when the table has one, else t itself. It does not allocate.
func (t *Table) For(addr netip.Addr) *Table {
	if len(t.scopes) == 0 {
		return t
	}
	if s := t.scopes[addr.Unmap()]; s != nil {
		return s
	}
	return t
}

// HasScopes reports whether the table has scopes, so a caller looks up the
// address a request reached only when it can matter.
func (t *Table) HasScopes() bool { return len(t.scopes) > 0 }

// Scopes returns the scopes' tables, in Config order.
func (t *Table) Scopes() []*Table {
	out := make([]*Table, 0, len(t.config.Scopes))
	for _, s := range t.config.Scopes {
		if st := t.scopes[s.Address.Unmap()]; st != nil {
			out = append(out, st)
		}
	}
	return out
}

// compileScopes compiles c's scopes into t, reusing prev's.
func (t *Table) compileScopes(prev *Table, c Config) {
	if len(c.Scopes) == 0 {
		return
	}
	t.scopes = make(map[netip.Addr]*Table, len(c.Scopes))
	for i := range c.Scopes {
		s := &c.Scopes[i]
		a := s.Address.Unmap()
		if !a.IsValid() || t.scopes[a] != nil {
			continue
		}
		var p *Table
		if prev != nil {
			p = prev.scopes[a]
		}
		sc := s.Config
		sc.Scopes = nil
		t.scopes[a] = NewFrom(p, sc)
	}
}

// AddrOf returns the IP address of a net.Addr of a TCP connection (an
// *net.TCPAddr, or anything whose String is host:port); the zero Addr when
// there is none.
func AddrOf(a net.Addr) netip.Addr {
	switch v := a.(type) {
	case nil:
		return netip.Addr{}
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(v.IP)
		return ip.Unmap()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// dumpScopes writes c's scopes for Dump, each indented under its address.
func dumpScopes(b *strings.Builder, c *Config) {
	for i := range c.Scopes {
		s := &c.Scopes[i]
		sc := s.Config
		sc.Scopes = nil
		fmt.Fprintf(b, "scope %s\n", s.Address)
		body := Dump(&sc)
		if body == "" {
			b.WriteString("  (empty: 404)\n")
			continue
		}
		for _, line := range strings.SplitAfter(strings.TrimSuffix(body, "\n"), "\n") {
			b.WriteString("  " + strings.TrimSuffix(line, "\n") + "\n")
		}
	}
}
