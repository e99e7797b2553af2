package route

import (
	"fmt"
	"strings"
)

// Dump writes c as stable, human-readable text. Golden tests of translation
// compare dumps, so the format changes only on purpose.
func Dump(c *Config) string {
	var b strings.Builder
	for _, vh := range c.VirtualHosts {
		host := vh.Host
		if host == "" {
			host = "*"
		}
		if vh.AnyDepth && strings.HasPrefix(host, "*.") {
			host += " (any depth)"
		}
		fmt.Fprintf(&b, "host %s\n", host)
		for _, r := range vh.Routes {
			fmt.Fprintf(&b, "  %s %s -> %s (ingress %s)%s%s\n", r.PathType, r.Path, backendName(r.Backend), r.Ingress, dumpHTTPS(r)+dumpPolicies(r), dumpL7(r)+dumpConditions(r))
		}
	}
	if c.DefaultBackend != nil {
		fmt.Fprintf(&b, "default -> %s\n", c.DefaultBackend.Name)
	}
	seen := map[*Backend]bool{}
	var backends []*Backend
	add := func(be *Backend) {
		if be != nil && !seen[be] {
			seen[be] = true
			backends = append(backends, be)
		}
	}
	for _, vh := range c.VirtualHosts {
		for i := range vh.Routes {
			add(vh.Routes[i].Backend)
			for _, be := range splitBackends(&vh.Routes[i]) {
				add(be)
			}
			for _, be := range vh.Routes[i].Mirrors {
				add(be)
			}
		}
	}
	add(c.DefaultBackend)
	for _, be := range backends {
		fmt.Fprintf(&b, "backend %s policy=%s%s\n", be.Name, dumpPolicy(be.Policy), dumpProtocol(be))
		if be.Invalid {
			b.WriteString("  (invalid reference: 500)\n")
		} else if len(be.Endpoints) == 0 {
			b.WriteString("  (no endpoints)\n")
		}
		if be.RefusedEndpoints > 0 {
			fmt.Fprintf(&b, "  (%d refused)\n", be.RefusedEndpoints)
		}
		for _, ep := range be.Endpoints {
			if ep.Zone != "" {
				fmt.Fprintf(&b, "  %s zone=%s\n", ep.Address, ep.Zone)
			} else {
				fmt.Fprintf(&b, "  %s\n", ep.Address)
			}
		}
	}
	for _, ct := range c.Certificates {
		fmt.Fprintf(&b, "tls %s from %s\n", strings.Join(ct.Hosts, ","), ct.Source)
	}
	if c.DefaultCertificate != nil {
		fmt.Fprintf(&b, "tls default from %s\n", c.DefaultCertificate.Source)
	}
	for _, h := range c.NoWildcardCertificate {
		fmt.Fprintf(&b, "tls %s not from a wildcard (owned by another namespace)\n", h)
	}
	dumpScopes(&b, c)
	return b.String()
}

// dumpHTTPS describes a route's HTTPS settings, "" when it has none.
func dumpHTTPS(r Route) string {
	s := ""
	if r.SSLRedirect {
		s += " ssl-redirect"
	}
	if r.HSTS != "" {
		s += fmt.Sprintf(" hsts=%q", r.HSTS)
	}
	return s
}

// dumpProtocol describes a backend's protocol, "" for HTTP/1.1.
func dumpProtocol(be *Backend) string {
	if be.Protocol == ProtocolHTTP {
		return ""
	}
	s := " protocol=" + be.Protocol.String()
	if t := be.TLS; t != nil {
		s += " sni=" + t.ServerName
		if t.CASource != "" {
			s += " ca=" + t.CASource
		}
		if t.InsecureSkipVerify {
			s += " insecure-skip-verify"
		}
		for i, n := range t.SubjectAltNames {
			if i == 0 {
				s += " san="
			} else {
				s += ","
			}
			s += n.String()
		}
	}
	return s
}

func backendName(be *Backend) string {
	if be == nil {
		return "<nil>"
	}
	return be.Name
}

func dumpPolicy(p Policy) string {
	s := p.Algorithm.String()
	if p.Algorithm == HeaderHash {
		s += "(" + p.HashHeader + ")"
	}
	if p.Affinity != nil {
		s += fmt.Sprintf(" affinity=cookie(%s,max-age=%s)", p.Affinity.Name, p.Affinity.MaxAge)
	}
	if p.Retries >= 0 {
		s += fmt.Sprintf(" retries=%d", p.Retries)
	}
	if p.ConnectTimeout > 0 {
		s += fmt.Sprintf(" connect-timeout=%s", p.ConnectTimeout)
	}
	if p.ResponseTimeout > 0 {
		s += fmt.Sprintf(" response-timeout=%s", p.ResponseTimeout)
	}
	if p.ReadTimeout > 0 {
		s += fmt.Sprintf(" read-timeout=%s", p.ReadTimeout)
	}
	if p.SendTimeout > 0 {
		s += fmt.Sprintf(" send-timeout=%s", p.SendTimeout)
	}
	return s
}
