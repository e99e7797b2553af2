package gateway

import (
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/route"
)

// HTTPRoute rule filters become route.Filters (RequestHeaderModifier,
// ResponseHeaderModifier, RequestRedirect, URLRewrite) and mirror
// backends (RequestMirror). What cannot be served leaves the whole rule
// out with UnsupportedValue: a rule is never served without a filter it
// asked for.

const maxHeaderEdits = 16

// forbiddenHeaders are fields a header filter may not touch: hop-by-hop
// and framing fields, and Host (URLRewrite's hostname sets it).
var forbiddenHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Content-Length": true, "Host": true,
}

// filtersOf translates a rule's filters for a match of path type pt. It
// returns the route filters (nil for none), the mirror backendRefs, and
// why the rule cannot be served ("" when it can).
func filtersOf(fs []gatewayv1.HTTPRouteFilter, pt route.PathType) (*route.Filters, []gatewayv1.BackendObjectReference, string) {
	if len(fs) == 0 {
		return nil, nil, ""
	}
	f := &route.Filters{}
	var mirrors []gatewayv1.BackendObjectReference
	seen := map[gatewayv1.HTTPRouteFilterType]bool{}
	for i := range fs {
		fl := &fs[i]
		where := fmt.Sprintf("filters[%d]", i)
		if seen[fl.Type] && fl.Type != gatewayv1.HTTPRouteFilterRequestMirror {
			return nil, nil, where + ": filter type " + string(fl.Type) + " is given twice"
		}
		seen[fl.Type] = true
		var why string
		switch fl.Type {
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			f.RequestHeaders, why = headerFilter(fl.RequestHeaderModifier)
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
			f.ResponseHeaders, why = headerFilter(fl.ResponseHeaderModifier)
		case gatewayv1.HTTPRouteFilterRequestRedirect:
			f.Redirect, why = redirectOf(fl.RequestRedirect, pt)
		case gatewayv1.HTTPRouteFilterURLRewrite:
			f.Rewrite, why = rewriteOf(fl.URLRewrite, pt)
		case gatewayv1.HTTPRouteFilterRequestMirror:
			m := fl.RequestMirror
			switch {
			case m == nil:
				why = "requestMirror is missing"
			case m.Percent != nil && *m.Percent != 100 || m.Fraction != nil && (m.Fraction.Denominator == nil && m.Fraction.Numerator != 100 || m.Fraction.Denominator != nil && m.Fraction.Numerator != *m.Fraction.Denominator):
				why = "mirroring a part of the requests is not supported (percent and fraction must be 100%)"
			default:
				mirrors = append(mirrors, m.BackendRef)
			}
		default:
			why = fmt.Sprintf("filter type %q is not supported", truncate(string(fl.Type), 40))
		}
		if why != "" {
			return nil, nil, where + ": " + why
		}
	}
	if f.Redirect != nil && f.Rewrite != nil {
		return nil, nil, "RequestRedirect and URLRewrite cannot be combined"
	}
	if *f == (route.Filters{}) {
		f = nil
	}
	return f, mirrors, ""
}

func headerFilter(h *gatewayv1.HTTPHeaderFilter) (*route.HeaderFilter, string) {
	if h == nil {
		return nil, "the filter's configuration is missing"
	}
	if len(h.Set) > maxHeaderEdits || len(h.Add) > maxHeaderEdits || len(h.Remove) > maxHeaderEdits {
		return nil, fmt.Sprintf("at most %d set, add and remove entries each", maxHeaderEdits)
	}
	out := &route.HeaderFilter{}
	seen := map[string]bool{}
	headers := func(hs []gatewayv1.HTTPHeader, what string) ([]route.Header, string) {
		var list []route.Header
		clear(seen)
		for i, x := range hs {
			name, why := filterHeaderName(string(x.Name))
			if why == "" && (len(x.Value) > maxHeaderValue || !httpguts.ValidHeaderFieldValue(x.Value)) {
				why = "value has a control character or is too long"
			}
			if why != "" {
				return nil, fmt.Sprintf("%s[%d]: %s", what, i, why)
			}
			if seen[name] {
				continue // the first entry of a name counts
			}
			seen[name] = true
			list = append(list, route.Header{Name: name, Value: x.Value})
		}
		return list, ""
	}
	var why string
	if out.Set, why = headers(h.Set, "set"); why != "" {
		return nil, why
	}
	if out.Add, why = headers(h.Add, "add"); why != "" {
		return nil, why
	}
	for i, n := range h.Remove {
		name, why := filterHeaderName(n)
		if why != "" {
			return nil, fmt.Sprintf("remove[%d]: %s", i, why)
		}
		out.Remove = append(out.Remove, name)
	}
	if len(out.Set) == 0 && len(out.Add) == 0 && len(out.Remove) == 0 {
		return nil, ""
	}
	return out, ""
}

