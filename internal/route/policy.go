package route

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Policies are a route's request policies (issue 27, part B): who may send
// requests, how large they may be, how often, with which credentials, and
// the CORS answers. Route.Policies is nil when an Ingress sets none, so the
// request path pays one nil check; inside, a nil group is off.
type Policies struct {
	Access      *SourceAccess
	BodyLimit   *BodyLimit
	CORS        *CORS
	RateLimit   *RateLimit
	BasicAuth   *BasicAuth
	ForwardAuth *ForwardAuth
	ErrorPages  *ErrorPages
}

// ErrorPages replaces upstream answers with the listed statuses by the
// page of an error Service (ingress-nginx's custom-http-errors).
type ErrorPages struct {
	// Codes, sorted.
	Codes []int
	// Backend is the error Service, of the Ingress's namespace.
	Backend *Backend
}

// ForwardAuth asks an auth service about each request before forwarding
// it (a GET with the request's header).
type ForwardAuth struct {
	// Backend is the auth Service of the Ingress's namespace, and Host the
	// Host header sent to it; nil when URL is set.
	Backend *Backend
	Host    string
	// URL is any http(s) URL, when the operator allows that.
	URL string
	// Path is the path and query sent to Backend.
	Path string
	// ResponseHeaders are copied from a 2xx answer into the upstream
	// request.
	ResponseHeaders []string
	// SignIn, when set, turns a 401 into a 302 to it.
	SignIn string
	// Timeout bounds the sub-request.
	Timeout time.Duration
	// Refuse answers 503: the auth URL is unusable.
	Refuse bool
}

// SourceAccess refuses requests by client address (403). The client
// address is the peer, or, from a trusted proxy (--trusted-proxies), the
// last untrusted X-Forwarded-For hop.
type SourceAccess struct {
	// Allow, when non-empty, admits only these prefixes.
	Allow []netip.Prefix
	// Deny refuses these prefixes; it wins over Allow.
	Deny []netip.Prefix
}

// BodyLimit bounds the request body (413).
type BodyLimit struct {
	// MaxBytes is the largest body accepted; > 0.
	MaxBytes int64
}

// CORS configures cross-origin answers (the Fetch standard's CORS
// protocol). The proxy answers preflights itself.
type CORS struct {
	// AnyOrigin allows every origin ("*"); Credentials is then false.
	AnyOrigin bool
	// Origins are exact origins ("https://app.example.com", lower case).
	Origins []string
	// OriginSuffixes are wildcard patterns: scheme "://" then a host
	// suffix beginning with "." (from "https://*.example.com": a request
	// origin must have that scheme and end with ".example.com").
	OriginSuffixes []string
	// Methods, Headers and ExposeHeaders are the header values sent, ""
	// for none.
	Methods, Headers, ExposeHeaders string
	// Credentials sends Access-Control-Allow-Credentials: true.
	Credentials bool
	// MaxAge is the preflight's Access-Control-Max-Age; negative: none.
	MaxAge time.Duration
}

// RateLimit limits requests per client address, in each proxy replica.
type RateLimit struct {
	// RPS and RPM are the sustained rates, 0 for none.
	RPS, RPM int
	// BurstRPS and BurstRPM are the bucket sizes: requests allowed at once.
	BurstRPS, BurstRPM int
	// Concurrent caps the requests in flight per client, 0 for none.
	Concurrent int
	// Exempt sources are never limited.
	Exempt []netip.Prefix
	// Status answers a limited request.
	Status int
}

// BasicAuth demands HTTP basic credentials (401).
type BasicAuth struct {
	// Realm is the WWW-Authenticate realm.
	Realm string
	// Secret is the Secret the users came from, "namespace/name", and
	// Revision its resourceVersion.
	Secret, Revision string
	// Users maps a user name to its htpasswd hash. Empty with Refuse set
	// when the Secret is missing or invalid.
	Users map[string]string
	// Refuse answers every request 503: the credentials could not be
	// loaded, so the route fails closed.
	Refuse bool
}

// dumpPolicies describes a route's request policies, "" when it has none.
func dumpPolicies(rt Route) string {
	r := rt.Policies
	if r == nil {
		return ""
	}
	var s strings.Builder
	if a := r.Access; a != nil {
		switch {
		case a.Allow == nil:
		case len(a.Allow) == 0:
			s.WriteString(" allow=none")
		default:
			fmt.Fprintf(&s, " allow=%s", joinPrefixes(a.Allow))
		}
		if len(a.Deny) > 0 {
			fmt.Fprintf(&s, " deny=%s", joinPrefixes(a.Deny))
		}
	}
	if b := r.BodyLimit; b != nil {
		fmt.Fprintf(&s, " max-body=%d", b.MaxBytes)
	}
	if c := r.CORS; c != nil {
		origins := append([]string(nil), c.Origins...)
		for _, o := range c.OriginSuffixes {
			origins = append(origins, strings.Replace(o, "://.", "://*.", 1))
		}
		if c.AnyOrigin {
			origins = []string{"*"}
		}
		fmt.Fprintf(&s, " cors(origins=%s methods=%q headers=%q expose=%q credentials=%t max-age=%s)",
			strings.Join(origins, ","), c.Methods, c.Headers, c.ExposeHeaders, c.Credentials, c.MaxAge)
	}
	if l := r.RateLimit; l != nil {
		fmt.Fprintf(&s, " rate-limit(rps=%d/%d rpm=%d/%d concurrent=%d status=%d", l.RPS, l.BurstRPS, l.RPM, l.BurstRPM, l.Concurrent, l.Status)
		if len(l.Exempt) > 0 {
			fmt.Fprintf(&s, " exempt=%s", joinPrefixes(l.Exempt))
		}
		s.WriteString(")")
	}
	if a := r.BasicAuth; a != nil {
		if a.Refuse {
			fmt.Fprintf(&s, " basic-auth(refuse secret=%s)", a.Secret)
		} else {
			fmt.Fprintf(&s, " basic-auth(realm=%q secret=%s users=%d)", a.Realm, a.Secret, len(a.Users))
		}
	}
	if f := r.ForwardAuth; f != nil {
		switch {
		case f.Refuse:
			s.WriteString(" forward-auth(refuse)")
		case f.Backend != nil:
			fmt.Fprintf(&s, " forward-auth(%s %s%s", f.Backend.Name, f.Host, f.Path)
		default:
			fmt.Fprintf(&s, " forward-auth(%s", f.URL)
		}
		if !f.Refuse {
			fmt.Fprintf(&s, " timeout=%s", f.Timeout)
			if len(f.ResponseHeaders) > 0 {
				fmt.Fprintf(&s, " headers=%s", strings.Join(f.ResponseHeaders, ","))
			}
			if f.SignIn != "" {
				fmt.Fprintf(&s, " signin=%s", f.SignIn)
			}
			s.WriteString(")")
		}
	}
	if e := r.ErrorPages; e != nil {
		fmt.Fprintf(&s, " error-pages(%v -> %s)", e.Codes, e.Backend.Name)
	}
	return s.String()
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
