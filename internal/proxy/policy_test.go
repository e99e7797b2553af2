package proxy

import (
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"sluice.dev/sluice/internal/route"
)

// policyFront starts a proxy with one route to a backend, carrying pol.
func policyFront(t *testing.T, o Options, pol *route.Policies, h http.HandlerFunc) (*Proxy, string, *http.Client, *testBackend) {
	t.Helper()
	be := newBackend(t, "web", h)
	p, srv, c := front(t, o)
	p.Update(route.New(route.Config{VirtualHosts: []route.VirtualHost{{
		Routes: []route.Route{{PathType: route.PathPrefix, Path: "/", Backend: backendOf("default/web", defaults(), be.addr()),
			Ingress: "default/ing", Policies: pol}},
	}}}))
	return p, srv.URL, c, be
}

func refusedCount(p *Proxy, reason int) float64 {
	return testutil.ToFloat64(p.m.refused.WithLabelValues("default/ing", refusalNames[reason]))
}

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, v := range s {
		out[i] = netip.MustParsePrefix(v)
	}
	return out
}

func TestSourceAccess(t *testing.T) {
	loopback := prefixes("127.0.0.0/8", "::1/128")
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		access  route.SourceAccess
		xff     string
		want    int
	}{
		{"allowed peer", nil, route.SourceAccess{Allow: prefixes("127.0.0.0/8")}, "", 200},
		{"peer outside the allow list", nil, route.SourceAccess{Allow: prefixes("10.0.0.0/8")}, "", 403},
		{"empty allow list admits no one", nil, route.SourceAccess{Allow: []netip.Prefix{}}, "", 403},
		{"denied peer", nil, route.SourceAccess{Deny: prefixes("127.0.0.1/32")}, "", 403},
		{"deny wins over allow", nil, route.SourceAccess{Allow: prefixes("127.0.0.0/8"), Deny: prefixes("127.0.0.1/32")}, "", 403},
		{"untrusted peer's X-Forwarded-For is ignored", nil, route.SourceAccess{Allow: prefixes("10.0.0.0/8")}, "10.1.2.3", 403},
		{"trusted peer's X-Forwarded-For names the client", loopback, route.SourceAccess{Allow: prefixes("10.0.0.0/8")}, "10.1.2.3", 200},
		{"forged first hop behind a trusted proxy", loopback, route.SourceAccess{Allow: prefixes("10.0.0.0/8")}, "10.1.2.3, 192.0.2.9", 403},
		{"denied client behind a trusted proxy", loopback, route.SourceAccess{Deny: prefixes("2001:db8::/32")}, "2001:db8::7", 403},
		{"IPv6 client allowed", loopback, route.SourceAccess{Allow: prefixes("2001:db8::/32")}, "2001:db8::7", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.access
			p, url, c, be := policyFront(t, Options{TrustedProxies: tc.trusted}, &route.Policies{Access: &a}, nil)
			var hdr []string
			if tc.xff != "" {
				hdr = []string{"X-Forwarded-For", tc.xff}
			}
			res := get(t, c, url+"/", hdr...)
			if res.status != tc.want {
				t.Fatalf("status %d, want %d", res.status, tc.want)
			}
			refused := refusedCount(p, refusedSource)
			if tc.want == 403 && (refused != 1 || be.hits.Load() != 0) {
				t.Errorf("refused metric %v, backend hits %d; want 1 and 0", refused, be.hits.Load())
			}
			if tc.want == 200 && refused != 0 {
				t.Errorf("refused metric %v, want 0", refused)
			}
		})
	}
}

// chunked is a request body of unknown length (sent chunked).
type chunked struct{ r io.Reader }

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p) }

func TestBodyLimit(t *testing.T) {
	const limit = 1000
	for _, tc := range []struct {
		name    string
		size    int
		chunked bool
		want    int
	}{
		{"length at the limit", limit, false, 200},
		{"length over the limit", limit + 1, false, 413},
		{"chunked at the limit", limit, true, 200},
		{"chunked over the limit", 64 << 10, true, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, url, c, be := policyFront(t, Options{}, &route.Policies{BodyLimit: &route.BodyLimit{MaxBytes: limit}}, nil)
			var body io.Reader = strings.NewReader(strings.Repeat("x", tc.size))
			if tc.chunked {
				body = chunked{body}
			}
			req, _ := http.NewRequest("POST", url+"/", body)
			res := do(t, c, req)
			if res.status != tc.want {
				t.Fatalf("status %d, want %d (%s)", res.status, tc.want, res.body)
			}
			refused := refusedCount(p, refusedBodySize)
			switch {
			case tc.want == 413 && refused != 1:
				t.Errorf("refused metric %v, want 1", refused)
			case tc.want == 413 && !tc.chunked && be.hits.Load() != 0:
				t.Errorf("a body announced too large reached the backend")
			case tc.want == 200:
				if _, got := be.lastRequest(); len(got) != tc.size {
					t.Errorf("backend got %d bytes, want %d", len(got), tc.size)
				}
			}
		})
	}
}

