package proxy

import (
	"math"
	"net/http"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/route"
)

// l7Table is one host with the given routes.
func l7Table(routes ...route.Route) *route.Table {
	return route.New(route.Config{VirtualHosts: []route.VirtualHost{{Host: "app.example.com", Routes: routes}}})
}

// echoBackend answers with the path and query it received.
func echoBackend(t *testing.T, name string) *testBackend {
	return newBackend(t, name, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("Server", "echo")
		w.Header().Set("X-Host", r.Host)
		_, _ = w.Write([]byte(r.URL.RequestURI()))
	})
}

func hostGet(t *testing.T, c *http.Client, url string, hdr ...string) result {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "app.example.com"
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return do(t, c, req)
}

// TestRewrite: prefix replacement element-wise, regex capture groups with
// a new query, case-insensitive regexes, dot segments normalised after the
// rewrite, upstream Host; a regex that does not match leaves the path.
func TestRewrite(t *testing.T) {
	be := echoBackend(t, "web")
	b := backendOf("default/web", defaults(), be.addr())
	p, srv, c := front(t, Options{})
	p.Update(l7Table(
		route.Route{PathType: route.PathPrefix, Path: "/api/", Backend: b, Ingress: "default/a",
			Filters: &route.Filters{Rewrite: &route.Rewrite{Host: "internal.example.com", Path: &route.PathModifier{Type: route.ReplacePrefixMatch, Value: "/v2"}}}},
		route.Route{PathType: route.PathPrefix, Path: "/root", Backend: b, Ingress: "default/a",
			Filters: &route.Filters{Rewrite: &route.Rewrite{Path: &route.PathModifier{Type: route.ReplacePrefixMatch, Value: "/"}}}},
		route.Route{PathType: route.PathRegex, Path: "(?i)/shop(/|$)(.*)", Backend: b, Ingress: "default/a",
			Filters: &route.Filters{Rewrite: &route.Rewrite{Path: &route.PathModifier{Type: route.ReplaceRegex, Pattern: "(?i)/shop(/|$)(.*)", Value: "/store/${2}?from=${1}shop"}}}},
		route.Route{PathType: route.PathRegex, Path: "/dots/(.*)", Backend: b, Ingress: "default/a",
			Filters: &route.Filters{Rewrite: &route.Rewrite{Path: &route.PathModifier{Type: route.ReplaceRegex, Pattern: "/dots/(.*)", Value: "/safe/${1}"}}}},
		route.Route{PathType: route.PathExact, Path: "/exact", Backend: b, Ingress: "default/a",
			Filters: &route.Filters{Rewrite: &route.Rewrite{Path: &route.PathModifier{Type: route.ReplacePrefixMatch, Value: "/other"}}}},
	))
	for _, tc := range []struct{ path, want, host string }{
		{"/api/users?id=1", "/v2/users?id=1", "internal.example.com"},
		{"/api", "/v2", "internal.example.com"},
		{"/apix", "", ""}, // not under /api/: no route
		{"/root/x/y", "/x/y", "app.example.com"},
		{"/root", "/", "app.example.com"},
		{"/SHOP/cart?a=b", "/store/cart?from=/shop&a=b", "app.example.com"},
		{"/shop", "/store/?from=shop", "app.example.com"},
		{"/dots/a%2F..%2F..%2Fetc", "", ""}, // encoded slashes refused before routing
		{"/exact", "/other", "app.example.com"},
	} {
		res := hostGet(t, c, srv.URL+tc.path)
		if tc.want == "" {
			if res.status != http.StatusNotFound && res.status != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 404 or 400", tc.path, res.status)
			}
			continue
		}
		if res.status != 200 || res.body != tc.want || res.header.Get("X-Host") != tc.host {
			t.Errorf("%s: %d %q host %q; want %q host %q", tc.path, res.status, res.body, res.header.Get("X-Host"), tc.want, tc.host)
		}
	}
}

