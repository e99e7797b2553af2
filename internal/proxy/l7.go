package proxy

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"sluice.dev/sluice/internal/route"
)

// Layer-7 filters and split backends of a route (issue 27): route.Filters
// and route.Split compiled into an l7View when a table is installed. A
// route without them has a nil routeView.l7, and the request path pays
// one nil check for the whole feature group.
//
// Order on the request path (ServeHTTP, then forward and respond):
// SSL redirect and HSTS; Filters.Redirect (answered here, no backend);
// the Split's choice of backend (header > cookie > weight); X-Forwarded-*
// headers; Filters.Rewrite (path, Host); Filters.RequestHeaders; and on
// the backend's response Filters.ResponseHeaders.

// l7View is the runtime form of a route's Filters and Split.
type l7View struct {
	redirect *route.Redirect
	// redirectPath is redirect.Path compiled against the route.
	redirectPath *pathRewrite
	// host replaces the Host sent upstream; "" keeps it.
	host string
	path *pathRewrite // nil keeps the path
	req  *route.HeaderFilter
	resp *route.HeaderFilter
	// set and add hold the header filters' values as shared one-element
	// slices (cap 1, so an append copies), by field of req.
	set, add [][]string
	split    *splitView
}

// pathRewrite is a compiled route.PathModifier.
type pathRewrite struct {
	typ    route.PathModifierType
	value  string
	prefix string         // ReplacePrefixMatch: the route's path, without trailing "/"
	re     *regexp.Regexp // ReplaceRegex
	// query is the part of a ReplaceRegex value after its "?", which
	// starts a new query ("" and hasQuery false: none).
	query    string
	hasQuery bool
}

// splitView is a compiled route.Split.
type splitView struct {
	cond     []condView
	weighted []weightView
	total    uint32
	sticky   string // cookie name; "" for none
}

type condView struct {
	header, cookie, value string
	rv                    *routeView
}

type weightView struct {
	weight uint32
	rv     *routeView
	// id is the sticky cookie's value naming this choice, setCookie the
	// Set-Cookie value that pins it.
	id, setCookie string
}

// attachL7 compiles rt's Filters and Split into rv. backend resolves a
// backend of the table; the split's alternatives become routeViews of
// their own (their metric labels are added to v.pairs).
func (p *Proxy) attachL7(v *view, rv *routeView, rt *route.Route, backend func(*route.Backend) *backendView) {
	if rt.Filters == nil && rt.Split == nil {
		return
	}
	l := &l7View{}
	if f := rt.Filters; f != nil {
		l.redirect = f.Redirect
		if f.Redirect != nil {
			l.redirectPath = compilePathRewrite(f.Redirect.Path, rt)
		}
		if rw := f.Rewrite; rw != nil {
			l.host = rw.Host
			l.path = compilePathRewrite(rw.Path, rt)
		}
		l.req, l.resp = f.RequestHeaders, f.ResponseHeaders
		if h := l.req; h != nil {
			for _, x := range h.Set {
				l.set = append(l.set, []string{x.Value})
			}
			for _, x := range h.Add {
				l.add = append(l.add, []string{x.Value})
			}
		}
	}
	rv.l7 = l
	if s := rt.Split; s != nil {
		sv := &splitView{sticky: s.StickyCookie}
		alt := func(be *route.Backend, ingress string) *routeView {
			a := p.routeView(backend(be), rt)
			a.ingress = ingress
			if l.redirect != nil || l.host != "" || l.path != nil || l.req != nil || l.resp != nil {
				c := *l
				c.split = nil
				a.l7 = &c
			}
			v.pairs[[2]string{a.ingress, a.service}] = struct{}{}
			return a
		}
		for _, c := range s.Conditional {
			sv.cond = append(sv.cond, condView{header: c.Match.Header, cookie: c.Match.Cookie, value: c.Match.Value, rv: alt(c.Backend, c.Ingress)})
		}
		for _, w := range s.Weighted {
			wv := weightView{weight: w.Weight, rv: alt(w.Backend, w.Ingress)}
			if s.StickyCookie != "" && w.Backend != nil {
				wv.id = affinityValue(w.Backend.Name)
				wv.setCookie = (&http.Cookie{Name: s.StickyCookie, Value: wv.id, Path: "/", HttpOnly: true}).String()
			}
			sv.total += w.Weight
			sv.weighted = append(sv.weighted, wv)
		}
		if sv.setCookieInvalid() {
			sv.sticky = ""
		}
		l.split = sv
	}
}