func TestCORS(t *testing.T) {
	upstream := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "https://evil.example")
		w.Header().Set("Vary", "Accept-Encoding")
		io.WriteString(w, "ok")
	}
	list := &route.CORS{Origins: []string{"https://app.example.com"}, OriginSuffixes: []string{"https://.example.org"},
		Methods: "GET, POST", Headers: "X-Custom", ExposeHeaders: "X-Total", Credentials: true, MaxAge: 10 * time.Minute}
	star := &route.CORS{AnyOrigin: true, Methods: "GET", MaxAge: -1}
	preflight := []string{"Access-Control-Request-Method", "POST"}
	for _, tc := range []struct {
		name   string
		cors   *route.CORS
		method string
		hdr    []string
		want   map[string]string // header → value; "" for absent
		status int
		hits   int64
	}{
		{"preflight of an allowed origin", list, "OPTIONS", append([]string{"Origin", "https://app.example.com"}, preflight...), map[string]string{
			"Access-Control-Allow-Origin": "https://app.example.com", "Access-Control-Allow-Methods": "GET, POST",
			"Access-Control-Allow-Headers": "X-Custom", "Access-Control-Max-Age": "600", "Access-Control-Allow-Credentials": "true", "Vary": "Origin",
		}, 204, 0},
		{"preflight of a wildcard origin", list, "OPTIONS", append([]string{"Origin", "https://a.b.example.org"}, preflight...), map[string]string{
			"Access-Control-Allow-Origin": "https://a.b.example.org"}, 204, 0},
		{"preflight of another origin", list, "OPTIONS", append([]string{"Origin", "https://evil.example"}, preflight...), map[string]string{
			"Access-Control-Allow-Origin": "", "Access-Control-Allow-Methods": "", "Vary": "Origin"}, 204, 0},
		{"pattern needs a label", list, "OPTIONS", append([]string{"Origin", "https://.example.org"}, preflight...), map[string]string{
			"Access-Control-Allow-Origin": ""}, 204, 0},
		{"pattern keeps the scheme", list, "OPTIONS", append([]string{"Origin", "http://a.example.org"}, preflight...), map[string]string{
			"Access-Control-Allow-Origin": ""}, 204, 0},
		{"request of an allowed origin", list, "GET", []string{"Origin", "https://app.example.com"}, map[string]string{
			"Access-Control-Allow-Origin": "https://app.example.com", "Access-Control-Expose-Headers": "X-Total",
			"Access-Control-Allow-Credentials": "true", "Access-Control-Allow-Methods": ""}, 200, 1},
		{"request of another origin", list, "GET", []string{"Origin", "https://evil.example"}, map[string]string{
			"Access-Control-Allow-Origin": "", "Access-Control-Allow-Credentials": ""}, 200, 1},
		{"OPTIONS without a requested method goes upstream", list, "OPTIONS", []string{"Origin", "https://app.example.com"}, nil, 200, 1},
		{"any origin", star, "GET", []string{"Origin", "https://x.example"}, map[string]string{
			"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Credentials": "", "Vary": "Accept-Encoding"}, 200, 1},
		{"any origin preflight", star, "OPTIONS", append([]string{"Origin", "https://x.example"}, preflight...), map[string]string{
			"Access-Control-Allow-Origin": "*", "Access-Control-Max-Age": ""}, 204, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url, c, be := policyFront(t, Options{}, &route.Policies{CORS: tc.cors}, upstream)
			req, _ := http.NewRequest(tc.method, url+"/", nil)
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Add(tc.hdr[i], tc.hdr[i+1])
			}
			res := do(t, c, req)
			if res.status != tc.status || be.hits.Load() != tc.hits {
				t.Fatalf("status %d, backend hits %d; want %d, %d", res.status, be.hits.Load(), tc.status, tc.hits)
			}
			for k, v := range tc.want {
				got := strings.Join(res.header.Values(k), ", ")
				if k == "Vary" && v != "" && strings.Contains(got, v) {
					continue
				}
				if got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	clk := &fakeClock{}
	clk.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	rl := &route.RateLimit{RPS: 5, BurstRPS: 5, Status: 429, Exempt: prefixes("10.0.0.0/8")}
	p, url, c, _ := policyFront(t, Options{TrustedProxies: prefixes("127.0.0.0/8")}, &route.Policies{RateLimit: rl}, nil)
	p.now = clk.now
	count := func(n int, hdr ...string) (ok int) {
		for range n {
			res := get(t, c, url+"/", hdr...)
			switch res.status {
			case 200:
				ok++
			case 429:
			default:
				t.Fatalf("status %d", res.status)
			}
		}
		return ok
	}
	if got := count(50); got != 5 {
		t.Errorf("burst of 50: %d allowed, want 5", got)
	}
	clk.advance(time.Second)
	if got := count(50); got != 5 {
		t.Errorf("after a second: %d allowed, want 5", got)
	}
	clk.advance(200 * time.Millisecond)
	if got := count(10); got != 1 {
		t.Errorf("after 200ms: %d allowed, want 1", got)
	}
	if got := count(50, "X-Forwarded-For", "192.0.2.1"); got != 5 {
		t.Errorf("another client: %d allowed, want 5", got)
	}
	if got := count(50, "X-Forwarded-For", "10.0.0.1"); got != 50 {
		t.Errorf("exempt client: %d allowed, want 50", got)
	}
	if r := refusedCount(p, refusedRateLimit); r != 45+45+9+45 {
		t.Errorf("refused metric %v, want %d", r, 45+45+9+45)
	}
	// The state survives a new table with the same limits.
	p.Update(route.New(*p.Table().Config()))
	if got := count(10); got != 0 {
		t.Errorf("after a table swap: %d allowed, want 0 (the bucket is empty)", got)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	rl := &route.RateLimit{Concurrent: 2, Status: 503}
	p, url, c, _ := policyFront(t, Options{}, &route.Policies{RateLimit: rl}, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
	})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if res := get(t, c, url+"/hold"); res.status != 200 {
				t.Errorf("held request: %d", res.status)
			}
		})
	}
	<-entered
	<-entered
	if res := get(t, c, url+"/"); res.status != 503 {
		t.Errorf("third concurrent request: %d, want 503", res.status)
	}
	close(release)
	wg.Wait()
	if res := get(t, c, url+"/"); res.status != 200 {
		t.Errorf("after the others ended: %d, want 200", res.status)
	}
	if r := refusedCount(p, refusedConcurrency); r != 1 {
		t.Errorf("refused metric %v, want 1", r)
	}
}

