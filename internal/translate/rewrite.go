package translate

import (
	"net"
	"net/http"
	"net/url"
	"regexp/syntax"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"sluice.dev/sluice/internal/route"
)

// Path rewrite, redirect and header annotations (issue 27). Each has one
// typed parser; an invalid value is reported without quoting it and the
// feature is left off (never half applied). The result is a
// route.Filters per route (filters.go in internal/route), the fields
// Gateway API's HTTPRoute filters translate into as well.
const (
	// AnnotationRewriteTarget rewrites the path sent upstream. Without
	// AnnotationUseRegex the route's matched prefix is replaced by the
	// target ("/api" → "/v2": "/api/x" is sent as "/v2/x"). With it the
	// whole path is replaced by the target, in which $1..$9 are the
	// capture groups of the route's path regex (nginx's rewrite).
	AnnotationRewriteTarget = "sluice.dev/rewrite-target"
	// AnnotationUseRegex "true" makes the Prefix and ImplementationSpecific
	// paths of this Ingress RE2 regular expressions, matched from the start
	// of the request path, case-sensitively. Exact paths stay exact.
	AnnotationUseRegex = "sluice.dev/use-regex"
	// AnnotationAppRoot redirects requests for "/" of the Ingress's hosts
	// to this path with a 302.
	AnnotationAppRoot = "sluice.dev/app-root"
	// AnnotationPermanentRedirect answers every request of the Ingress
	// with a redirect to this http(s) URL; the code is
	// AnnotationPermanentRedirectCode, 301 (default) or 308.
	AnnotationPermanentRedirect     = "sluice.dev/permanent-redirect"
	AnnotationPermanentRedirectCode = "sluice.dev/permanent-redirect-code"
	// AnnotationTemporaryRedirect is the same with 302 (default) or 307
	// (AnnotationTemporaryRedirectCode). It wins over a permanent one, as
	// ingress-nginx's temporal-redirect does.
	AnnotationTemporaryRedirect     = "sluice.dev/temporary-redirect"
	AnnotationTemporaryRedirectCode = "sluice.dev/temporary-redirect-code"
	// Request and response header filters. Set and Add take one
	// "Name: value" per line; Remove a comma- or line-separated list of
	// names. Hop-by-hop and framing fields (Connection, Content-Length,
	// Transfer-Encoding, Host, ...) are refused.
	AnnotationRequestHeadersSet     = "sluice.dev/request-headers-set"
	AnnotationRequestHeadersAdd     = "sluice.dev/request-headers-add"
	AnnotationRequestHeadersRemove  = "sluice.dev/request-headers-remove"
	AnnotationResponseHeadersSet    = "sluice.dev/response-headers-set"
	AnnotationResponseHeadersAdd    = "sluice.dev/response-headers-add"
	AnnotationResponseHeadersRemove = "sluice.dev/response-headers-remove"
	// AnnotationUpstreamVhost is the Host header sent upstream (a DNS name
	// or IP address, optionally with a port); X-Forwarded-Host keeps the
	// client's.
	AnnotationUpstreamVhost = "sluice.dev/upstream-vhost"
	// AnnotationXForwardedPrefix sets X-Forwarded-Prefix on requests sent
	// upstream (a path, e.g. the prefix a rewrite removed).
	AnnotationXForwardedPrefix = "sluice.dev/x-forwarded-prefix"
)

// Limits of the L7 annotations.
const (
	// MaxRegexLen bounds a regex path's length and maxRegexInsts its
	// compiled program: Go's regexp is linear in the input, but a large
	// program still costs per request.
	MaxRegexLen   = 512
	maxRegexInsts = 4096
	// maxL7Value bounds paths, URLs and header values.
	maxL7Value = 2048
	// maxHeaders bounds the fields of one header annotation.
	maxHeaders = 32
)

// l7Annotations are the parsed rewrite, redirect and header annotations
// of one Ingress.
type l7Annotations struct {
	// regex: the Ingress's Prefix paths are regular expressions;
	// foldCase makes them case-insensitive (ingress-nginx's "~*").
	regex, foldCase bool
	rewrite         string // the target, "" for none; ${N} form when regex
	appRoot         string
	redirect        *route.Redirect
	reqHeaders      *route.HeaderFilter
	respHeaders     *route.HeaderFilter
	upstreamHost    string
}

