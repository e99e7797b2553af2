package route

import (
	"net/netip"
	"strings"
)

// HostOwner says which namespace owns a host (exact or "*." wildcard): the
// namespace of its oldest Ingress. The proxy uses it to refuse requests that
// a TLS connection of one tenant would carry to another's host (421).
type HostOwner struct {
	Host      string
	Namespace string
}

// owners is the compiled form of Config.Owners and NoWildcardCertificate.
type owners struct {
	exact      map[string]string // host → namespace
	wildcards  map[string]string // suffix after "*." → namespace
	noWildcard map[string]bool
}

func newOwners(c *Config) owners {
	var o owners
	if len(c.Owners) > 0 {
		o.exact = make(map[string]string, len(c.Owners))
		o.wildcards = make(map[string]string)
	}
	for _, ho := range c.Owners {
		h := strings.ToLower(ho.Host)
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			o.wildcards[suffix] = ho.Namespace
		} else if h != "" {
			o.exact[h] = ho.Namespace
		}
	}
	if len(c.NoWildcardCertificate) > 0 {
		o.noWildcard = make(map[string]bool, len(c.NoWildcardCertificate))
		for _, h := range c.NoWildcardCertificate {
			o.noWildcard[strings.ToLower(h)] = true
		}
	}
	return o
}

// Owner returns the namespace owning host (a port is ignored): the owner of
// the exact name, else of the wildcard one label up; "" when no Ingress
// names the host or ownership is off.
func (t *Table) Owner(host string) string {
	return t.owners.of(canonicalHost(host))
}

func (o *owners) of(h string) string {
	if ns, ok := o.exact[h]; ok {
		return ns
	}
	if i := strings.IndexByte(h, '.'); i > 0 {
		return o.wildcards[h[i+1:]]
	}
	return ""
}

// Misdirected reports whether a request for host arriving on a TLS
// connection whose client sent serverName (SNI) must be refused with 421
// Misdirected Request, so that one tenant's certificate never fronts
// another tenant's host:
//
//   - no SNI, or the same name: never (clients without SNI, such as load
//     balancer health checks by IP, are routed by Host as on plain HTTP);
//   - the two names have different owners (Owner): always;
//   - otherwise, when the certificate chosen for the SNI name is a tenant's
//     (not the default certificate), the host must be one of its names.
//     The default certificate is the platform's and is served to any name
//     without a certificate of its own, so only the owner check applies.
//
// A request without a host (HTTP/1.0) is not refused.
func (t *Table) Misdirected(serverName, host string) bool {
	if serverName == "" || host == "" {
		return false
	}
	sni, h := canonicalHost(serverName), canonicalHost(host)
	if sni == h || isIPLiteral(sni) {
		// An IP address is no server name (RFC 6066 forbids it in SNI,
		// and some clients send it anyway): as if none was sent.
		return false
	}
	if t.owners.of(sni) != t.owners.of(h) {
		return true
	}
	c := t.Certificate(sni)
	if c == nil || c == t.defCert || c.Leaf == nil {
		return false
	}
	return c.Leaf.VerifyHostname(h) != nil
}

// isIPLiteral reports whether a canonical host is an IPv4 or IPv6
// address (brackets allowed).
func isIPLiteral(h string) bool {
	_, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	return err == nil
}
