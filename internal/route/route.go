// Package route holds sluice's routing table: an immutable value built off the
// request path by internal/translate and read by internal/proxy with one
// atomic load per request.
//
// Data flow: Kubernetes objects → translate.Build (pure) → route.Config →
// route.New → *Table → proxy (atomic swap). A Table is never modified after
// New returns; a change of configuration builds a new Table.
//
// Matching follows the Ingress v1 rules:
//   - hosts are exact and case-insensitive, a port in the Host header is
//     ignored; "*.example.com" matches exactly one extra DNS label; an exact
//     host wins over a wildcard, a wildcard over rules without a host;
//   - the most specific virtual host is chosen first and there is no fall
//     through: a request whose host selects a virtual host but whose path
//     matches none of its routes gets the default backend (or 404), as in
//     ingress-nginx and Contour;
//   - paths: Exact is case-sensitive with a significant trailing slash;
//     Prefix matches element-wise on '/' boundaries, ignoring a trailing
//     slash in the rule; the longest match wins and Exact beats Prefix.
package route

import (
	"crypto/tls"
	"strings"
	"time"
)

// PathType says how a Route's Path is matched.
type PathType uint8

const (
	// PathPrefix matches element-wise on '/' boundaries. Ingress
	// ImplementationSpecific paths are translated to PathPrefix.
	PathPrefix PathType = iota
	// PathExact matches the request path exactly, case-sensitively.
	PathExact
	// PathRegex matches an RE2 expression against the path, anchored at
	// its start (regex.go): after Exact routes, before Prefix ones.
	PathRegex
)

func (p PathType) String() string {
	switch p {
	case PathExact:
		return "Exact"
	case PathRegex:
		return "Regex"
	}
	return "Prefix"
}

// Algorithm chooses an endpoint of a Backend for a request.
type Algorithm uint8

const (
	// LeastRequest picks the less loaded of two random endpoints (default).
	LeastRequest Algorithm = iota
	// RoundRobin cycles through the endpoints.
	RoundRobin
	// HeaderHash hashes Policy.HashHeader onto a consistent-hash ring;
	// requests without the header fall back to LeastRequest.
	HeaderHash
)

func (a Algorithm) String() string {
	switch a {
	case RoundRobin:
		return "round-robin"
	case HeaderHash:
		return "header-hash"
	default:
		return "least-request"
	}
}

// Config is what translate produces and New compiles. It is plain data and
// deterministic: translate sorts everything, so two Configs built from the
// same objects are equal and dump to the same text.
type Config struct {
	// VirtualHosts, one per distinct host. Host "" holds the rules without a
	// host; a host beginning with "*." is a wildcard. Hosts are lower case.
	VirtualHosts []VirtualHost
	// DefaultBackend serves requests that match no route. nil means 404.
	DefaultBackend *Backend
	// Certificates for TLS, selected by SNI.
	Certificates []Certificate
	// DefaultCertificate is served when no certificate matches the SNI name
	// (or the client sent none). nil leaves the choice to the caller of
	// Table.Certificate (sluice proxy serves a self-signed certificate it
	// generated at start).
	DefaultCertificate *Certificate
	// Owners are the hosts' owning namespaces (tenancy, owner.go), sorted by
	// host; empty when host ownership is off.
	Owners []HostOwner
	// NoWildcardCertificate are exact host names that a wildcard entry of
	// Certificates must not serve, because the namespace owning the name
	// neither owns the wildcard nor shares the name with its owner. They get
	// DefaultCertificate. Sorted.
	NoWildcardCertificate []string
	// Scopes are the tables of load-balancer addresses and extra listener
	// ports served apart, sorted by address then port (scope.go); nil for
	// none. ScopedPorts are the extra listener ports: a request to one of
	// them is served only from a Scope of that port (none: 404).
	Scopes      []Scope
	ScopedPorts []uint16
}

// VirtualHost is the set of routes for one host.
type VirtualHost struct {
	Host   string
	Routes []Route
	// AnyDepth makes a wildcard host ("*.example.com") also match names
	// several labels below its suffix (a.b.example.com), as Gateway API
	// hostnames do; an Ingress wildcard matches one label. A longer suffix
	// wins. Ignored for other hosts.
	AnyDepth bool
}