// TestLimiterBounded sprays addresses at a limiter: its table stays
// bounded, and a client with requests in flight is never evicted.
func TestLimiterBounded(t *testing.T) {
	l := newLimiter(&route.RateLimit{RPS: 1, BurstRPS: 1, Concurrent: 1, Status: 429})
	held, reason := l.take(netip.MustParseAddr("192.0.2.1"), 1)
	if held == nil || reason != -1 {
		t.Fatal("first request not admitted")
	}
	for i := range 200_000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		if c, _ := l.take(a, 2); c != nil {
			l.release(c)
		}
	}
	total := 0
	for i := range l.shards {
		total += len(l.shards[i].clients)
	}
	if total > limiterShards*maxClientsPerShard {
		t.Errorf("%d clients kept, bound %d", total, limiterShards*maxClientsPerShard)
	}
	if _, reason := l.take(netip.MustParseAddr("192.0.2.1"), 3); reason != refusedRateLimit {
		t.Errorf("the held client was evicted: reason %d", reason)
	}
	// IPv6 clients count per /64.
	l6 := newLimiter(&route.RateLimit{RPS: 1, BurstRPS: 1, Status: 429})
	l6.take(netip.MustParseAddr("2001:db8::1"), 1)
	if _, reason := l6.take(netip.MustParseAddr("2001:db8::2"), 1); reason != refusedRateLimit {
		t.Error("two addresses of one /64 were counted apart")
	}
}