// setCookieInvalid: http.Cookie.String returns "" for an invalid name.
func (s *splitView) setCookieInvalid() bool {
	for _, w := range s.weighted {
		if s.sticky != "" && w.setCookie == "" {
			return true
		}
	}
	return false
}

func compilePathRewrite(m *route.PathModifier, rt *route.Route) *pathRewrite {
	if m == nil {
		return nil
	}
	pr := &pathRewrite{typ: m.Type, value: m.Value}
	switch m.Type {
	case route.ReplacePrefixMatch:
		pr.prefix = strings.TrimRight(rt.Path, "/")
		if rt.PathType == route.PathExact {
			pr.typ = route.ReplaceFullPath
		}
	case route.ReplaceRegex:
		re, err := route.CompilePath(m.Pattern)
		if err != nil {
			return nil // translation refuses such patterns
		}
		pr.re = re
		pr.value, pr.query, pr.hasQuery = strings.Cut(m.Value, "?")
	}
	return pr
}

// routeL7 runs the route-level part of rv's filters: it answers a
// redirect (done true), or returns the routeView of the backend the
// split chose (rv itself when none).
func (p *Proxy) routeL7(w http.ResponseWriter, r *http.Request, rv *routeView, start time.Time) (_ *routeView, done bool) {
	l := rv.l7
	if l.redirect != nil {
		p.redirect(w, r, rv, l, start)
		return rv, true
	}
	if l.split != nil {
		if alt := l.split.choose(w, r); alt != nil {
			return alt, false
		}
	}
	return rv, false
}

// choose returns the routeView for r: the first conditional entry whose
// header (or cookie) has its value, else a weighted choice (a valid
// sticky cookie's, or a random one, then pinned); nil for the route's own.
func (s *splitView) choose(w http.ResponseWriter, r *http.Request) *routeView {
	for i := range s.cond {
		c := &s.cond[i]
		if c.header != "" {
			if vals := r.Header[c.header]; len(vals) > 0 && vals[0] == c.value {
				return c.rv
			}
			continue
		}
		if ck, err := r.Cookie(c.cookie); err == nil && ck.Value == c.value {
			return c.rv
		}
	}
	if s.total == 0 {
		return nil
	}
	if s.sticky != "" {
		if ck, err := r.Cookie(s.sticky); err == nil {
			for i := range s.weighted {
				if wv := &s.weighted[i]; wv.id == ck.Value && wv.weight > 0 {
					return wv.rv
				}
			}
		}
	}
	n := rand.Uint32N(s.total)
	for i := range s.weighted {
		wv := &s.weighted[i]
		if n < wv.weight {
			if s.sticky != "" {
				w.Header()["Set-Cookie"] = append(w.Header()["Set-Cookie"], wv.setCookie)
			}
			return wv.rv
		}
		n -= wv.weight
	}
	return nil
}

// request applies the rewrite and request header filters to r, whose
// header rewriteRequestHeader already turned into the upstream's.
func (l *l7View) request(r *http.Request) {
	if l.host != "" {
		r.Host = l.host
	}
	if l.path != nil {
		l.path.apply(r)
	}
	if h := l.req; h != nil {
		hd := r.Header
		for _, k := range h.Remove {
			delete(hd, k)
		}
		for i, x := range h.Set {
			hd[x.Name] = l.set[i][:1:1]
		}
		for i, x := range h.Add {
			hd[x.Name] = append(hd[x.Name], l.add[i][0])
		}
	}
}

// response applies the response header filter to h, the header about to
// be written to the client.
func (l *l7View) response(h http.Header) {
	f := l.resp
	for _, k := range f.Remove {
		delete(h, k)
	}
	for _, x := range f.Set {
		h[x.Name] = []string{x.Value}
	}
	for _, x := range f.Add {
		h[x.Name] = append(h[x.Name], x.Value)
	}
}

// respHeaders returns the route's response header filter, nil for none.
func (rv *routeView) respHeaders() *l7View {
	if rv.l7 == nil || rv.l7.resp == nil {
		return nil
	}
	return rv.l7
}