// Route sends requests matching PathType and Path to Backend.
type Route struct {
	PathType PathType
	// Path as written in the Ingress (a Prefix rule's trailing slash is kept
	// here and ignored when matching).
	Path    string
	Backend *Backend
	// Ingress that defined this route, "namespace/name"; used in metrics,
	// logs and access logs.
	Ingress string
	// SSLRedirect answers requests that did not arrive over HTTPS (the
	// connection, or X-Forwarded-Proto from a trusted peer) with a 308 to
	// the same URL over HTTPS. Translate sets it for hosts with TLS unless
	// the Ingress turns it off.
	SSLRedirect bool
	// HSTS is the Strict-Transport-Security value added to responses sent
	// over HTTPS; "" adds none.
	HSTS string
	// Filters: L7 rewrite, redirect and header filters (issue 27,
	// filters.go); nil for none.
	Filters *Filters
	// Split: canary and weighted/conditional backends (issue 27,
	// filters.go); nil sends every request to Backend.
	Split *Split
	// L7 request policies (issue 27 part B, policy.go); nil: none.
	Policies *Policies
	// Conditions restrict the route to requests with a method, header
	// fields and query parameters (conditions.go); nil: every request.
	Conditions *Conditions
	// Mirrors receive a copy of each request, whose answers are dropped
	// (mirror.go); nil: none.
	Mirrors []*Backend
}

// Backend is a Service port and the pod endpoints behind it. Backends are
// shared between routes that name the same Service port with the same policy.
type Backend struct {
	// Name identifies the backend: "namespace/service:port" (port as written
	// in the Ingress, a number or a name).
	Name      string
	Namespace string
	Service   string
	Port      string
	// Endpoints that may receive new requests: the ready ones, or, if none is
	// ready, the serving-and-terminating ones. Sorted by Address. Empty means
	// the route answers 503.
	Endpoints []Endpoint
	Policy    Policy
	// Protocol spoken to the endpoints; the zero value is HTTP/1.1.
	Protocol Protocol
	// TLS configures HTTPS and GRPCS; nil for the other protocols.
	TLS *UpstreamTLS
	// Invalid: the reference to the Service could not be resolved
	// (Gateway API: a backendRef of a kind, namespace or name that cannot
	// be used); its requests get 500 rather than 503.
	Invalid bool
	// RefusedEndpoints counts the endpoints of the Service's slices that
	// translation refused (not a Pod of the Service's namespace, or a
	// special address); they get no traffic. For metrics only.
	RefusedEndpoints int
}

// Protocol is what the proxy speaks to a backend's endpoints.
type Protocol uint8

const (
	// ProtocolHTTP is HTTP/1.1, WebSocket upgrades included (default).
	ProtocolHTTP Protocol = iota
	// ProtocolH2C is HTTP/2 without TLS (prior knowledge).
	ProtocolH2C
	// ProtocolGRPC is gRPC over HTTP/2 without TLS. It differs from H2C in
	// the answers of the proxy itself (gRPC statuses) and in having no
	// response header timeout (a client-streaming call's response header
	// comes at its end) unless the backend policy sets one.
	ProtocolGRPC
	// ProtocolHTTPS is HTTP/1.1 over TLS.
	ProtocolHTTPS
	// ProtocolGRPCS is gRPC over HTTP/2 with TLS.
	ProtocolGRPCS
)

var protocolNames = [...]string{"http", "h2c", "grpc", "https", "grpcs"}

func (p Protocol) String() string {
	if int(p) < len(protocolNames) {
		return protocolNames[p]
	}
	return "unknown"
}

// HTTP2 reports whether the protocol is HTTP/2.
func (p Protocol) HTTP2() bool { return p == ProtocolH2C || p == ProtocolGRPC || p == ProtocolGRPCS }

// GRPC reports whether the protocol is gRPC.
func (p Protocol) GRPC() bool { return p == ProtocolGRPC || p == ProtocolGRPCS }

// TLS reports whether the protocol runs over TLS.
func (p Protocol) TLS() bool { return p == ProtocolHTTPS || p == ProtocolGRPCS }

// UpstreamTLS says how the proxy verifies the endpoints of an HTTPS or
// GRPCS backend.
type UpstreamTLS struct {
	// ServerName is sent as SNI and verified against the certificate.
	ServerName string
	// CA holds PEM certificates the endpoints' certificates must chain
	// to; nil means the system roots.
	CA []byte
	// CASource is the Secret CA came from, "namespace/name", "" for none.
	CASource string
	// InsecureSkipVerify accepts any certificate. It is set only by an
	// explicit annotation.
	InsecureSkipVerify bool
	// SubjectAltNames, when not empty, are what the certificate is
	// verified against instead of ServerName (then the SNI only): it must
	// carry at least one of them (upstreamtls.go). Nil: ServerName.
	SubjectAltNames []SubjectAltName
}

// Endpoint is one pod address.
type Endpoint struct {
	// Address is "ip:port" ("[ip]:port" for IPv6).
	Address string
	// Zone is the EndpointSlice zone hint, "" if unknown.
	Zone string
}