// parseL7 reads the L7 annotations of one Ingress. nginx selects
// ingress-nginx's semantics (a rewrite-target makes the paths regular
// expressions, which are case-insensitive).
func parseL7(ann map[string]string, nginx bool) (l7Annotations, []annotationError) {
	var a l7Annotations
	var errs []annotationError
	fail := func(key, msg string) { errs = append(errs, annotationError{key, msg}) }

	if v, ok := ann[AnnotationUseRegex]; ok {
		b, valid := parseBool(v)
		if !valid {
			fail(AnnotationUseRegex, `must be "true" or "false"; paths are not regular expressions`)
		}
		a.regex = b
	}
	if v, ok := ann[AnnotationRewriteTarget]; ok {
		if nginx {
			a.regex = true
		}
		t, msg := parseRewriteTarget(v, a.regex)
		if msg != "" {
			fail(AnnotationRewriteTarget, msg+"; the path is sent as it is")
		}
		a.rewrite = t
	}
	a.foldCase = a.regex && nginx
	if v, ok := ann[AnnotationAppRoot]; ok {
		p, valid := parsePathValue(v)
		if !valid || p == "/" {
			fail(AnnotationAppRoot, `must be an absolute path other than "/" without spaces or control characters; no app-root redirect`)
		} else {
			a.appRoot = p
		}
	}
	a.redirect, errs = parseRedirects(ann, errs)
	var e []annotationError
	a.reqHeaders, e = parseHeaderFilter(ann, AnnotationRequestHeadersSet, AnnotationRequestHeadersAdd, AnnotationRequestHeadersRemove)
	errs = append(errs, e...)
	a.respHeaders, e = parseHeaderFilter(ann, AnnotationResponseHeadersSet, AnnotationResponseHeadersAdd, AnnotationResponseHeadersRemove)
	errs = append(errs, e...)
	if v, ok := ann[AnnotationUpstreamVhost]; ok {
		h, valid := parseHostPort(v)
		if !valid {
			fail(AnnotationUpstreamVhost, "must be a DNS name or IP address, optionally with :port; the Host header of the client is sent")
		}
		a.upstreamHost = h
	}
	if v, ok := ann[AnnotationXForwardedPrefix]; ok {
		v = strings.TrimSpace(v)
		if v == "" || len(v) > maxL7Value || !httpguts.ValidHeaderFieldValue(v) {
			fail(AnnotationXForwardedPrefix, "must be a header value (a path such as /api); not set")
		} else {
			if a.reqHeaders == nil {
				a.reqHeaders = &route.HeaderFilter{}
			}
			a.reqHeaders.Set = append(a.reqHeaders.Set, route.Header{Name: "X-Forwarded-Prefix", Value: v})
		}
	}
	return a, errs
}

// pathType is the route type of a Prefix path of the Ingress: PathRegex
// when its paths are regular expressions.
func (a *l7Annotations) pathType(pt route.PathType) route.PathType {
	if a.regex && pt == route.PathPrefix {
		return route.PathRegex
	}
	return pt
}

// regexPath returns the route path of a regex path p (with "(?i)" when
// case-insensitive) and "" if p is not a valid, bounded expression.
func (a *l7Annotations) regexPath(p string) (string, string) {
	if a.foldCase {
		p = "(?i)" + p
	}
	if msg := checkRegex(p); msg != "" {
		return "", msg
	}
	return p, ""
}