func TestBasicAuth(t *testing.T) {
	users := map[string]string{"alice": "{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=", "bob": "$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/"} // both "secret"
	for _, tc := range []struct {
		name       string
		auth       *route.BasicAuth
		user, pass string
		want       int
	}{
		{"no credentials", &route.BasicAuth{Realm: "Staff", Users: users}, "", "", 401},
		{"wrong password", &route.BasicAuth{Realm: "Staff", Users: users}, "alice", "guess", 401},
		{"unknown user", &route.BasicAuth{Realm: "Staff", Users: users}, "mallory", "secret", 401},
		{"right password", &route.BasicAuth{Realm: "Staff", Users: users}, "alice", "secret", 200},
		{"apr1: right password", &route.BasicAuth{Realm: "Staff", Users: users}, "bob", "secret", 200},
		{"apr1: wrong password", &route.BasicAuth{Realm: "Staff", Users: users}, "bob", "Secret", 401},
		{"unusable Secret fails closed", &route.BasicAuth{Realm: "Staff", Refuse: true}, "alice", "secret", 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, url, c, be := policyFront(t, Options{}, &route.Policies{BasicAuth: tc.auth}, nil)
			req, _ := http.NewRequest("GET", url+"/", nil)
			if tc.user != "" {
				req.SetBasicAuth(tc.user, tc.pass)
			}
			res := do(t, c, req)
			if res.status != tc.want {
				t.Fatalf("status %d, want %d", res.status, tc.want)
			}
			switch tc.want {
			case 401:
				if got := res.header.Get("Www-Authenticate"); got != `Basic realm="Staff", charset="UTF-8"` {
					t.Errorf("challenge %q", got)
				}
				if refusedCount(p, refusedAuth) != 1 || be.hits.Load() != 0 {
					t.Error("refusal not counted, or the backend was reached")
				}
			case 503:
				if refusedCount(p, refusedAuthConfig) != 1 || be.hits.Load() != 0 {
					t.Error("refusal not counted, or the backend was reached")
				}
			}
		})
	}
}

