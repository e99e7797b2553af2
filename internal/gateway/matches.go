package gateway

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"

	"golang.org/x/net/http/httpguts"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/route"
)

// Header, query parameter and method matches of an HTTPRoute become
// route.Conditions. Header names are compared case-insensitively, query
// parameter names exactly; of several entries with the same name only the
// first counts (the specification). RegularExpression values are RE2,
// matched against the whole value.

// Bounds of what a match may hold (the API's own limits, and one on
// patterns so a tenant cannot make the proxy compile huge expressions).
const (
	maxMatchValues  = 16
	maxHeaderValue  = 4096
	maxQueryValue   = 1024
	maxValuePattern = 1024
)

// conditionsOf returns the route.Conditions of a match (nil when it has
// no header, query or method match), or why it cannot be served.
func conditionsOf(m *gatewayv1.HTTPRouteMatch) (*route.Conditions, string) {
	if len(m.Headers) == 0 && len(m.QueryParams) == 0 && m.Method == nil {
		return nil, ""
	}
	c := &route.Conditions{}
	if m.Method != nil {
		meth := string(*m.Method)
		if !validMethod(meth) {
			return nil, fmt.Sprintf("method %q is not supported", truncate(meth, 20))
		}
		c.Method = meth
	}
	if len(m.Headers) > maxMatchValues || len(m.QueryParams) > maxMatchValues {
		return nil, fmt.Sprintf("at most %d header and %d query parameter matches are supported", maxMatchValues, maxMatchValues)
	}
	for i, h := range m.Headers {
		name := string(h.Name)
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Sprintf("headers[%d]: name %q is not a valid header name", i, truncate(name, 80))
		}
		name = http.CanonicalHeaderKey(name)
		if slices.ContainsFunc(c.Headers, func(v route.ValueMatch) bool { return v.Name == name }) {
			continue // only the first entry of a name counts
		}
		regex, why := matchType(h.Type, gatewayv1.HeaderMatchExact, gatewayv1.HeaderMatchRegularExpression)
		if why == "" {
			why = checkValue(h.Value, maxHeaderValue, regex)
		}
		if why != "" {
			return nil, fmt.Sprintf("headers[%d]: %s", i, why)
		}
		c.Headers = append(c.Headers, route.ValueMatch{Name: name, Value: h.Value, Regex: regex})
	}
	for i, q := range m.QueryParams {
		name := string(q.Name)
		if name == "" || len(name) > 256 || !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Sprintf("queryParams[%d]: name %q is not valid", i, truncate(name, 80))
		}
		if slices.ContainsFunc(c.Query, func(v route.ValueMatch) bool { return v.Name == name }) {
			continue
		}
		var typ *gatewayv1.HeaderMatchType
		if q.Type != nil {
			typ = ptr(gatewayv1.HeaderMatchType(*q.Type))
		}
		regex, why := matchType(typ, gatewayv1.HeaderMatchExact, gatewayv1.HeaderMatchRegularExpression)
		if why == "" {
			why = checkValue(q.Value, maxQueryValue, regex)
		}
		if why != "" {
			return nil, fmt.Sprintf("queryParams[%d]: %s", i, why)
		}
		c.Query = append(c.Query, route.ValueMatch{Name: name, Value: q.Value, Regex: regex})
	}
	return c, ""
}

func matchType(t *gatewayv1.HeaderMatchType, exact, regex gatewayv1.HeaderMatchType) (bool, string) {
	switch {
	case t == nil || *t == exact:
		return false, ""
	case *t == regex:
		return true, ""
	}
	return false, fmt.Sprintf("match type %q is not supported (Exact and RegularExpression are)", truncate(string(*t), 40))
}

// checkValue: a value of printable characters (tabs and spaces allowed
// inside), at most max bytes; a pattern must compile.
func checkValue(v string, max int, regex bool) string {
	switch {
	case v == "":
		return "value is empty"
	case len(v) > max:
		return fmt.Sprintf("value is longer than %d bytes", max)
	case !httpguts.ValidHeaderFieldValue(v):
		return "value has a control character"
	}
	if regex {
		if len(v) > maxValuePattern {
			return fmt.Sprintf("pattern is longer than %d bytes", maxValuePattern)
		}
		if _, err := route.CompileValue(v); err != nil {
			return fmt.Sprintf("pattern %q does not compile: %v", truncate(v, 80), err)
		}
	}
	return ""
}

func validMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace, http.MethodPatch:
		return true
	}
	return false
}

// specificity orders rules of the same host and path by the
// specification's precedence after the path: a method match, then more
// header matches, then more query parameter matches. Equal ones keep
// their order (oldest route, then namespace/name, then rule order).
func specificity(a, b Rule) int {
	ca, cb := a.Conditions, b.Conditions
	if ca == nil || cb == nil {
		switch {
		case ca == nil && cb == nil:
			return 0
		case ca == nil:
			return 1
		}
		return -1
	}
	return cmp.Or(
		-cmp.Compare(boolInt(ca.Method != ""), boolInt(cb.Method != "")),
		-cmp.Compare(len(ca.Headers), len(cb.Headers)),
		-cmp.Compare(len(ca.Query), len(cb.Query)),
	)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