// checkRegex reports why pattern cannot be a regex path, "" if it can.
func checkRegex(pattern string) string {
	if len(pattern) > MaxRegexLen {
		return "a regular expression path must be at most 512 bytes"
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "not a valid RE2 regular expression"
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil || len(prog.Inst) > maxRegexInsts {
		return "the regular expression is too large"
	}
	if _, err := route.CompilePath(pattern); err != nil {
		return "not a valid RE2 regular expression"
	}
	return ""
}

// filters returns the route.Filters of one route of the Ingress (its
// type and path as the table has them), nil when it has none.
func (a *l7Annotations) filters(pt route.PathType, path string) *route.Filters {
	if a.redirect == nil && a.rewrite == "" && a.reqHeaders == nil && a.respHeaders == nil && a.upstreamHost == "" {
		return nil
	}
	f := &route.Filters{Redirect: a.redirect, RequestHeaders: a.reqHeaders, ResponseHeaders: a.respHeaders}
	if a.rewrite != "" || a.upstreamHost != "" {
		f.Rewrite = &route.Rewrite{Host: a.upstreamHost}
		switch {
		case a.rewrite == "":
		case pt == route.PathRegex:
			f.Rewrite.Path = &route.PathModifier{Type: route.ReplaceRegex, Pattern: path, Value: a.rewrite}
		case a.regex:
			// An Exact path of a regex Ingress: nginx still rewrites
			// with it as the pattern.
			if checkRegex(path) == "" {
				f.Rewrite.Path = &route.PathModifier{Type: route.ReplaceRegex, Pattern: path, Value: a.rewrite}
			}
		default:
			f.Rewrite.Path = &route.PathModifier{Type: route.ReplacePrefixMatch, Value: a.rewrite}
		}
	}
	return f
}

// parsePathValue accepts an absolute path of printable ASCII without
// spaces, backslashes, "?" or "#".
func parsePathValue(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "/") || len(v) > maxL7Value {
		return "", false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c > '~' || c == '\\' || c == '?' || c == '#' {
			return "", false
		}
	}
	return v, true
}

// parseRewriteTarget checks a rewrite target. With regex, $1..$9 (or
// ${1}..${9}) name capture groups and are returned in the ${N} form Go's
// regexp expands ("$1x" would otherwise name a group "1x"); without, a
// "$" is refused. A "?" starts a new query (regex only). The message is
// "" when valid.
func parseRewriteTarget(v string, regex bool) (string, string) {
	v = strings.TrimSpace(v)
	const bad = "must be a path (beginning with / or a capture group $1..$9) of printable characters"
	if v == "" || len(v) > maxL7Value {
		return "", bad
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c > '~' || c == '\\' || c == '#' || (!regex && c == '?') {
			return "", bad
		}
		if c != '$' {
			b.WriteByte(c)
			continue
		}
		if !regex {
			return "", "capture groups ($1) need " + AnnotationUseRegex + ": \"true\""
		}
		switch {
		case i+1 < len(v) && v[i+1] >= '0' && v[i+1] <= '9':
			b.WriteString("${" + v[i+1:i+2] + "}")
			i++
		case i+3 < len(v) && v[i+1] == '{' && v[i+2] >= '0' && v[i+2] <= '9' && v[i+3] == '}':
			b.WriteString(v[i : i+4])
			i += 3
		default:
			return "", "only capture groups $1..$9 may follow a $ (no nginx variables)"
		}
	}
	t := b.String()
	if !strings.HasPrefix(t, "/") && !strings.HasPrefix(t, "${") {
		return "", bad
	}
	return t, ""
}

// parseRedirects reads the permanent and temporary redirect annotations.
func parseRedirects(ann map[string]string, errs []annotationError) (*route.Redirect, []annotationError) {
	var out *route.Redirect
	for _, r := range []struct {
		key, codeKey string
		codes        []int
		msg          string
	}{
		{AnnotationTemporaryRedirect, AnnotationTemporaryRedirectCode, []int{302, 307}, "must be 302 or 307"},
		{AnnotationPermanentRedirect, AnnotationPermanentRedirectCode, []int{301, 308}, "must be 301 or 308"},
	} {
		v, set := ann[r.key]
		cv, codeSet := ann[r.codeKey]
		if !set {
			if codeSet {
				errs = append(errs, annotationError{r.codeKey, "has no effect without " + r.key})
			}
			continue
		}
		rd, ok := parseRedirectURL(v)
		if !ok {
			errs = append(errs, annotationError{r.key, "must be an absolute http or https URL without user, query or fragment; no redirect"})
			continue
		}
		rd.StatusCode = r.codes[0]
		if codeSet {
			n, err := strconv.Atoi(strings.TrimSpace(cv))
			if err != nil || (n != r.codes[0] && n != r.codes[1]) {
				errs = append(errs, annotationError{r.codeKey, r.msg + "; using " + strconv.Itoa(r.codes[0])})
			} else {
				rd.StatusCode = n
			}
		}
		if out != nil {
			errs = append(errs, annotationError{r.key, "ignored because " + AnnotationTemporaryRedirect + " is set"})
			continue
		}
		out = rd
	}
	return out, errs
}

