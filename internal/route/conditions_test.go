package route

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func cond(path, backend string, c *Conditions) Route {
	r := prefix(path, backend)
	r.Conditions = c
	return r
}

func TestMatchRequestConditions(t *testing.T) {
	hdr := func(name, value string) []ValueMatch { return []ValueMatch{{Name: name, Value: value}} }
	routes := []Route{
		// Same path: tried in Config order, the unconditioned one last.
		cond("/", "get-v2", &Conditions{Method: http.MethodGet, Headers: hdr("Version", "two")}),
		cond("/", "v2", &Conditions{Headers: hdr("Version", "two")}),
		cond("/", "re", &Conditions{Headers: []ValueMatch{{Name: "X-Id", Value: "[0-9]+", Regex: true}}}),
		cond("/", "q", &Conditions{Query: []ValueMatch{{Name: "animal", Value: "whale"}}}),
		prefix("/", "any"),
		cond("/", "unreachable", &Conditions{Method: http.MethodPut}),
		// A longer prefix whose conditions fail falls through to "/".
		cond("/api", "api-post", &Conditions{Method: http.MethodPost}),
		{PathType: PathExact, Path: "/exact", Backend: be("exact-q"), Conditions: &Conditions{Query: []ValueMatch{{Name: "a", Value: "b.*", Regex: true}}}},
	}
	tb := New(Config{VirtualHosts: []VirtualHost{{Host: "h", Routes: routes}}})
	cases := []struct {
		method, target string
		header         map[string][]string
		want           string
	}{
		{"GET", "/x", map[string][]string{"Version": {"two"}}, "get-v2"},
		{"HEAD", "/x", map[string][]string{"Version": {"two"}}, "v2"},
		{"GET", "/x", map[string][]string{"Version": {"one"}}, "any"},
		{"GET", "/x", map[string][]string{"X-Id": {"123"}}, "re"},
		{"GET", "/x", map[string][]string{"X-Id": {"12a"}}, "any"},    // whole value
		{"GET", "/x", map[string][]string{"X-Id": {"1", "2"}}, "any"}, // "1,2"
		{"GET", "/x?animal=whale", nil, "q"},
		{"GET", "/x?animal=dolphin&animal=whale", nil, "any"}, // first value
		{"GET", "/x?Animal=whale", nil, "any"},                // case-sensitive name
		{"PUT", "/x", nil, "any"},
		{"POST", "/api/v1", nil, "api-post"},
		{"GET", "/api/v1", nil, "any"},
		{"GET", "/exact?a=bc", nil, "exact-q"},
		{"GET", "/exact?a=cb", nil, "any"},
		{"GET", "/exact?%zz=1", nil, "any"}, // malformed query: no panic, no match
	}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, c.target, nil)
		for k, v := range c.header {
			req.Header[k] = v
		}
		rt := tb.Match("h", req.URL.Path)
		if rt != nil && rt.Conditions != nil {
			rt = tb.MatchRequest("h", req.URL.Path, req)
		}
		got := ""
		if rt != nil {
			got = rt.Backend.Name
		}
		if got != c.want {
			t.Errorf("%s %s %v: got %q, want %q", c.method, c.target, c.header, got, c.want)
		}
	}
}

func TestMatchRequestNoFallback(t *testing.T) {
	// Only conditional routes: a request satisfying none gets the default
	// backend (or nil).
	tb := New(Config{VirtualHosts: []VirtualHost{{Routes: []Route{cond("/", "a", &Conditions{Method: "POST"})}}}})
	req := httptest.NewRequest("GET", "/", nil)
	if rt := tb.MatchRequest("x", "/", req); rt != nil {
		t.Fatalf("got %v, want nil", rt.Backend.Name)
	}
	tb = New(Config{VirtualHosts: []VirtualHost{{Routes: []Route{cond("/", "a", &Conditions{Method: "POST"})}}}, DefaultBackend: be("dflt")})
	if rt := tb.MatchRequest("x", "/", req); rt == nil || rt.Backend.Name != "dflt" {
		t.Fatalf("got %v, want the default backend", rt)
	}
	// A broken pattern never matches.
	tb = New(Config{VirtualHosts: []VirtualHost{{Routes: []Route{cond("/", "a", &Conditions{Headers: []ValueMatch{{Name: "A", Value: "(", Regex: true}}}), prefix("/", "b")}}}})
	req.Header.Set("A", "(")
	if rt := tb.MatchRequest("x", "/", req); rt == nil || rt.Backend.Name != "b" {
		t.Fatalf("got %v, want b", rt)
	}
}

func TestMatchRequestRegexPath(t *testing.T) {
	r := Route{PathType: PathRegex, Path: "/r[0-9]", Backend: be("rx"), Conditions: &Conditions{Method: "DELETE"}}
	tb := New(Config{VirtualHosts: []VirtualHost{{Routes: []Route{r, prefix("/", "root")}}}})
	for method, want := range map[string]string{"DELETE": "rx", "GET": "root"} {
		req := httptest.NewRequest(method, "/r1", nil)
		if rt := tb.MatchRequest("x", "/r1", req); rt == nil || rt.Backend.Name != want {
			t.Errorf("%s: got %v, want %s", method, rt, want)
		}
	}
}
