package route

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Request conditions of a route (Gateway API's HTTPRouteMatch method,
// headers and queryParams). Several routes of a virtual host may have the
// same type and path and differ in their Conditions: New keeps them all,
// in Config order, as one group, and MatchRequest tries them in that
// order. Translation orders them by the Gateway API precedence (method,
// then most header matches, then most query parameter matches, then the
// oldest route). A route without Conditions ends its group: routes after
// it on the same path are never reached.
//
// When no route of a group accepts the request, matching continues with
// the next less specific path (a shorter prefix), as the specification
// asks: a rule is chosen among all those that match the request.
//
// A Table without Conditions costs the request path nothing: Match
// returns a route, and only a route with Conditions sends the proxy to
// MatchRequest.

// Conditions restrict a route to the requests that satisfy all of them.
type Conditions struct {
	// Method is an upper-case HTTP method; "" matches every method.
	Method string
	// Headers: each named field must have the value. Names are canonical
	// (net/http.CanonicalHeaderKey) and distinct. A field sent several
	// times is matched as its values joined with "," (RFC 9110 5.3).
	Headers []ValueMatch
	// Query: each named parameter's first value must match. Names are
	// case-sensitive and distinct.
	Query []ValueMatch
}

// ValueMatch compares the value of a named header field or query
// parameter.
type ValueMatch struct {
	Name string
	// Value is the exact value, or with Regex an RE2 expression that must
	// match the whole value.
	Value string
	Regex bool
}

// CompileValue compiles a ValueMatch regular expression as the table
// matches it: against the whole value. The pattern must compile alone
// first, so that it cannot close the anchoring group.
func CompileValue(pattern string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, err
	}
	return regexp.Compile("^(?:" + pattern + ")$")
}

// condMatcher is a compiled Conditions.
type condMatcher struct {
	r       *Route
	method  string
	headers []valueMatcher
	query   []valueMatcher
	broken  bool // a pattern did not compile: never matches
}

type valueMatcher struct {
	name, value string
	re          *regexp.Regexp
}

func (m *valueMatcher) ok(v string) bool {
	if m.re != nil {
		return m.re.MatchString(v)
	}
	return v == m.value
}

func compileConditions(r *Route) *condMatcher {
	m := &condMatcher{r: r}
	c := r.Conditions
	if c == nil {
		return m
	}
	m.method = c.Method
	compile := func(vs []ValueMatch, canonical bool) []valueMatcher {
		var out []valueMatcher
		for _, v := range vs {
			vm := valueMatcher{name: v.Name, value: v.Value}
			if canonical {
				vm.name = http.CanonicalHeaderKey(v.Name)
			}
			if v.Regex {
				re, err := CompileValue(v.Value)
				if err != nil {
					m.broken = true
					continue
				}
				vm.re = re
			}
			out = append(out, vm)
		}
		return out
	}
	m.headers = compile(c.Headers, true)
	m.query = compile(c.Query, false)
	return m
}

// match reports whether r satisfies the conditions; q caches r's parsed
// query between the matchers of one request.
func (m *condMatcher) match(r *http.Request, q *url.Values) bool {
	if m.broken || m.method != "" && r.Method != m.method {
		return false
	}
	for i := range m.headers {
		h := &m.headers[i]
		vals, ok := r.Header[h.name]
		if !ok {
			return false
		}
		v := ""
		if len(vals) == 1 {
			v = vals[0]
		} else {
			v = strings.Join(vals, ",")
		}
		if !h.ok(v) {
			return false
		}
	}
	if len(m.query) > 0 {
		if *q == nil {
			*q, _ = url.ParseQuery(r.URL.RawQuery) // a malformed pair is left out
			if *q == nil {
				*q = url.Values{}
			}
		}
		for i := range m.query {
			p := &m.query[i]
			vals := (*q)[p.name]
			if len(vals) == 0 || !p.ok(vals[0]) {
				return false
			}
		}
	}
	return true
}

// addAlternative adds r, of the same type and path as head (the route the
// vhost's map holds), to head's group.
func (v *vhost) addAlternative(head, r *Route) {
	if head.Conditions == nil {
		return // head takes every request: r is unreachable
	}
	g := v.groups[head]
	if last := g[len(g)-1]; last.r.Conditions == nil {
		return
	}
	v.groups[head] = append(g, compileConditions(r))
}

// addHead starts the group of a route the vhost's map holds, if it has
// Conditions.
func (v *vhost) addHead(r *Route) {
	if r.Conditions == nil {
		return
	}
	if v.groups == nil {
		v.groups = make(map[*Route][]*condMatcher)
	}
	v.groups[r] = []*condMatcher{compileConditions(r)}
}

// pick returns the route of rt's group that accepts req, nil for none.
func (v *vhost) pick(rt *Route, req *http.Request, q *url.Values) *Route {
	if rt.Conditions == nil {
		return rt
	}
	for _, m := range v.groups[rt] {
		if m.r.Conditions == nil || m.match(req, q) {
			return m.r
		}
	}
	return nil
}

// MatchRequest is Match for a request whose matched route has Conditions:
// it returns the most specific route whose path matches and whose
// conditions req satisfies (the default route, or nil, when none). path
// is the normalised path Match was given.
func (t *Table) MatchRequest(host, path string, req *http.Request) *Route {
	if v := t.vhostOf(canonicalHost(host)); v != nil {
		if r := v.matchRequest(path, req); r != nil {
			return r
		}
	}
	return t.defaultRt
}

func (v *vhost) matchRequest(path string, req *http.Request) *Route {
	var q url.Values
	if r := v.exact[path]; r != nil {
		if x := v.pick(r, req, &q); x != nil {
			return x
		}
	}
	for i := range v.regex {
		if x := &v.regex[i]; x.re.MatchString(path) {
			if y := v.pickRegex(x, req, &q); y != nil {
				return y
			}
		}
	}
	if len(v.prefixes) == 0 {
		return nil
	}
	s := strings.TrimRight(path, "/")
	for {
		if r := v.prefixes[s]; r != nil {
			if x := v.pick(r, req, &q); x != nil {
				return x
			}
		}
		i := strings.LastIndexByte(s, '/')
		if i < 0 {
			return nil
		}
		s = s[:i]
	}
}

func (v *vhost) pickRegex(x *regexRoute, req *http.Request, q *url.Values) *Route {
	if x.r.Conditions == nil {
		return x.r
	}
	if x.cond == nil {
		return nil
	}
	if x.cond.match(req, q) {
		return x.r
	}
	return nil
}

// dumpConditions describes a route's conditions and mirrors for
// Dump, "" for none.
func dumpConditions(r Route) string {
	var b strings.Builder
	if c := r.Conditions; c != nil {
		var parts []string
		if c.Method != "" {
			parts = append(parts, "method="+c.Method)
		}
		vm := func(kind string, vs []ValueMatch) {
			for _, v := range vs {
				op := "="
				if v.Regex {
					op = "~"
				}
				parts = append(parts, fmt.Sprintf("%s %s%s%q", kind, v.Name, op, v.Value))
			}
		}
		vm("header", c.Headers)
		vm("query", c.Query)
		b.WriteString(" when(" + strings.Join(parts, " ") + ")")
	}
	for _, m := range r.Mirrors {
		b.WriteString(" mirror(" + backendName(m) + ")")
	}
	return b.String()
}
