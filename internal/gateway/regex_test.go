package gateway

import (
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/route"
)

// TestRegexPathServed: the rules of testdata/regex_paths in a routing
// table match the whole path only, after Exact paths and before prefixes.
func TestRegexPathServed(t *testing.T) {
	data, err := os.ReadFile("testdata/regex_paths/input.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in, opts, err := decode(data)
	if err != nil {
		t.Fatal(err)
	}
	res := Build(in, opts)
	var routes []route.Route
	for _, r := range res.Rules {
		routes = append(routes, route.Route{PathType: r.PathType, Path: r.Path, Conditions: r.Conditions,
			Backend: &route.Backend{Name: r.PathType.String() + " " + r.Path}})
	}
	tbl := route.New(route.Config{VirtualHosts: []route.VirtualHost{{Host: "re.example.com", Routes: routes}}})
	for _, c := range []struct {
		path, env, want string
	}{
		{"/users/42", "", "Regex (?:/users/[0-9]+)$"},
		{"/users/42/x", "", "Prefix /users"}, // whole path: the regex does not match
		{"/users/4x", "", "Prefix /users"},
		{"/users/me", "", "Exact /users/me"},
		{"/v2/a", "canary", "Regex (?:/v[12]/.*|/legacy)$"},
		{"/legacy", "canary", "Regex (?:/v[12]/.*|/legacy)$"},
		{"/legacyx", "canary", ""},
		{"/v2/a", "", ""}, // the header is missing
		{"/img/a/b.png", "", "Regex (?:/img/.*\\.(png|jpg))$"},
		{"/img/a/b.pngx", "", ""},
	} {
		req := httptest.NewRequest("GET", c.path, nil)
		if c.env != "" {
			req.Header.Set("X-Env", c.env)
		}
		got := ""
		if r := tbl.MatchRequest("re.example.com", c.path, req); r != nil {
			got = r.Backend.Name
		}
		if got != c.want {
			t.Errorf("%s (x-env %q): served by %q, want %q", c.path, c.env, got, c.want)
		}
	}
}

// TestRegexPathBounds: a pattern longer than 1024 bytes is refused, one
// of 1024 served; the served pattern is anchored at the end.
func TestRegexPathBounds(t *testing.T) {
	regex := gatewayv1.PathMatchRegularExpression
	for _, c := range []struct {
		value string
		ok    bool
	}{
		{"/" + strings.Repeat("a", 1023), true},
		{"/" + strings.Repeat("a", 1024), false},
		{"", false},
		{"/\x00", false},
		{"/\xff", false},
		{"/é+", true},
	} {
		pt, p, why := pathOf(&gatewayv1.HTTPPathMatch{Type: &regex, Value: &c.value})
		if (why == "") != c.ok {
			t.Errorf("%.20q: refused %q, want ok=%t", c.value, why, c.ok)
		}
		if c.ok && (pt != route.PathRegex || p != "(?:"+c.value+")$") {
			t.Errorf("%.20q: served as %v %.30q", c.value, pt, p)
		}
	}
}