// Policy holds per-backend balancing and retry settings taken from Ingress
// annotations. The zero value is the default behaviour.
type Policy struct {
	Algorithm Algorithm
	// HashHeader is the request header hashed by HeaderHash.
	HashHeader string
	// Affinity, when non-nil, pins a client to an endpoint with a cookie.
	Affinity *CookieAffinity
	// Retries is the number of extra attempts after a failure that is safe to
	// retry. Negative means the proxy default; 0 disables retries.
	Retries int
	// ConnectTimeout and ResponseTimeout override the proxy defaults when
	// non-zero.
	ConnectTimeout  time.Duration
	ResponseTimeout time.Duration
	// ReadTimeout bounds the wait between two successive reads of the
	// upstream's response body, SendTimeout that between two successive
	// writes of the request upstream (nginx's proxy_read_timeout and
	// proxy_send_timeout); zero for none.
	ReadTimeout, SendTimeout time.Duration
}

// CookieAffinity configures sticky sessions.
type CookieAffinity struct {
	// Name of the cookie.
	Name string
	// MaxAge of the cookie; 0 means a session cookie.
	MaxAge time.Duration
}

// Certificate is a parsed TLS key pair for a set of host names.
type Certificate struct {
	// Hosts the certificate serves, lower case; may include wildcards.
	Hosts []string
	// Source is the Secret it came from, "namespace/name".
	Source string
	Cert   *tls.Certificate
}

// Table is the compiled, immutable form of a Config.
type Table struct {
	config    Config
	exact     map[string]*vhost
	wildcards map[string]*vhost // keyed by the suffix after "*."
	anyDepth  map[string]*vhost // the AnyDepth ones among wildcards
	catchAll  *vhost
	defaultRt *Route
	certs     map[string]*tls.Certificate // exact SNI name
	wildCerts map[string]*tls.Certificate // keyed by the suffix after "*."
	defCert   *tls.Certificate
	owners    owners
	sc        *scopes // scope.go; nil for none
}

type vhost struct {
	exact    map[string]*Route
	prefixes map[string]*Route // normalized: trailing slashes removed; "" is "/"
	regex    []regexRoute      // longest pattern first (regex.go)
	// groups: for each route of exact or prefixes with Conditions, the
	// routes of its type and path in the order tried (conditions.go).
	groups map[*Route][]*condMatcher
	routes []Route // compiled from (NewFrom reuses the vhost for the same slice)
}

// New compiles c into a Table. c must not be modified afterwards. When two
// routes of a host have the same type and path, the first one wins (translate
// resolves and reports conflicts before this).
func New(c Config) *Table { return NewFrom(nil, c) }

// NewFrom is New, reusing what prev (nil for none) compiled from the same
// VirtualHost routes: a host whose Routes slice is the very slice (same
// array, same length) of a host of prev's Config is not compiled again.
// Incremental translation (translate.Update) passes the routes of the hosts
// a change did not touch on unchanged, so a change compiles only its own.
func NewFrom(prev *Table, c Config) *Table {
	t := &Table{
		config:    c,
		exact:     make(map[string]*vhost, len(c.VirtualHosts)),
		wildcards: make(map[string]*vhost),
		certs:     make(map[string]*tls.Certificate, len(c.Certificates)),
		wildCerts: make(map[string]*tls.Certificate),
	}
	for i := range c.VirtualHosts {
		vh := &c.VirtualHosts[i]
		host := strings.ToLower(vh.Host)
		v := prev.reusable(host, vh.Routes)
		if v == nil {
			v = compile(vh.Routes)
		}
		switch {
		case host == "":
			if t.catchAll == nil {
				t.catchAll = v
			}
		case strings.HasPrefix(host, "*."):
			if _, dup := t.wildcards[host[2:]]; !dup {
				t.wildcards[host[2:]] = v
				if vh.AnyDepth {
					if t.anyDepth == nil {
						t.anyDepth = make(map[string]*vhost)
					}
					t.anyDepth[host[2:]] = v
				}
			}
		default:
			if _, dup := t.exact[host]; !dup {
				t.exact[host] = v
			}
		}
	}
	if c.DefaultBackend != nil {
		t.defaultRt = &Route{PathType: PathPrefix, Path: "/", Backend: c.DefaultBackend}
	}
	for i := range c.Certificates {
		ct := &c.Certificates[i]
		for _, h := range ct.Hosts {
			h = strings.ToLower(h)
			if strings.HasPrefix(h, "*.") {
				if _, dup := t.wildCerts[h[2:]]; !dup {
					t.wildCerts[h[2:]] = ct.Cert
				}
			} else if _, dup := t.certs[h]; !dup {
				t.certs[h] = ct.Cert
			}
		}
	}
	if c.DefaultCertificate != nil {
		t.defCert = c.DefaultCertificate.Cert
	}
	t.owners = newOwners(&c)
	t.compileScopes(prev, c)
	return t
}