// TestRewriteDotSegments: captures cannot smuggle dot segments upstream.
func TestRewriteDotSegments(t *testing.T) {
	pr := compilePathRewrite(&route.PathModifier{Type: route.ReplaceRegex, Pattern: "/x/(.*)", Value: "/a/b/${1}"}, &route.Route{})
	for in, want := range map[string]string{"/x/..%2F..": "/a/b/..%2F..", "/x/ok": "/a/b/ok"} {
		got, ok := pr.rewrite(in)
		if !ok || got != want {
			t.Errorf("%s -> %q; want %q", in, got, want)
		}
	}
	pr = compilePathRewrite(&route.PathModifier{Type: route.ReplaceRegex, Pattern: "/x(.*)", Value: "${1}"}, &route.Route{})
	if got, _ := pr.rewrite("/x/../../etc"); got != "/etc" {
		t.Errorf("got %q, want /etc (normalised)", got)
	}
}

// TestRedirect: fixed URLs drop the query; app-root keeps scheme and host;
// a redirect never reaches the backend.
func TestRedirect(t *testing.T) {
	be := echoBackend(t, "web")
	b := backendOf("default/web", defaults(), be.addr())
	p, srv, c := front(t, Options{})
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	p.Update(l7Table(
		route.Route{PathType: route.PathPrefix, Path: "/old", Backend: b, Ingress: "default/a",
			Filters: &route.Filters{Redirect: &route.Redirect{Scheme: "https", Host: "new.example.com", StatusCode: 308, DropQuery: true,
				Path: &route.PathModifier{Type: route.ReplaceFullPath, Value: "/landing"}}}},
		route.Route{PathType: route.PathExact, Path: "/", Backend: b, Ingress: "default/a",
			Filters: &route.Filters{Redirect: &route.Redirect{StatusCode: 302, Path: &route.PathModifier{Type: route.ReplaceFullPath, Value: "/app"}}}},
		route.Route{PathType: route.PathPrefix, Path: "/moved", Backend: b, Ingress: "default/a",
			Filters: &route.Filters{Redirect: &route.Redirect{StatusCode: 301, Port: 8443,
				Path: &route.PathModifier{Type: route.ReplacePrefixMatch, Value: "/new"}}}},
	))
	for _, tc := range []struct {
		path   string
		status int
		loc    string
	}{
		{"/old/x?q=1", 308, "https://new.example.com/landing"},
		{"/", 302, "http://app.example.com/app"},
		{"/moved/a%20b?q=1", 301, "http://app.example.com:8443/new/a%20b?q=1"},
	} {
		res := hostGet(t, c, srv.URL+tc.path)
		if res.status != tc.status || res.header.Get("Location") != tc.loc {
			t.Errorf("%s: %d %q; want %d %q", tc.path, res.status, res.header.Get("Location"), tc.status, tc.loc)
		}
	}
	if n := be.hits.Load(); n != 0 {
		t.Errorf("backend got %d requests; redirects must not reach it", n)
	}
}

// TestHeaderFilters: request fields removed, set and added after the
// proxy's own X-Forwarded-*; response fields likewise; a client's
// X-Forwarded-Prefix never passes, the route's does.
func TestHeaderFilters(t *testing.T) {
	be := newBackend(t, "web", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "echo")
		w.Header().Set("Cache-Control", "public")
		w.Header().Add("X-Multi", "backend")
	})
	b := backendOf("default/web", defaults(), be.addr())
	p, srv, c := front(t, Options{})
	p.Update(l7Table(route.Route{PathType: route.PathPrefix, Path: "/", Backend: b, Ingress: "default/a",
		Filters: &route.Filters{
			RequestHeaders: &route.HeaderFilter{
				Remove: []string{"X-Debug"},
				Set:    []route.Header{{Name: "X-Team", Value: "blue"}, {Name: "X-Forwarded-Prefix", Value: "/api"}},
				Add:    []route.Header{{Name: "X-Team", Value: "green"}},
			},
			ResponseHeaders: &route.HeaderFilter{
				Remove: []string{"Server"},
				Set:    []route.Header{{Name: "Cache-Control", Value: "no-store"}},
				Add:    []route.Header{{Name: "X-Multi", Value: "proxy"}},
			},
		}}))
	res := hostGet(t, c, srv.URL+"/x", "X-Debug", "1", "X-Team", "red", "X-Forwarded-Prefix", "/evil")
	if res.status != 200 {
		t.Fatalf("status %d", res.status)
	}
	req, _ := be.lastRequest()
	if got := req.Header.Values("X-Team"); strings.Join(got, ",") != "blue,green" {
		t.Errorf("X-Team %q, want blue,green", got)
	}
	if got := req.Header.Values("X-Forwarded-Prefix"); strings.Join(got, ",") != "/api" {
		t.Errorf("X-Forwarded-Prefix %q, want /api", got)
	}
	if req.Header.Get("X-Debug") != "" {
		t.Error("X-Debug passed")
	}
	if res.header.Get("Server") != "" || res.header.Get("Cache-Control") != "no-store" ||
		strings.Join(res.header.Values("X-Multi"), ",") != "backend,proxy" {
		t.Errorf("response header %v", res.header)
	}
}