func filterHeaderName(n string) (string, string) {
	if !httpguts.ValidHeaderFieldName(n) {
		return "", fmt.Sprintf("%q is not a valid header name", truncate(n, 80))
	}
	c := http.CanonicalHeaderKey(n)
	if forbiddenHeaders[c] {
		return "", c + " is a hop-by-hop, framing or Host field, which filters may not change"
	}
	return c, ""
}

func redirectOf(r *gatewayv1.HTTPRequestRedirectFilter, pt route.PathType) (*route.Redirect, string) {
	if r == nil {
		return nil, "requestRedirect is missing"
	}
	rd := &route.Redirect{StatusCode: http.StatusFound}
	if r.Scheme != nil {
		s := strings.ToLower(*r.Scheme)
		if s != "http" && s != "https" {
			return nil, fmt.Sprintf("scheme %q is not supported (http and https are)", truncate(*r.Scheme, 20))
		}
		rd.Scheme = s
	}
	if r.Hostname != nil {
		h := strings.ToLower(string(*r.Hostname))
		if why := checkHostname(h); why != "" || strings.HasPrefix(h, "*") {
			return nil, fmt.Sprintf("hostname %q is not a host name", truncate(h, 80))
		}
		rd.Host = h
	}
	if r.Port != nil {
		if *r.Port < 1 || *r.Port > 65535 {
			return nil, "port must be from 1 to 65535"
		}
		rd.Port = int(*r.Port)
	}
	if r.StatusCode != nil {
		switch *r.StatusCode {
		case 301, 302, 303, 307, 308:
			rd.StatusCode = *r.StatusCode
		default:
			return nil, fmt.Sprintf("statusCode %d is not supported (301, 302, 303, 307 and 308 are)", *r.StatusCode)
		}
	}
	if r.Path != nil {
		pm, why := pathModifier(r.Path, pt)
		if why != "" {
			return nil, why
		}
		rd.Path = pm
	}
	return rd, ""
}

func rewriteOf(r *gatewayv1.HTTPURLRewriteFilter, pt route.PathType) (*route.Rewrite, string) {
	if r == nil {
		return nil, "urlRewrite is missing"
	}
	rw := &route.Rewrite{}
	if r.Hostname != nil {
		h := strings.ToLower(string(*r.Hostname))
		if why := checkHostname(h); why != "" || strings.HasPrefix(h, "*") {
			return nil, fmt.Sprintf("hostname %q is not a host name", truncate(h, 80))
		}
		rw.Host = h
	}
	if r.Path != nil {
		pm, why := pathModifier(r.Path, pt)
		if why != "" {
			return nil, why
		}
		rw.Path = pm
	}
	if rw.Host == "" && rw.Path == nil {
		return nil, "urlRewrite changes nothing"
	}
	return rw, ""
}

func pathModifier(m *gatewayv1.HTTPPathModifier, pt route.PathType) (*route.PathModifier, string) {
	var v *string
	pm := &route.PathModifier{}
	switch m.Type {
	case gatewayv1.FullPathHTTPPathModifier:
		pm.Type, v = route.ReplaceFullPath, m.ReplaceFullPath
	case gatewayv1.PrefixMatchHTTPPathModifier:
		if pt != route.PathPrefix {
			return nil, "ReplacePrefixMatch needs a PathPrefix match"
		}
		pm.Type, v = route.ReplacePrefixMatch, m.ReplacePrefixMatch
	default:
		return nil, fmt.Sprintf("path modifier type %q is not supported", truncate(string(m.Type), 40))
	}
	if v == nil {
		return nil, "path modifier " + string(m.Type) + " has no value"
	}
	if why := checkPath(*v); why != "" {
		return nil, fmt.Sprintf("path modifier value %q %s", truncate(*v, 80), why)
	}
	pm.Value = *v
	return pm, ""
}