// compile indexes one host's routes.
func compile(routes []Route) *vhost {
	v := &vhost{exact: make(map[string]*Route), prefixes: make(map[string]*Route), routes: routes}
	for j := range routes {
		r := &routes[j]
		if r.PathType == PathRegex {
			v.addRegex(r)
			continue
		}
		if r.PathType == PathExact {
			if head, dup := v.exact[r.Path]; !dup {
				v.exact[r.Path] = r
				v.addHead(r)
			} else {
				v.addAlternative(head, r)
			}
			continue
		}
		key := strings.TrimRight(r.Path, "/")
		if head, dup := v.prefixes[key]; !dup {
			v.prefixes[key] = r
			v.addHead(r)
		} else {
			v.addAlternative(head, r)
		}
	}
	v.sortRegex()
	return v
}

// reusable returns t's compiled vhost for host if it was compiled from
// routes itself; nil otherwise (or for a nil t).
func (t *Table) reusable(host string, routes []Route) *vhost {
	if t == nil || len(routes) == 0 {
		return nil
	}
	var v *vhost
	switch {
	case host == "":
		v = t.catchAll
	case strings.HasPrefix(host, "*."):
		v = t.wildcards[host[2:]]
	default:
		v = t.exact[host]
	}
	if v == nil || len(v.routes) != len(routes) || &v.routes[0] != &routes[0] {
		return nil
	}
	return v
}

// Config returns the Config the table was built from. Callers must not modify
// it.
func (t *Table) Config() *Config { return &t.config }

// Match returns the route for a request with the given Host header (a port is
// ignored) and URL path, or nil when nothing matches and there is no default
// backend. Match does not allocate for lower-case hosts. A route it returns
// with Conditions may not accept the request: the caller then asks
// MatchRequest (conditions.go).
func (t *Table) Match(host, path string) *Route {
	if r := t.matchHost(canonicalHost(host), path); r != nil {
		return r
	}
	return t.defaultRt
}

func (t *Table) matchHost(host, path string) *Route {
	if v := t.vhostOf(host); v != nil {
		return v.match(path)
	}
	return nil
}

// vhostOf returns the virtual host serving a canonical host, nil for none.
func (t *Table) vhostOf(host string) *vhost {
	v := t.exact[host]
	if v == nil {
		if i := strings.IndexByte(host, '.'); i > 0 {
			v = t.wildcards[host[i+1:]]
			// Then AnyDepth wildcards of shorter suffixes, longest first.
			for rest := host[i+1:]; v == nil && len(t.anyDepth) > 0; {
				j := strings.IndexByte(rest, '.')
				if j < 0 {
					break
				}
				rest = rest[j+1:]
				v = t.anyDepth[rest]
			}
		}
	}
	if v == nil {
		v = t.catchAll
	}
	return v
}

func (v *vhost) match(path string) *Route {
	if r := v.exact[path]; r != nil {
		return r
	}
	if len(v.regex) > 0 {
		if r := v.matchRegex(path); r != nil {
			return r
		}
	}
	if len(v.prefixes) == 0 {
		return nil
	}
	s := strings.TrimRight(path, "/")
	for {
		if r := v.prefixes[s]; r != nil {
			return r
		}
		i := strings.LastIndexByte(s, '/')
		if i < 0 {
			return nil
		}
		s = s[:i]
	}
}

// Certificate returns the certificate for an SNI server name: an exact name,
// then a wildcard covering it (unless Config.NoWildcardCertificate lists the
// name), then the default certificate; nil if none.
func (t *Table) Certificate(serverName string) *tls.Certificate {
	name := canonicalHost(serverName)
	if c := t.certs[name]; c != nil {
		return c
	}
	if i := strings.IndexByte(name, '.'); i > 0 && !t.owners.noWildcard[name] {
		if c := t.wildCerts[name[i+1:]]; c != nil {
			return c
		}
	}
	return t.defCert
}

// canonicalHost strips a port and a trailing dot and lower-cases, allocating
// only when the host has upper-case letters.
func canonicalHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") {
		// host:port, or [v6]:port; a bare IPv6 literal needs brackets in Host.
		if strings.IndexByte(h[:i], ':') < 0 || strings.HasPrefix(h, "[") {
			h = h[:i]
		}
	}
	h = strings.TrimSuffix(h, ".")
	for i := 0; i < len(h); i++ {
		if c := h[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}