// TestCanary: header and cookie decide exactly (always/never, or a
// value), before the weight; the weight share holds within a binomial
// tolerance; a sticky cookie pins the weighted choice until its weight
// is 0.
func TestCanary(t *testing.T) {
	mainBe, canBe := echoBackend(t, "main"), echoBackend(t, "canary")
	mb := backendOf("default/main", defaults(), mainBe.addr())
	cb := backendOf("default/canary", defaults(), canBe.addr())
	split := func(weight uint32, sticky string) *route.Split {
		return &route.Split{
			Conditional: []route.ConditionalBackend{
				{Match: route.RequestMatch{Header: "X-Canary", Value: "always"}, Backend: cb, Ingress: "default/c"},
				{Match: route.RequestMatch{Header: "X-Canary", Value: "never"}, Backend: mb, Ingress: "default/m"},
				{Match: route.RequestMatch{Cookie: "canary", Value: "always"}, Backend: cb, Ingress: "default/c"},
				{Match: route.RequestMatch{Cookie: "canary", Value: "never"}, Backend: mb, Ingress: "default/m"},
			},
			Weighted:     []route.WeightedBackend{{Backend: mb, Weight: 100 - weight, Ingress: "default/m"}, {Backend: cb, Weight: weight, Ingress: "default/c"}},
			StickyCookie: sticky,
		}
	}
	p, srv, c := front(t, Options{})
	install := func(weight uint32, sticky string) {
		p.Update(l7Table(route.Route{PathType: route.PathPrefix, Path: "/", Backend: mb, Ingress: "default/m", Split: split(weight, sticky)}))
	}
	install(0, "")
	for _, tc := range []struct {
		hdr  []string
		want string
	}{
		{[]string{"X-Canary", "always"}, "canary"},
		{[]string{"X-Canary", "always", "Cookie", "canary=never"}, "canary"}, // header > cookie
		{[]string{"X-Canary", "never", "Cookie", "canary=always"}, "main"},
		{[]string{"X-Canary", "maybe", "Cookie", "canary=always"}, "canary"}, // falls through to the cookie
		{[]string{"Cookie", "other=1; canary=always"}, "canary"},
		{[]string{"Cookie", "canary=never"}, "main"},
		{nil, "main"},
	} {
		for i := 0; i < 5; i++ {
			if res := hostGet(t, c, srv.URL+"/", tc.hdr...); res.header.Get("X-Backend") != tc.want {
				t.Fatalf("%v: went to %q, want %s", tc.hdr, res.header.Get("X-Backend"), tc.want)
			}
		}
	}

	install(30, "")
	const n = 2000
	canary := 0
	for i := 0; i < n; i++ {
		if hostGet(t, c, srv.URL+"/").header.Get("X-Backend") == "canary" {
			canary++
		}
	}
	// 30%: the binomial standard deviation is sqrt(n*p*(1-p)) ≈ 20.5; 5 sigma.
	if sd := math.Sqrt(n * 0.3 * 0.7); math.Abs(float64(canary)-0.3*n) > 5*sd {
		t.Errorf("canary got %d of %d requests; want 30%% within 5 sigma", canary, n)
	}

	install(50, "sluice-canary-x")
	first := hostGet(t, c, srv.URL+"/")
	ck := first.header.Get("Set-Cookie")
	if !strings.HasPrefix(ck, "sluice-canary-x=") {
		t.Fatalf("no sticky cookie: %q", ck)
	}
	cookie := strings.SplitN(ck, ";", 2)[0]
	chosen := first.header.Get("X-Backend")
	for i := 0; i < 50; i++ {
		res := hostGet(t, c, srv.URL+"/", "Cookie", cookie)
		if res.header.Get("X-Backend") != chosen || res.header.Get("Set-Cookie") != "" {
			t.Fatalf("sticky client moved from %s to %s", chosen, res.header.Get("X-Backend"))
		}
	}
	// The chosen side's weight drops to 0: the cookie no longer holds.
	if chosen == "canary" {
		install(0, "sluice-canary-x")
	} else {
		install(100, "sluice-canary-x")
	}
	if res := hostGet(t, c, srv.URL+"/", "Cookie", cookie); res.header.Get("X-Backend") == chosen {
		t.Errorf("sticky cookie kept the client on %s at weight 0", chosen)
	}
}