func TestForwardAuth(t *testing.T) {
	var mu sync.Mutex
	var seen http.Header
	auth := newBackend(t, "auth", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Clone()
		mu.Unlock()
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			w.Header().Set("X-Auth-User", "alice")
		case "Bearer banned":
			w.WriteHeader(http.StatusForbidden)
		case "Bearer broken":
			w.WriteHeader(http.StatusBadGateway)
		case "Bearer slow":
			select { // until the proxy gives up (its timeout closes the connection)
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="x"`)
			w.WriteHeader(http.StatusUnauthorized)
		}
	})
	fa := func(signin string) *route.ForwardAuth {
		return &route.ForwardAuth{Backend: backendOf("default/auth", defaults(), auth.addr()), Host: "auth.default.svc",
			Path: "/check?x=1", ResponseHeaders: []string{"X-Auth-User"}, SignIn: signin, Timeout: 500 * time.Millisecond}
	}
	for _, tc := range []struct {
		name, token, signin string
		want                int
		reason              int
	}{
		{"allowed", "good", "", 200, -1},
		{"no credentials", "", "", 401, refusedForwardAuth},
		{"sign-in redirect", "", "https://login.example.com/start", 302, refusedForwardAuth},
		{"forbidden", "banned", "", 403, refusedForwardAuth},
		{"auth service failure", "broken", "", 500, refusedForwardAuthError},
		{"auth service timeout", "slow", "", 500, refusedForwardAuthError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, url, c, be := policyFront(t, Options{}, &route.Policies{ForwardAuth: fa(tc.signin)}, nil)
			c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			hdr := []string{"X-Auth-User", "forged"}
			if tc.token != "" {
				hdr = append(hdr, "Authorization", "Bearer "+tc.token)
			}
			res := get(t, c, url+"/app/page?q=1", hdr...)
			if res.status != tc.want {
				t.Fatalf("status %d, want %d", res.status, tc.want)
			}
			mu.Lock()
			got := seen
			mu.Unlock()
			if got.Get("X-Original-Url") != url+"/app/page?q=1" || got.Get("X-Original-Method") != "GET" {
				t.Errorf("auth service saw X-Original-URL %q, X-Original-Method %q", got.Get("X-Original-Url"), got.Get("X-Original-Method"))
			}
			switch tc.want {
			case 200:
				req, _ := be.lastRequest()
				if u := req.Header.Values("X-Auth-User"); len(u) != 1 || u[0] != "alice" {
					t.Errorf("upstream X-Auth-User %q, want the auth service's", u)
				}
			case 302:
				if loc := res.header.Get("Location"); !strings.HasPrefix(loc, "https://login.example.com/start?rd=http%3A%2F%2F") {
					t.Errorf("Location %q", loc)
				}
			case 401:
				if res.header.Get("Www-Authenticate") != `Bearer realm="x"` {
					t.Errorf("challenge %q", res.header.Get("Www-Authenticate"))
				}
			}
			if tc.reason >= 0 && (refusedCount(p, tc.reason) != 1 || be.hits.Load() != 0) {
				t.Errorf("refusal not counted, or the backend was reached")
			}
		})
	}
	t.Run("unusable auth URL", func(t *testing.T) {
		p, url, c, be := policyFront(t, Options{}, &route.Policies{ForwardAuth: &route.ForwardAuth{Refuse: true}}, nil)
		if res := get(t, c, url+"/"); res.status != 503 || be.hits.Load() != 0 || refusedCount(p, refusedAuthConfig) != 1 {
			t.Errorf("status %d, backend hits %d", res.status, be.hits.Load())
		}
	})
}

func TestErrorPages(t *testing.T) {
	pages := newBackend(t, "pages", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		code, _ := strconv.Atoi(r.Header.Get("X-Code"))
		w.WriteHeader(code) // as ingress-nginx's custom error backend does
		io.WriteString(w, "page "+r.Header.Get("X-Code")+" "+r.Header.Get("X-Format")+" "+r.Header.Get("X-Original-Uri")+" "+r.Header.Get("X-Ingress-Name"))
	})
	upstream := func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fail":
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "upstream detail")
		case "/broken":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "not intercepted")
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
		default:
			io.WriteString(w, "fine")
		}
	}
	for _, tc := range []struct {
		name, path string
		pagesUp    bool
		status     int
		body       string
	}{
		{"intercepted 503", "/fail?x=1", true, 503, "page 503 text/html /fail?x=1 default/ing"},
		{"intercepted 404", "/missing", true, 404, "page 404 text/html /missing default/ing"},
		{"status not listed", "/broken", true, 500, "not intercepted"},
		{"success", "/", true, 200, "fine"},
		{"error Service down", "/fail", false, 503, string(bodyUpstreamError)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := pages.addr()
			if !tc.pagesUp {
				addr = deadAddr(t)
			}
			ep := &route.ErrorPages{Codes: []int{404, 503}, Backend: backendOf("default/pages", defaults(), addr)}
			_, url, c, _ := policyFront(t, Options{}, &route.Policies{ErrorPages: ep}, upstream)
			res := get(t, c, url+tc.path, "Accept", "text/html")
			if res.status != tc.status || res.body != tc.body {
				t.Errorf("got %d %q, want %d %q", res.status, res.body, tc.status, tc.body)
			}
		})
	}
}

// TestPoliciesSwap serves requests through rate-limited routes while tables
// with changing exempt ranges and statuses are swapped in (run with -race):
// the limiter's buckets stay, the rest comes from the view.
func TestPoliciesSwap(t *testing.T) {
	rl := func(status int) *route.Policies {
		return &route.Policies{RateLimit: &route.RateLimit{RPS: 1000000, BurstRPS: 1000000, Concurrent: 100, Status: status, Exempt: prefixes("10.0.0.0/8")},
			CORS: &route.CORS{AnyOrigin: true, MaxAge: -1}}
	}
	p, url, c, be := policyFront(t, Options{}, rl(429), nil)
	table := func(status int) *route.Table {
		return route.New(route.Config{VirtualHosts: []route.VirtualHost{{Routes: []route.Route{{PathType: route.PathPrefix, Path: "/",
			Backend: backendOf("default/web", defaults(), be.addr()), Ingress: "default/ing", Policies: rl(status)}}}}})
	}
	first := p.view.Load().routes
	var lm *limiter
	for _, rv := range first {
		lm = rv.policy.limit
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			p.Update(table(429 + i%2))
		}
	})
	var clients sync.WaitGroup
	for range 4 {
		clients.Go(func() {
			for range 50 {
				if res := get(t, c, url+"/", "Origin", "https://a.example"); res.status != 200 {
					t.Errorf("status %d", res.status)
				}
			}
		})
	}
	clients.Wait()
	close(done)
	wg.Wait()
	for _, rv := range p.view.Load().routes {
		if rv.policy.limit != lm {
			t.Error("the limiter was replaced by a table with the same limits")
		}
	}
}
