package route

// Layer-7 filters and split backends of a route (issue 27). They are
// written neutrally so that both translations fill the same fields: the
// Ingress annotations (sluice.dev/* and, with --ingress-nginx-compat,
// nginx.ingress.kubernetes.io/*) and Gateway API's HTTPRoute filters
// (RequestHeaderModifier → Filters.RequestHeaders, ResponseHeaderModifier
// → Filters.ResponseHeaders, RequestRedirect → Filters.Redirect,
// URLRewrite → Filters.Rewrite) and its weighted backendRefs and header
// matches (Split). A nil pointer means "none": a route without L7
// features costs the proxy one nil check.

import (
	"fmt"
	"strings"
)

// Filters change a request on its way to the backend, or answer it with a
// redirect instead. The proxy applies them in this order: Redirect (no
// backend is asked), then Rewrite and RequestHeaders on the request, then
// ResponseHeaders on the backend's response. X-Forwarded-* headers are
// set before the request filters run, so a filter may set one.
type Filters struct {
	// RequestHeaders modify the request sent to the backend; nil: none.
	RequestHeaders *HeaderFilter
	// ResponseHeaders modify the backend's response (not the proxy's own
	// answers, such as 502); nil: none.
	ResponseHeaders *HeaderFilter
	// Redirect answers every request of the route with a redirect; nil:
	// none. Rewrite and the header filters do not apply to it.
	Redirect *Redirect
	// Rewrite changes the path or the Host sent to the backend; nil: none.
	Rewrite *Rewrite
}

// HeaderFilter edits header fields. Names are in canonical form
// (net/http.CanonicalHeaderKey) and valid; values have no CR, LF or NUL.
// Translation refuses hop-by-hop and framing fields (Connection,
// Content-Length, Transfer-Encoding, Host, ...). Remove runs first, then
// Set, then Add.
type HeaderFilter struct {
	// Set replaces every value of the field with Value.
	Set []Header
	// Add appends Value to the field's values.
	Add []Header
	// Remove deletes the fields.
	Remove []string
}

// Header is one header field.
type Header struct {
	Name  string
	Value string
}

// Redirect describes where a redirect points and with which status. Parts
// left empty are taken from the request (Gateway API's RequestRedirect).
type Redirect struct {
	// Scheme is "http" or "https"; "" keeps the request's.
	Scheme string
	// Host is a host name without port; "" keeps the request's.
	Host string
	// Port of the Location; 0 means: the scheme's default port (omitted)
	// when Scheme is set, else the request's port.
	Port int
	// Path rewrites the request path into the Location's; nil keeps it.
	Path *PathModifier
	// StatusCode is 301, 302, 303, 307 or 308.
	StatusCode int
	// DropQuery leaves the request's query out of the Location (a redirect
	// to a fixed URL, as nginx's "return 301 URL" does).
	DropQuery bool
}

// Rewrite changes what the backend is asked for.
type Rewrite struct {
	// Host is sent upstream as the Host header instead of the client's
	// (ingress-nginx's upstream-vhost, Gateway API's URLRewrite hostname);
	// "" keeps the client's. X-Forwarded-Host keeps the client's.
	Host string
	// Path rewrites the request path; nil keeps it.
	Path *PathModifier
}

// PathModifierType says how a PathModifier changes a path.
type PathModifierType uint8

const (
	// ReplaceFullPath replaces the whole path with Value.
	ReplaceFullPath PathModifierType = iota
	// ReplacePrefixMatch replaces the route's matched Path prefix (element
	// wise, as Prefix routes match) with Value: "/api" → "/v2" turns
	// "/api/x" into "/v2/x", and "/api" → "/" turns it into "/x". On an
	// Exact route the whole path is replaced.
	ReplacePrefixMatch
	// ReplaceRegex matches Pattern against the path, anchored at its
	// start, and replaces the whole path with Value in which ${1}..${9}
	// (and ${name}) stand for the capture groups (nginx's rewrite). A path
	// the pattern does not match is left alone. A "?" in the result starts
	// a new query, to which the request's query is appended.
	ReplaceRegex
)

var pathModifierNames = [...]string{"full", "prefix", "regex"}

func (t PathModifierType) String() string {
	if int(t) < len(pathModifierNames) {
		return pathModifierNames[t]
	}
	return "unknown"
}

// PathModifier rewrites a request path. Translation checks Value (an
// absolute path, no control characters) and compiles Pattern with a size
// bound.
type PathModifier struct {
	Type  PathModifierType
	Value string
	// Pattern is the RE2 expression of ReplaceRegex ("" otherwise).
	Pattern string
}

