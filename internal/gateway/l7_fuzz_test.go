package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/route"
)

// FuzzRuleL7 builds an HTTPRoute rule with a fuzzed path match (any type,
// RegularExpression included), header, query and method matches, filters
// and timeouts: Build must not panic; what it serves must be valid for the
// routing table (regex paths compile and are anchored at the end,
// conditions compile and match a request without panicking, filter
// header names are canonical and allowed, redirect status codes are
// redirects, timeouts positive).
func FuzzRuleL7(f *testing.F) {
	f.Add("PathPrefix", "/", "version", "two", "Exact", "animal", "wh.*", "RegularExpression", "GET", "x-env", "prod", "https", "new.example.com", "ReplacePrefixMatch", "/new", "10s", "2s", 301)
	f.Add("RegularExpression", "/users/[0-9]+", "a b", "(", "RegularExpression", "", "", "Nope", "BREW", "Host", "x\ny", "ftp", "*.x", "ReplaceFullPath", "rel", "1d", "0s", 200)
	f.Add("RegularExpression", "a)|(b", "X", "v", "", "q", "1", "", "", "Connection", "close", "", "", "", "", "0s", "", 0)
	f.Add("RegularExpression", "/x|/", "", "", "", "", "", "", "", "", "", "", "", "ReplaceFullPath", "/y", "", "", 0)
	f.Add("Exact", "/a//b", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", 0)
	f.Fuzz(func(t *testing.T, pType, pValue, hName, hValue, hType, qName, qValue, qType, method, setName, setValue, scheme, host, pmType, pmValue, reqTimeout, beTimeout string, status int) {
		m := gatewayv1.HTTPRouteMatch{}
		if pType != "" || pValue != "" {
			m.Path = &gatewayv1.HTTPPathMatch{Value: &pValue}
			if pType != "" {
				m.Path.Type = ptr(gatewayv1.PathMatchType(pType))
			}
		}
		if hName != "" {
			m.Headers = []gatewayv1.HTTPHeaderMatch{{Name: gatewayv1.HTTPHeaderName(hName), Value: hValue}}
			if hType != "" {
				m.Headers[0].Type = ptr(gatewayv1.HeaderMatchType(hType))
			}
		}
		if qName != "" {
			m.QueryParams = []gatewayv1.HTTPQueryParamMatch{{Name: gatewayv1.HTTPHeaderName(qName), Value: qValue}}
			if qType != "" {
				m.QueryParams[0].Type = ptr(gatewayv1.QueryParamMatchType(qType))
			}
		}
		if method != "" {
			m.Method = ptr(gatewayv1.HTTPMethod(method))
		}
		rd := &gatewayv1.HTTPRequestRedirectFilter{StatusCode: &status}
		if scheme != "" {
			rd.Scheme = &scheme
		}
		if host != "" {
			rd.Hostname = ptr(gatewayv1.PreciseHostname(host))
		}
		if pmType != "" {
			rd.Path = &gatewayv1.HTTPPathModifier{Type: gatewayv1.HTTPPathModifierType(pmType), ReplaceFullPath: &pmValue, ReplacePrefixMatch: &pmValue}
		}
		timeouts := &gatewayv1.HTTPRouteTimeouts{}
		if reqTimeout != "" {
			timeouts.Request = ptr(gatewayv1.Duration(reqTimeout))
		}
		if beTimeout != "" {
			timeouts.BackendRequest = ptr(gatewayv1.Duration(beTimeout))
		}
		backend := []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: ptr(gatewayv1.PortNumber(80))}}}}
		hdr := &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: gatewayv1.HTTPHeaderName(setName), Value: setValue}}, Remove: []string{setName}}
		rt := &gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "r"},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web"}}},
				Rules: []gatewayv1.HTTPRouteRule{
					{Matches: []gatewayv1.HTTPRouteMatch{m}, Timeouts: timeouts, BackendRefs: backend,
						Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: hdr},
							{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Path: rd.Path}}}},
					{Matches: []gatewayv1.HTTPRouteMatch{m}, Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: rd}}},
				},
			},
		}
		in := l7Input(rt)
		res := Build(in, Options{})
		checkInvariants(t, in, res)
		tbl := route.New(route.Config{VirtualHosts: []route.VirtualHost{{Routes: routesOf(res.Rules)}}})
		req := httptest.NewRequest("GET", "/", nil)
		req.URL.RawQuery = qName + "=" + qValue // raw, as a hostile client may send it
		req.Header[hName] = []string{hValue}
		tbl.MatchRequest("", "/", req)
		tbl.MatchRequest("", pValue, req)
		for _, r := range res.Rules {
			if r.PathType == route.PathRegex {
				if _, err := route.CompilePath(r.Path); err != nil || !strings.HasSuffix(r.Path, ")$") || len(r.Path) > maxValuePattern+5 {
					t.Errorf("served regex path %q (compiles: %v), want one anchored at the end", r.Path, err)
				}
			}
			if r.Timeout < 0 {
				t.Errorf("negative timeout %v", r.Timeout)
			}
			if c := r.Conditions; c != nil {
				for _, h := range c.Headers {
					if h.Regex {
						if _, err := route.CompileValue(h.Value); err != nil {
							t.Errorf("served a pattern that does not compile: %q", h.Value)
						}
					}
				}
			}
			if f := r.Filters; f != nil {
				if rd := f.Redirect; rd != nil && (rd.StatusCode < 301 || rd.StatusCode > 308) {
					t.Errorf("redirect status %d", rd.StatusCode)
				}
				if h := f.RequestHeaders; h != nil {
					for _, x := range h.Set {
						if forbiddenHeaders[x.Name] || strings.ContainsAny(x.Value, "\r\n\x00") {
							t.Errorf("served header %q: %q", x.Name, x.Value)
						}
					}
				}
			}
		}
	})
}