// TestL7Unused: a route without filters gets no l7 view (the request path
// pays one nil check).
func TestL7Unused(t *testing.T) {
	p := New(Options{})
	b := backendOf("default/web", defaults(), "127.0.0.1:1")
	tbl := tableOf(b)
	p.Update(tbl)
	for _, rv := range p.view.Load().routes {
		if rv.l7 != nil {
			t.Fatal("l7 view for a route without filters")
		}
	}
}

// FuzzPathRewrite: whatever the tenant's pattern and value and the
// client's path, a rewritten path is absolute and normal (no dot
// segments or empty segments reach the pod) and a rewritten query
// carries no byte a request line may not.
func FuzzPathRewrite(f *testing.F) {
	f.Add("/shop(/|$)(.*)", "/store/${2}?from=${1}", "/shop/a/../../b", uint8(2))
	f.Add("/x", "/", "/x/y", uint8(1))
	f.Add("(?i)/(.*)", "${1}", "/../..//%00", uint8(2))
	f.Add("", "", "", uint8(0))
	f.Fuzz(func(t *testing.T, pattern, value, path string, typ uint8) {
		if len(pattern) > 512 || !isPrint(value) || strings.ContainsAny(value, " \\#") || !strings.HasPrefix(path, "/") {
			return // translation refuses these; the server refuses such paths
		}
		m := &route.PathModifier{Type: route.PathModifierType(typ % 3), Value: value, Pattern: pattern}
		if m.Type == route.ReplaceRegex {
			if _, err := route.CompilePath(pattern); err != nil {
				return
			}
		}
		pr := compilePathRewrite(m, &route.Route{Path: "/x"})
		if pr == nil {
			t.Fatal("no rewrite compiled")
		}
		r, err := http.NewRequest("GET", "http://a.example.com/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if dirty, _ := scanPath(path, false); dirty {
			path = resolvePath(path) // as normalizeRequest does first
		}
		r.URL.Path, r.URL.RawQuery = path, "a=1"
		pr.apply(r)
		np := r.URL.Path
		if !strings.HasPrefix(np, "/") {
			t.Fatalf("path %q", np)
		}
		if dirty, _ := scanPath(np, false); dirty {
			t.Fatalf("path %q not normal", np)
		}
		if strings.ContainsAny(r.URL.RawQuery, " #\r\n\x00") {
			t.Fatalf("query %q", r.URL.RawQuery)
		}
		p := New(Options{})
		loc := p.location(r, &route.Redirect{StatusCode: 302}, pr)
		if strings.ContainsAny(loc, " \r\n\x00") {
			t.Fatalf("location %q", loc)
		}
	})
}

// BenchmarkProxyL7 is BenchmarkProxy on a route with an upstream Host, a
// request and a response header set, and a weighted split (the cost of
// the features when used; BenchmarkProxy is their cost when unused).
func BenchmarkProxyL7(b *testing.B) {
	addr := cannedUpstream(b)
	p := New(Options{StdTransport: *benchStd})
	be := backendOf("ns/s", defaults(), addr)
	p.Update(route.New(route.Config{VirtualHosts: []route.VirtualHost{{Routes: []route.Route{{
		PathType: route.PathPrefix, Path: "/", Backend: be, Ingress: "default/ing",
		Filters: &route.Filters{
			Rewrite:         &route.Rewrite{Host: "internal.example"},
			RequestHeaders:  &route.HeaderFilter{Set: []route.Header{{Name: "X-Team", Value: "blue"}}},
			ResponseHeaders: &route.HeaderFilter{Set: []route.Header{{Name: "Cache-Control", Value: "no-store"}}},
		},
		Split: &route.Split{Weighted: []route.WeightedBackend{{Backend: be, Weight: 90, Ingress: "default/ing"}, {Backend: be, Weight: 10, Ingress: "default/canary"}}},
	}}}}}))
	benchHandler(b, p)
}