// Split sends a route's requests to other backends than Route.Backend:
// conditionally (a header or cookie value, Gateway API header matches,
// ingress-nginx canary-by-header/cookie) and by weight (canary-weight,
// weighted backendRefs). Precedence: the first matching Conditional
// entry, then Weighted.
type Split struct {
	// Conditional entries are tried in order; the first whose Match the
	// request satisfies takes it.
	Conditional []ConditionalBackend
	// Weighted, when not empty, divides the requests no Conditional entry
	// took in proportion to Weight. Route.Backend is listed here when it
	// gets a share. Empty (or every weight 0): Route.Backend.
	Weighted []WeightedBackend
	// StickyCookie, when not "", names a cookie that pins a client to its
	// weighted choice (while that backend's weight is above 0); the proxy
	// sets it on the first answer.
	StickyCookie string
}

// ConditionalBackend sends the requests that satisfy Match to Backend.
type ConditionalBackend struct {
	Match   RequestMatch
	Backend *Backend
	// Ingress (or route) that asked for it, "namespace/name", for metrics.
	Ingress string
}

// RequestMatch is satisfied by a request whose header field Header (or,
// when Header is "", whose cookie Cookie) has exactly the value Value.
type RequestMatch struct {
	// Header is a canonical header name; "" when the match is on a cookie.
	Header string
	// Cookie is a cookie name; used when Header is "".
	Cookie string
	Value  string
}

// WeightedBackend is one share of a Split.
type WeightedBackend struct {
	Backend *Backend
	Weight  uint32
	// Ingress (or route) that asked for it, "namespace/name", for metrics.
	Ingress string
}

// dumpL7 describes a route's filters and split for Dump, "" for none.
func dumpL7(r Route) string {
	var b strings.Builder
	if f := r.Filters; f != nil {
		if rd := f.Redirect; rd != nil {
			fmt.Fprintf(&b, " redirect(%d", rd.StatusCode)
			if rd.Scheme != "" {
				b.WriteString(" scheme=" + rd.Scheme)
			}
			if rd.Host != "" {
				b.WriteString(" host=" + rd.Host)
			}
			if rd.Port != 0 {
				fmt.Fprintf(&b, " port=%d", rd.Port)
			}
			if rd.Path != nil {
				b.WriteString(" path=" + dumpPathModifier(rd.Path))
			}
			if rd.DropQuery {
				b.WriteString(" drop-query")
			}
			b.WriteString(")")
		}
		if rw := f.Rewrite; rw != nil {
			b.WriteString(" rewrite(")
			var parts []string
			if rw.Host != "" {
				parts = append(parts, "host="+rw.Host)
			}
			if rw.Path != nil {
				parts = append(parts, "path="+dumpPathModifier(rw.Path))
			}
			b.WriteString(strings.Join(parts, " ") + ")")
		}
		dumpHeaders(&b, "request-headers", f.RequestHeaders)
		dumpHeaders(&b, "response-headers", f.ResponseHeaders)
	}
	if s := r.Split; s != nil {
		b.WriteString(" split(")
		var parts []string
		for _, c := range s.Conditional {
			m := "header " + c.Match.Header
			if c.Match.Header == "" {
				m = "cookie " + c.Match.Cookie
			}
			parts = append(parts, fmt.Sprintf("%s=%q -> %s", m, c.Match.Value, backendName(c.Backend)))
		}
		for _, w := range s.Weighted {
			parts = append(parts, fmt.Sprintf("%d -> %s", w.Weight, backendName(w.Backend)))
		}
		if s.StickyCookie != "" {
			parts = append(parts, "sticky="+s.StickyCookie)
		}
		b.WriteString(strings.Join(parts, "; ") + ")")
	}
	return b.String()
}

func dumpPathModifier(m *PathModifier) string {
	if m.Type == ReplaceRegex {
		return fmt.Sprintf("regex(%q->%q)", m.Pattern, m.Value)
	}
	return fmt.Sprintf("%s(%q)", m.Type, m.Value)
}

func dumpHeaders(b *strings.Builder, what string, h *HeaderFilter) {
	if h == nil {
		return
	}
	b.WriteString(" " + what + "(")
	var parts []string
	for _, x := range h.Remove {
		parts = append(parts, "-"+x)
	}
	for _, x := range h.Set {
		parts = append(parts, fmt.Sprintf("%s=%q", x.Name, x.Value))
	}
	for _, x := range h.Add {
		parts = append(parts, fmt.Sprintf("+%s=%q", x.Name, x.Value))
	}
	b.WriteString(strings.Join(parts, " ") + ")")
}

// splitBackends lists the backends of r's Split, for Dump.
func splitBackends(r *Route) []*Backend {
	if r.Split == nil {
		return nil
	}
	var out []*Backend
	for _, c := range r.Split.Conditional {
		out = append(out, c.Backend)
	}
	for _, w := range r.Split.Weighted {
		out = append(out, w.Backend)
	}
	return out
}