func l7Input(rt *gatewayv1.HTTPRoute) Input {
	return Input{
		GatewayClasses: []*gatewayv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "sluice"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: ControllerName}}},
		Gateways: []*gatewayv1.Gateway{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "sluice", Listeners: []gatewayv1.Listener{{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80}}}}},
		HTTPRoutes: []*gatewayv1.HTTPRoute{rt},
		Services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "app"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}},
	}
}

func routesOf(rules []Rule) []route.Route {
	var out []route.Route
	for _, r := range rules {
		out = append(out, route.Route{PathType: r.PathType, Path: r.Path, Conditions: r.Conditions, Filters: r.Filters, Backend: &route.Backend{Name: "b"}})
	}
	return out
}

// FuzzGRPCMatch builds a GRPCRoute with a fuzzed method match and header:
// Build must not panic, and a served rule's path is one the routing table
// compiles (Exact and Prefix paths absolute, regex paths compiling).
func FuzzGRPCMatch(f *testing.F) {
	f.Add("Exact", "echo.v1.Echo", "Say", "x-canary", "yes")
	f.Add("RegularExpression", "echo\\.v[0-9]+\\..*", "", "", "")
	f.Add("RegularExpression", "a)|(b", "(", "a b", "x\n")
	f.Add("", "", "Watch", "X", "[")
	f.Fuzz(func(t *testing.T, typ, svc, method, hName, hValue string) {
		m := gatewayv1.GRPCRouteMatch{Method: &gatewayv1.GRPCMethodMatch{}}
		if typ != "" {
			m.Method.Type = ptr(gatewayv1.GRPCMethodMatchType(typ))
		}
		if svc != "" {
			m.Method.Service = &svc
		}
		if method != "" {
			m.Method.Method = &method
		}
		if hName != "" {
			m.Headers = []gatewayv1.GRPCHeaderMatch{{Name: gatewayv1.GRPCHeaderName(hName), Value: hValue}}
		}
		rt := &gatewayv1.GRPCRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "g"},
			Spec: gatewayv1.GRPCRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web"}}},
				Rules: []gatewayv1.GRPCRouteRule{{Matches: []gatewayv1.GRPCRouteMatch{m},
					BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: ptr(gatewayv1.PortNumber(80))}}}}}},
			},
		}
		in := l7Input(nil)
		in.HTTPRoutes = nil
		in.GRPCRoutes = []*gatewayv1.GRPCRoute{rt}
		res := Build(in, Options{})
		checkInvariants(t, in, res)
		for _, r := range res.Rules {
			switch r.PathType {
			case route.PathRegex:
				if _, err := route.CompilePath(r.Path); err != nil {
					t.Errorf("served regex path %q does not compile: %v", r.Path, err)
				}
			default:
				if !strings.HasPrefix(r.Path, "/") || strings.ContainsAny(r.Path, " \n\r\x00") {
					t.Errorf("served path %q", r.Path)
				}
			}
		}
		tbl := route.New(route.Config{VirtualHosts: []route.VirtualHost{{Routes: routesOf(res.Rules)}}})
		req := httptest.NewRequest("POST", "/", nil)
		req.URL.Path = "/" + svc + "/" + method
		tbl.MatchRequest("", req.URL.Path, req)
	})
}