// apply rewrites r.URL's path (and, for a regex value with "?", its
// query). The result is normalised as incoming paths are (path.go), so a
// rewrite cannot send dot segments upstream.
func (pr *pathRewrite) apply(r *http.Request) {
	np, ok := pr.rewrite(r.URL.Path)
	if !ok {
		return
	}
	if pr.hasQuery {
		q := pr.expandQuery(r.URL.Path)
		if r.URL.RawQuery != "" {
			if q != "" {
				q += "&"
			}
			q += r.URL.RawQuery
		}
		r.URL.RawQuery, r.URL.ForceQuery = q, false
	}
	r.URL.Path, r.URL.RawPath = np, ""
}

// rewrite returns the new (unescaped) path for path, and false when the
// rewrite does not apply (a regex that does not match).
func (pr *pathRewrite) rewrite(path string) (string, bool) {
	var np string
	switch pr.typ {
	case route.ReplaceFullPath:
		np = pr.value
	case route.ReplacePrefixMatch:
		rest := path
		if len(path) >= len(pr.prefix) {
			rest = path[len(pr.prefix):]
		}
		np = strings.TrimRight(pr.value, "/") + rest
	case route.ReplaceRegex:
		m := pr.re.FindStringSubmatchIndex(path)
		if m == nil {
			return "", false
		}
		np = string(pr.re.ExpandString(nil, pr.value, path, m))
	}
	if !strings.HasPrefix(np, "/") {
		np = "/" + np
	}
	if dirty, _ := scanPath(np, false); dirty {
		np = resolvePath(np)
	}
	return np, true
}

// expandQuery expands the query part of a regex value, escaping what a
// capture brought that a query may not carry.
func (pr *pathRewrite) expandQuery(path string) string {
	m := pr.re.FindStringSubmatchIndex(path)
	if m == nil {
		return ""
	}
	q := pr.re.ExpandString(nil, pr.query, path, m)
	var b strings.Builder
	for _, c := range q {
		if c <= ' ' || c >= 0x7f || c == '#' || c == '%' {
			b.WriteString("%" + strings.ToUpper(strconv.FormatUint(uint64(c>>4), 16)) + strings.ToUpper(strconv.FormatUint(uint64(c&15), 16)))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

var bodyMoved = []byte("sluice: moved\n")

// redirect answers r with rd.
func (p *Proxy) redirect(w http.ResponseWriter, r *http.Request, rv *routeView, l *l7View, start time.Time) {
	w.Header()["Location"] = []string{p.location(r, l.redirect, l.redirectPath)}
	n := writePlain(w, l.redirect.StatusCode, bodyMoved)
	p.record(r, rv, outcome{status: l.redirect.StatusCode, bytes: int64(n)}, start)
}

// location builds the Location of a redirect of r (Gateway API's
// RequestRedirect rules: parts left empty come from the request).
func (p *Proxy) location(r *http.Request, rd *route.Redirect, pr *pathRewrite) string {
	scheme := rd.Scheme
	if scheme == "" {
		scheme = "http"
		if p.viaHTTPS(r) {
			scheme = "https"
		}
	}
	host, port := r.Host, portOf(r.Host)
	if port != "" {
		host = host[:len(host)-len(port)-1]
	}
	if rd.Host != "" {
		host = rd.Host
	}
	switch {
	case rd.Port != 0:
		port = strconv.Itoa(rd.Port)
	case rd.Scheme != "":
		port = ""
	}
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	var b strings.Builder
	b.WriteString(scheme + "://" + host)
	if port != "" {
		b.WriteString(":" + port)
	}
	switch {
	case pr == nil:
		b.WriteString(r.URL.EscapedPath())
	case pr.typ == route.ReplaceFullPath:
		b.WriteString(pr.value) // checked at translation: escaped form
	default:
		np, ok := pr.rewrite(r.URL.Path)
		if !ok {
			np = r.URL.Path
		}
		b.WriteString((&url.URL{Path: np}).EscapedPath())
	}
	if !rd.DropQuery && r.URL.RawQuery != "" {
		b.WriteString("?" + r.URL.RawQuery)
	}
	return b.String()
}