// parseRedirectURL accepts an absolute http(s) URL with a host, without
// user information, query or fragment.
func parseRedirectURL(v string) (*route.Redirect, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > maxL7Value {
		return nil, false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c > '~' || c == '\\' {
			return nil, false
		}
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.RawQuery != "" ||
		u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return nil, false
	}
	host, ok := parseHostPort(u.Host)
	if !ok {
		return nil, false
	}
	rd := &route.Redirect{Scheme: u.Scheme, DropQuery: true}
	rd.Host = host
	if h, port, err := net.SplitHostPort(host); err == nil {
		n, _ := strconv.Atoi(port)
		rd.Host, rd.Port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), n
		if strings.Contains(rd.Host, ":") {
			rd.Host = "[" + rd.Host + "]"
		}
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	rd.Path = &route.PathModifier{Type: route.ReplaceFullPath, Value: path}
	return rd, true
}

// parseHostPort accepts a DNS name (lower-cased) or an IP address,
// optionally with a port from 1 to 65535; IPv6 in brackets.
func parseHostPort(v string) (string, bool) {
	v = strings.ToLower(strings.TrimSpace(v))
	if v == "" || len(v) > 260 {
		return "", false
	}
	host, port := v, ""
	if h, p, err := net.SplitHostPort(v); err == nil {
		host, port = h, p
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
			return "", false
		}
	} else if strings.HasPrefix(v, "[") {
		host = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
		if strings.Contains(v[1:], "[") || !strings.HasSuffix(v, "]") {
			return "", false
		}
	}
	switch {
	case net.ParseIP(host) != nil:
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	case !isDNS1123Subdomain(host):
		return "", false
	}
	if port != "" {
		return host + ":" + port, true
	}
	return host, true
}

// forbiddenFilterHeaders are the fields a header annotation may not
// touch: hop-by-hop fields, the message framing and Host (which has its
// own annotation).
var forbiddenFilterHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Content-Length": true, "Host": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true,
}

// parseHeaderFilter reads one Set/Add/Remove triple of annotations; nil
// when none is set or valid.
func parseHeaderFilter(ann map[string]string, setKey, addKey, removeKey string) (*route.HeaderFilter, []annotationError) {
	var f route.HeaderFilter
	var errs []annotationError
	if v, ok := ann[setKey]; ok {
		hs, msg := parseHeaderLines(v)
		if msg != "" {
			errs = append(errs, annotationError{setKey, msg + "; no header is set"})
		}
		f.Set = hs
	}
	if v, ok := ann[addKey]; ok {
		hs, msg := parseHeaderLines(v)
		if msg != "" {
			errs = append(errs, annotationError{addKey, msg + "; no header is added"})
		}
		f.Add = hs
	}
	if v, ok := ann[removeKey]; ok {
		names, msg := parseHeaderNames(v)
		if msg != "" {
			errs = append(errs, annotationError{removeKey, msg + "; no header is removed"})
		}
		f.Remove = names
	}
	if f.Set == nil && f.Add == nil && f.Remove == nil {
		return nil, errs
	}
	return &f, errs
}

// parseHeaderLines parses "Name: value" lines; all or nothing.
func parseHeaderLines(v string) ([]route.Header, string) {
	const bad = `must be one "Name: value" per line (at most 32; names of token characters, not hop-by-hop, framing or Host fields; values without control characters)`
	var out []route.Header
	for _, line := range strings.Split(v, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, bad
		}
		n, ok := headerName(name)
		value = strings.TrimSpace(value)
		if !ok || len(value) > maxL7Value || !httpguts.ValidHeaderFieldValue(value) || len(out) == maxHeaders {
			return nil, bad
		}
		out = append(out, route.Header{Name: n, Value: value})
	}
	if len(out) == 0 {
		return nil, bad
	}
	return out, ""
}

// parseHeaderNames parses a comma- or line-separated list of names.
func parseHeaderNames(v string) ([]string, string) {
	const bad = "must be a comma-separated list of at most 32 header names (not hop-by-hop, framing or Host fields)"
	var out []string
	for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '\n' }) {
		if strings.TrimSpace(s) == "" {
			continue
		}
		n, ok := headerName(s)
		if !ok || len(out) == maxHeaders {
			return nil, bad
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, bad
	}
	return out, ""
}

// headerName canonicalises a header name a filter may use.
func headerName(s string) (string, bool) {
	t, ok := parseToken(s)
	if !ok {
		return "", false
	}
	n := http.CanonicalHeaderKey(t)
	return n, !forbiddenFilterHeaders[n]
}
