package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/http1"
	"sluice.dev/sluice/internal/route"
)

func TestNormalizePath(t *testing.T) {
	cases := []struct {
		in, want string
		allowed  bool // refused unless encoded separators are allowed
	}{
		{"/", "/", false},
		{"/api/items", "/api/items", false},
		{"/pkg.Service/Method", "/pkg.Service/Method", false},
		{"/a/.b/..c/...", "/a/.b/..c/...", false},
		{"/a/", "/a/", false},
		{"//", "/", false},
		{"/a//b///c", "/a/b/c", false},
		{"/a/./b", "/a/b", false},
		{"/a/.", "/a/", false},
		{"/a/b/..", "/a/", false},
		{"/a/b/../", "/a/", false},
		{"/public/../internal", "/internal", false},
		{"/..", "/", false},
		{"/.", "/", false},
		{"/../x", "/x", false},
		{"/../../x/../../y", "/y", false},
		{"/a/b/../../../c/./d/", "/c/d/", false},
		{"/a%20b/../c", "/c", false},
		{"/a%2Fb", "/a%2Fb", true},
		{"/a%2fb", "/a%2fb", true},
		{"/%2E%2E/x", "/%2E%2E/x", true},
		{"/a/%2e", "/a/%2e", true},
		{"/a%5Cb", "/a%5Cb", true},
		{"/a%5cb/../c", "/c", true},
		{`/a\b`, `/a\b`, true},
		{"/a%2", "/a%2", false},
		{"/a%", "/a%", false},
	}
	for _, tc := range cases {
		got, ok := normalizePath(tc.in, false)
		if ok == tc.allowed || ok && got != tc.want {
			t.Errorf("normalizePath(%q, false) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, !tc.allowed)
		}
		if got, ok := normalizePath(tc.in, true); !ok || got != tc.want {
			t.Errorf("normalizePath(%q, true) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

// refNormalize is the reference the normaliser is fuzzed against:
// path.Clean (dot segments, merged slashes, nothing above the root), with
// the trailing "/" RFC 3986 section 5.2.4 keeps where Clean drops it: after
// a path ending in "/", "/." or "/..".
func refNormalize(p string) string {
	c := path.Clean(p)
	if c != "/" && (strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")) {
		c += "/"
	}
	return c
}

func refRefused(p string) bool {
	u := strings.ToUpper(p)
	return strings.Contains(p, `\`) || strings.Contains(u, "%2F") || strings.Contains(u, "%5C") || strings.Contains(u, "%2E")
}

func FuzzNormalizePath(f *testing.F) {
	px := New(Options{})
	for _, s := range []string{"/", "/a/b", "//a//", "/a/./b/../c", "/../x", "/a/..", "/a/.", "/.a/..b/",
		"/a%2Fb", "/%2e%2E/", "/a%5c", `/a\b`, "/a%2", "/pkg.Service/Method", "/a/b/c/../../../../d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		p = "/" + p
		got, ok := normalizePath(p, true)
		if want := refNormalize(p); !ok || got != want {
			t.Fatalf("normalizePath(%q, true) = %q, %v; reference %q", p, got, ok, want)
		}
		if again, _ := normalizePath(got, true); again != got {
			t.Fatalf("not idempotent: %q → %q → %q", p, got, again)
		}
		strict, ok := normalizePath(p, false)
		if ok == refRefused(p) {
			t.Fatalf("normalizePath(%q, false) ok = %v, want %v", p, ok, !refRefused(p))
		}
		if ok && strict != got {
			t.Fatalf("normalizePath(%q, false) = %q, with encoded allowed %q", p, strict, got)
		}
		// A request for p, as net/http and sluice's loop parse it, is
		// sent on as its escaped path's normal form.
		u, err := url.ParseRequestURI(p)
		if err != nil {
			return
		}
		e := u.EscapedPath()
		want, wantOK := normalizePath(e, false)
		r := &http.Request{URL: u}
		match, ok := px.normalizeRequest(r)
		if ok != wantOK || ok && (r.URL.EscapedPath() != want || match != r.URL.Path) {
			t.Fatalf("request for %q (escaped %q): sent %q, matched %q, %v; want %q, %v", p, e, r.URL.EscapedPath(), match, ok, want, wantOK)
		}
	})
}

func TestNormalizePathNoAllocation(t *testing.T) {
	p := New(Options{})
	r := httptest.NewRequest("GET", "http://app.example/api/v1/items/42?page=../2", nil)
	allocs := testing.AllocsPerRun(100, func() {
		if m, ok := p.normalizeRequest(r); !ok || m != "/api/v1/items/42" {
			t.Fatalf("got %q, %v", m, ok)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations for a normal path, want 0", allocs)
	}
}

func BenchmarkNormalizePath(b *testing.B) {
	p := New(Options{})
	for _, target := range []string{"/api/v1/items/42?page=2", "/static/app.2f9c1e.bundle.js", "/api/v1//items/./42/../43"} {
		b.Run(target, func(b *testing.B) {
			r := httptest.NewRequest("GET", "http://app.example"+target, nil)
			orig := *r.URL
			dirty := strings.Contains(target, "/.") || strings.Contains(target, "//")
			b.ReportAllocs()
			for b.Loop() {
				if dirty {
					*r.URL = orig
				}
				if _, ok := p.normalizeRequest(r); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}

// pathTable exposes only /public: a request that climbs out of it must
// find no route.
func pathTable(b *route.Backend) *route.Table {
	return route.New(route.Config{VirtualHosts: []route.VirtualHost{{
		Routes: []route.Route{{PathType: route.PathPrefix, Path: "/public", Backend: b, Ingress: "default/ing"}},
	}}})
}

type pathCase struct {
	target string
	status int
	sent   string // the target the pod received; "" when it got nothing
}

var pathCases = []pathCase{
	{"/public/a", 200, "/public/a"},
	{"/public/../internal", 404, ""},
	{"/public/%2E%2E/internal", 400, ""},
	{"/public/..%2Finternal", 400, ""},
	{"/public/a%2fb", 400, ""},
	{"/public/a%5Cb", 400, ""},
	{"/public//a/./b/../c?q=/../x//y", 200, "/public/a/c?q=/../x//y"},
	{"/../public/a/", 200, "/public/a/"},
	{"/public/a%20b/../c%41", 200, "/public/c%41"},
	{"/public/a%20b//c", 200, "/public/a%20b/c"},
	{"/pkg.Service/Method", 404, ""},
}

// allowedCases are pathCases with encoded separators allowed: they pass
// as they came, but the rules see them decoded and normalised.
var allowedCases = []pathCase{
	{"/public/a%2fb", 200, "/public/a%2fb"},
	{"/public/a%5Cb/./c", 200, "/public/a%5Cb/c"},
	{"/public/%2E%2E/internal", 404, ""},
	{"/public/x/..%2F..%2Finternal", 404, ""},
	{"/public/x/%2E%2E/y", 200, "/public/x/%2E%2E/y"},
}

// TestPathNormalisation sends raw request targets over HTTP/1.1 to the
// proxy behind sluice's own HTTP/1.1 loop (the synchronous upstream path)
// and behind net/http's server (with the Transport), and over h2c.
func TestPathNormalisation(t *testing.T) {
	for _, allow := range []bool{false, true} {
		cases := pathCases
		if allow {
			cases = allowedCases
		}
		for _, front := range []string{"http1-loop", "net/http", "h2c"} {
			t.Run(fmt.Sprintf("%s allow=%v", front, allow), func(t *testing.T) {
				a := newBackend(t, "a", nil)
				p := New(Options{StdTransport: front == "net/http", AllowEncodedSlashes: allow})
				p.Update(pathTable(backendOf("ns/a", defaults(), a.addr())))
				send := pathFront(t, front, p)
				for _, tc := range cases {
					before := a.hits.Load()
					status := send(tc.target)
					var sent string
					if a.hits.Load() != before {
						last, _ := a.lastRequest()
						sent = last.RequestURI
					}
					if status != tc.status || sent != tc.sent {
						t.Errorf("%s: got %d, pod got %q; want %d, %q", tc.target, status, sent, tc.status, tc.sent)
					}
				}
			})
		}
	}
}

// TestBackslashLiteral: a literal "\" (HTTP/1.1 only: an HTTP/2 client
// escapes it) is refused, or with encoded separators allowed, passes
// as the URL escaping writes it.
func TestBackslashLiteral(t *testing.T) {
	for _, allow := range []bool{false, true} {
		a := newBackend(t, "a", nil)
		p := New(Options{AllowEncodedSlashes: allow})
		p.Update(pathTable(backendOf("ns/a", defaults(), a.addr())))
		status := pathFront(t, "http1-loop", p)(`/public/a\b`)
		want, wantSent := 400, ""
		if allow {
			want, wantSent = 200, "/public/a%5Cb"
		}
		sent := ""
		if a.hits.Load() > 0 {
			last, _ := a.lastRequest()
			sent = last.RequestURI
		}
		if status != want || sent != wantSent {
			t.Errorf("allow=%v: got %d, pod got %q; want %d, %q", allow, status, sent, want, wantSent)
		}
	}
}

// pathFront serves p and returns a function sending GET target on a new
// connection and returning the status.
func pathFront(t *testing.T, front string, p *Proxy) func(target string) int {
	t.Helper()
	switch front {
	case "http1-loop":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		handoff := http1.NewListener(ln.Addr())
		s := http1.New(http1.Options{Handler: p, HandOff: handoff})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go s.ServeConn(c)
			}
		}()
		t.Cleanup(func() { ln.Close(); <-done; handoff.Close(); s.Shutdown() })
		return func(target string) int { return rawGet(t, ln.Addr().String(), target) }
	case "net/http":
		srv := httptest.NewServer(p)
		t.Cleanup(srv.Close)
		return func(target string) int { return rawGet(t, srv.Listener.Addr().String(), target) }
	default: // h2c
		srv := httptest.NewUnstartedServer(p)
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Start()
		t.Cleanup(srv.Close)
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		t.Cleanup(tr.CloseIdleConnections)
		return func(target string) int {
			req, err := http.NewRequest("GET", srv.URL+target, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("GET %s: %v", target, err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.ProtoMajor != 2 {
				t.Fatalf("GET %s: answered over %s", target, res.Proto)
			}
			return res.StatusCode
		}
	}
}

// rawGet sends target as it is in an HTTP/1.1 request line.
func rawGet(t *testing.T, addr, target string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: app.example\r\n\r\n", target)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// TestACMEChallengeNotRedirected: an HTTP-01 challenge on a host with
// TLS and the HTTPS redirect is served over plain HTTP; the rest of the
// host is redirected, a challenge path that climbs out of the prefix too.
func TestACMEChallengeNotRedirected(t *testing.T) {
	a := newBackend(t, "a", nil)
	p, srv, c := front(t, Options{})
	p.Update(httpsTable(backendOf("ns/a", defaults(), a.addr())))
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/.well-known/acme-challenge/tok3n", 200},
		{"/.well-known/acme-challenge/../../app", 308},
		{"/.well-known/other", 308},
		{"/", 308},
	} {
		req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
		req.Host = "secure.example.com"
		if r := do(t, c, req); r.status != tc.status {
			t.Errorf("%s: got %d, want %d", tc.path, r.status, tc.status)
		}
	}
}
