package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"sluice.dev/sluice/internal/route"
)

func TestNotReadyNoRouteNoEndpoints(t *testing.T) {
	p, srv, c := front(t, Options{})
	if p.Table() != nil {
		t.Fatal("Table() before Update is not nil")
	}
	if r := get(t, c, srv.URL+"/"); r.status != 503 || !strings.HasPrefix(r.body, "sluice: ") {
		t.Errorf("before Update: %d %q, want 503", r.status, r.body)
	}

	a := newBackend(t, "a", nil)
	tbl := route.New(route.Config{VirtualHosts: []route.VirtualHost{
		{Host: "app.example", Routes: []route.Route{
			{PathType: route.PathPrefix, Path: "/api", Backend: backendOf("ns/api", defaults(), a.addr())},
			{PathType: route.PathPrefix, Path: "/empty", Backend: backendOf("ns/empty", defaults())},
		}},
	}})
	p.Update(tbl)
	if p.Table() != tbl {
		t.Fatal("Table() is not the installed table")
	}
	req, _ := http.NewRequest("GET", srv.URL+"/nothing/<script>", nil)
	req.Host = "app.example"
	if r := do(t, c, req); r.status != 404 || strings.Contains(r.body, "<script>") ||
		r.header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("no route: %d %q %v, want short plain 404", r.status, r.body, r.header)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/api/x", nil)
	req.Host = "other.example"
	if r := do(t, c, req); r.status != 404 {
		t.Errorf("unknown host: %d, want 404", r.status)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/empty", nil)
	req.Host = "app.example"
	if r := do(t, c, req); r.status != 503 {
		t.Errorf("no endpoints: %d, want 503", r.status)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/api/x", nil)
	req.Host = "APP.example:8080"
	if r := do(t, c, req); r.status != 200 || r.body != "a\n" {
		t.Errorf("routed: %d %q, want 200 a", r.status, r.body)
	}
	p.Update(nil)
	if r := get(t, c, srv.URL+"/api"); r.status != 503 {
		t.Errorf("after Update(nil): %d, want 503", r.status)
	}
}

func TestRoutingHostsAndDefault(t *testing.T) {
	a, b, d := newBackend(t, "a", nil), newBackend(t, "b", nil), newBackend(t, "d", nil)
	p, srv, c := front(t, Options{})
	p.Update(route.New(route.Config{
		VirtualHosts: []route.VirtualHost{
			{Host: "a.example", Routes: []route.Route{{Path: "/", Backend: backendOf("ns/a", defaults(), a.addr()), Ingress: "ns/ia"}}},
			{Host: "*.b.example", Routes: []route.Route{{Path: "/", Backend: backendOf("ns/b", defaults(), b.addr()), Ingress: "ns/ib"}}},
		},
		DefaultBackend: backendOf("ns/d", defaults(), d.addr()),
	}))
	for host, want := range map[string]string{"a.example": "a\n", "x.b.example": "b\n", "c.example": "d\n"} {
		req, _ := http.NewRequest("GET", srv.URL+"/p", nil)
		req.Host = host
		if r := do(t, c, req); r.status != 200 || r.body != want {
			t.Errorf("host %s: %d %q, want %q", host, r.status, r.body, want)
		}
		up, _ := map[string]*testBackend{"a\n": a, "b\n": b, "d\n": d}[want].lastRequest()
		if up.Host != host {
			t.Errorf("host %s: upstream saw Host %q", host, up.Host)
		}
	}
}

func TestForwardedHeaders(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		trusted                   []netip.Prefix
		wantFor, wantProto, wHost string
		wantPort                  string
	}{
		{"untrusted", nil, "127.0.0.1", "http", "app.example:1234", "1234"},
		{"untrusted other prefix", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, "127.0.0.1", "http", "app.example:1234", "1234"},
		{"trusted", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, "203.0.113.9, 10.1.1.1, 127.0.0.1", "https", "public.example", "443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newBackend(t, "a", nil)
			p, srv, c := front(t, Options{TrustedProxies: tc.trusted})
			p.Update(tableOf(backendOf("ns/a", defaults(), a.addr())))
			req, _ := http.NewRequest("GET", srv.URL+"/x?q=1", nil)
			req.Host = "app.example:1234"
			req.Header.Add("X-Forwarded-For", "203.0.113.9")
			req.Header.Add("X-Forwarded-For", "10.1.1.1")
			req.Header.Set("X-Forwarded-Proto", "https")
			req.Header.Set("X-Forwarded-Host", "public.example")
			req.Header.Set("X-Forwarded-Port", "443")
			req.Header.Set("Forwarded", "for=1.1.1.1")
			if r := do(t, c, req); r.status != 200 {
				t.Fatalf("status %d", r.status)
			}
			up, _ := a.lastRequest()
			h := up.Header
			if got := strings.Join(h.Values("X-Forwarded-For"), "|"); got != tc.wantFor {
				t.Errorf("X-Forwarded-For = %q, want %q", got, tc.wantFor)
			}
			if got := h.Get("X-Forwarded-Proto"); got != tc.wantProto {
				t.Errorf("X-Forwarded-Proto = %q, want %q", got, tc.wantProto)
			}
			if got := h.Get("X-Forwarded-Host"); got != tc.wHost {
				t.Errorf("X-Forwarded-Host = %q, want %q", got, tc.wHost)
			}
			if got := h.Get("X-Forwarded-Port"); got != tc.wantPort {
				t.Errorf("X-Forwarded-Port = %q, want %q", got, tc.wantPort)
			}
			if got := h.Get("Forwarded"); (got != "") == (tc.trusted == nil || tc.name != "trusted") {
				t.Errorf("Forwarded = %q", got)
			}
			if up.Host != "app.example:1234" || up.URL.RequestURI() != "/x?q=1" {
				t.Errorf("upstream saw Host %q URI %q", up.Host, up.URL.RequestURI())
			}
			if ua := h.Get("User-Agent"); ua != "Go-http-client/1.1" {
				t.Errorf("User-Agent = %q, want the client's", ua)
			}
		})
	}
}

func TestDefaultForwardedPort(t *testing.T) {
	a := newBackend(t, "a", nil)
	p, srv, c := front(t, Options{})
	p.Update(tableOf(backendOf("ns/a", defaults(), a.addr())))
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.Host = "app.example"
	req.Header.Set("User-Agent", "") // the Go client then sends none
	do(t, c, req)
	up, _ := a.lastRequest()
	if got := up.Header.Get("X-Forwarded-Port"); got != "80" {
		t.Errorf("X-Forwarded-Port = %q, want 80", got)
	}
	if _, ok := up.Header["User-Agent"]; ok {
		t.Errorf("the proxy added a User-Agent: %q", up.Header.Get("User-Agent"))
	}
}

func TestHopByHopHeaders(t *testing.T) {
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Resp-Hop")
		w.Header().Set("X-Resp-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Proxy-Authenticate", "Basic")
		w.Header().Set("X-Resp-Keep", "1")
		w.Write([]byte("ok"))
	})
	p, srv, c := front(t, Options{})
	p.Update(tableOf(backendOf("ns/a", defaults(), a.addr())))
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.Header.Set("Connection", "X-Hop, keep-alive")
	req.Header.Set("X-Hop", "1")
	req.Header.Set("Keep-Alive", "300")
	req.Header.Set("Proxy-Authorization", "secret")
	req.Header.Set("Proxy-Connection", "keep-alive")
	req.Header.Set("Proxy", "http://evil")
	req.Header.Set("Te", "trailers, deflate")
	req.Header.Set("Upgrade", "websocket") // not listed in Connection: not an upgrade
	req.Header.Set("X-Keep", "1")
	r := do(t, c, req)
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	up, _ := a.lastRequest()
	for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Proxy", "Upgrade"} {
		if v, ok := up.Header[k]; ok {
			t.Errorf("upstream got hop-by-hop %s: %q", k, v)
		}
	}
	if got := up.Header.Get("Te"); got != "trailers" {
		t.Errorf("Te = %q, want trailers", got)
	}
	if up.Header.Get("X-Keep") != "1" {
		t.Error("end-to-end request header X-Keep dropped")
	}
	for _, k := range []string{"X-Resp-Hop", "Keep-Alive", "Proxy-Authenticate"} {
		if v, ok := r.header[k]; ok {
			t.Errorf("client got hop-by-hop %s: %q", k, v)
		}
	}
	if r.header.Get("X-Resp-Keep") != "1" {
		t.Error("end-to-end response header X-Resp-Keep dropped")
	}
}

func TestTrailers(t *testing.T) {
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		w.Write([]byte("body"))
		w.Header().Set("X-Sum", "42")
	})
	p, srv, c := front(t, Options{})
	p.Update(tableOf(backendOf("ns/a", defaults(), a.addr())))
	res, err := c.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(res.Body)
	res.Body.Close()
	if got := res.Trailer.Get("X-Sum"); got != "42" || buf.String() != "body" {
		t.Errorf("trailer X-Sum = %q body %q, want 42 body", got, buf.String())
	}
}

func TestMetricsAndAccessLog(t *testing.T) {
	a := newBackend(t, "a", nil)
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	p, srv, c := front(t, Options{Registerer: reg, AccessLog: slog.New(slog.NewJSONHandler(&logs, nil))})
	dead := deadAddr(t)
	p.Update(tableOf(backendOf("ns/a", route.Policy{Algorithm: route.RoundRobin, Retries: 1}, a.addr(), dead)))
	for range 4 {
		if r := get(t, c, srv.URL+"/x"); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	}
	if got := value(t, p.m.requests.WithLabelValues("default/ing", "ns/a", "2xx")); got != 4 {
		t.Errorf("requests_total 2xx = %v, want 4", got)
	}
	// Round robin over [a, dead]: requests 2-4 first try dead, then a.
	if got := value(t, p.m.upstreamErrors.WithLabelValues("ns/a", "connect")); got != 3 {
		t.Errorf("upstream_errors_total connect = %v, want 3", got)
	}
	if got := value(t, p.m.retries.WithLabelValues("ns/a", "connect")); got != 3 {
		t.Errorf("upstream_retries_total = %v, want 3", got)
	}
	if got := value(t, p.m.ejected.WithLabelValues("ns/a")); got != 1 {
		t.Errorf("endpoints_ejected_total = %v, want 1", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_request_duration_seconds" {
			for _, m := range mf.GetMetric() {
				if c := m.GetHistogram().GetSampleCount(); c != 0 && c != 4 {
					t.Errorf("duration samples of %v = %d, want 4", m.GetLabel(), c)
				}
			}
			if n := len(mf.GetMetric()); n != 2 { // ns/a, and the unrouted series
				t.Errorf("duration series = %d, want 2", n)
			}
		}
	}
	line, _, _ := bytes.Cut(logs.Bytes(), []byte("\n"))
	var entry map[string]any
	if err := json.Unmarshal(line, &entry); err != nil {
		t.Fatalf("access log line %q: %v", line, err)
	}
	for k, want := range map[string]any{"method": "GET", "path": "/x", "status": 200.0, "upstream": a.addr(),
		"ingress": "default/ing", "client": "127.0.0.1", "bytes": 2.0} {
		if entry[k] != want {
			t.Errorf("access log %s = %v, want %v (line %s)", k, entry[k], want, line)
		}
	}
	for _, k := range []string{"host", "duration_seconds", "upstream_seconds", "referer", "tls_version", "sni"} {
		if _, ok := entry[k]; !ok {
			t.Errorf("access log lacks %s", k)
		}
	}
	// A second proxy on the same registry shares the collectors.
	New(Options{Registerer: reg})
}

// TestMetricSeriesFollowTheTable: a route's series appear with its first
// request, not when the table is installed (10,000 Ingresses must not make
// a page of zero-valued series); a Service's error counters exist at zero
// from the table on; both go when a table drops the route or the Service
// (they must not pile up as Ingresses come and go).
func TestMetricSeriesFollowTheTable(t *testing.T) {
	a := newBackend(t, "a", nil)
	reg := prometheus.NewRegistry()
	p, srv, c := front(t, Options{Registerer: reg})
	routeTo := func(ing, svc string, addr string) route.Route {
		return route.Route{PathType: route.PathPrefix, Path: "/" + strings.ReplaceAll(ing, "/", "-"),
			Backend: backendOf(svc, defaults(), addr), Ingress: ing}
	}
	dead := deadAddr(t)
	both := route.New(route.Config{VirtualHosts: []route.VirtualHost{{Routes: []route.Route{
		routeTo("ns/one", "ns/a", a.addr()), routeTo("ns/two", "ns/b", dead),
	}}}})
	onlyTwo := route.New(route.Config{VirtualHosts: []route.VirtualHost{{Routes: []route.Route{
		routeTo("ns/two", "ns/b", dead),
	}}}})
	// series returns the label sets of name's series, as "ingress service"
	// or "kind service" (labels in name order, without code_class).
	series := func(name string) map[string]bool {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				var vs []string
				for _, l := range m.GetLabel() {
					if l.GetName() != "code_class" {
						vs = append(vs, l.GetValue())
					}
				}
				out[strings.Join(vs, " ")] = true
			}
		}
		return out
	}
	p.Update(both)
	if got := series("sluice_request_duration_seconds"); len(got) != 1 || !got[" "] {
		t.Fatalf("before any request: duration series %v, want only the unrouted one", got)
	}
	if got := series("sluice_upstream_errors_total"); len(got) != 8 || !got["connect ns/a"] || !got["connect ns/b"] {
		t.Fatalf("before any request: upstream error series %v, want ns/a's and ns/b's, at zero", got)
	}
	if r := get(t, c, srv.URL+"/ns-one"); r.status != 200 {
		t.Fatalf("ns/one: status %d", r.status)
	}
	if r := get(t, c, srv.URL+"/ns-two"); r.status != 502 {
		t.Fatalf("ns/two: status %d, want 502 (no endpoint answers)", r.status)
	}
	if got := series("sluice_request_duration_seconds"); !got["ns/one ns/a"] || !got["ns/two ns/b"] {
		t.Fatalf("after requests: duration series %v, want ns/one and ns/two", got)
	}
	if got := value(t, p.m.responses.WithLabelValues("ns/one", "GET", "200")); got != 1 {
		t.Errorf("sluice_responses_total{ns/one,GET,200} = %v, want 1", got)
	}
	if got := value(t, p.m.responses.WithLabelValues("ns/two", "GET", "502")); got != 1 {
		t.Errorf("sluice_responses_total{ns/two,GET,502} = %v, want 1", got)
	}
	if got := series("sluice_upstream_response_duration_seconds"); !got["ns/a"] {
		t.Errorf("upstream latency series %v, want ns/a's", got)
	}
	if got := series("sluice_response_size_bytes"); !got["ns/one"] || !got["ns/two"] {
		t.Errorf("response size series %v, want ns/one's and ns/two's", got)
	}
	bErrors := value(t, p.m.upstreamErrors.WithLabelValues("ns/b", "connect"))
	if bErrors == 0 {
		t.Fatal("no connect error counted for ns/b")
	}
	// A new table with the same routes keeps the series and their counts.
	p.Update(route.New(*both.Config()))
	if got := value(t, p.m.requests.WithLabelValues("ns/one", "ns/a", "2xx")); got != 1 {
		t.Fatalf("after an equal table: requests of ns/one = %v, want 1", got)
	}
	p.Update(onlyTwo)
	for _, name := range []string{"sluice_request_duration_seconds", "sluice_requests_total"} {
		if got := series(name); got["ns/one ns/a"] || !got["ns/two ns/b"] || !got[" "] {
			t.Errorf("after ns/one is dropped: %s series %v, want ns/two's and the unrouted, not ns/one's", name, got)
		}
	}
	if got := series("sluice_upstream_errors_total"); got["connect ns/a"] || !got["connect ns/b"] {
		t.Errorf("after ns/one is dropped: upstream error series %v, want ns/b's kept and ns/a's gone", got)
	}
	if got := series("sluice_responses_total"); got["200 ns/one GET"] || !got["502 ns/two GET"] {
		t.Errorf("after ns/one is dropped: response series %v, want ns/two's kept and ns/one's gone", got)
	}
	if got := value(t, p.m.upstreamErrors.WithLabelValues("ns/b", "connect")); got != bErrors {
		t.Errorf("after ns/one is dropped: ns/b's connect errors = %v, want the %v counted before", got, bErrors)
	}
	p.Update(nil)
	if got := series("sluice_request_duration_seconds"); len(got) != 1 || !got[" "] {
		t.Errorf("without a table: duration series %v, want only the unrouted one", got)
	}
	if got := series("sluice_upstream_errors_total"); len(got) != 0 {
		t.Errorf("without a table: upstream error series %v, want none", got)
	}
}

// value reads a counter.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestClientIP(t *testing.T) {
	p := New(Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	for _, tc := range []struct{ remote, xff, want string }{
		{"192.0.2.1:5", "203.0.113.1", "192.0.2.1"},              // untrusted peer: its own address
		{"10.0.0.1:5", "", "10.0.0.1"},                           // trusted, nothing forwarded
		{"10.0.0.1:5", "198.51.100.7, 10.9.9.9", "198.51.100.7"}, // skip trusted hops
		{"10.0.0.1:5", "6.6.6.6, 198.51.100.7", "198.51.100.7"},  // rightmost untrusted wins
		{"10.0.0.1:5", "garbage, 10.2.2.2", "10.2.2.2"},          // stop at junk
		{"[::1]:5", "198.51.100.7", "::1"},                       // untrusted v6 peer
	} {
		r := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := p.clientIP(r); got != tc.want {
			t.Errorf("clientIP(%s, %q) = %q, want %q", tc.remote, tc.xff, got, tc.want)
		}
	}
}

func TestConnectRefused(t *testing.T) {
	p := New(Options{})
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest("CONNECT", "http://example.com:443", nil))
	if w.Code != 405 {
		t.Errorf("CONNECT: %d, want 405", w.Code)
	}
}

// TestMethodCodeBounded: the method and code labels of
// sluice_responses_total take a bounded set of values, whatever a client
// sends.
func TestMethodCodeBounded(t *testing.T) {
	for _, tc := range []struct {
		method string
		status int
		want   string
	}{
		{"GET", 200, "GET 200"},
		{"PATCH", 499, "PATCH 499"},
		{"get", 200, "OTHER 200"},
		{"BREW", 418, "OTHER 418"},
		{strings.Repeat("X", 1000), 200, "OTHER 200"},
		{"POST", 600, "POST other"},
		{"POST", 99, "POST other"},
	} {
		k := methodCode(tc.method, tc.status)
		code := "other"
		if k%1000 != 0 {
			code = strconv.Itoa(k % 1000)
		}
		if got := methodNames[k/1000] + " " + code; got != tc.want {
			t.Errorf("methodCode(%.10q, %d) labels %q, want %q", tc.method, tc.status, got, tc.want)
		}
	}
}

// TestAccessLogFields: the access log writes exactly the chosen fields
// (the query string only when chosen), and an unknown field is refused.
func TestAccessLogFields(t *testing.T) {
	a := newBackend(t, "a", nil)
	var logs bytes.Buffer
	p, srv, c := front(t, Options{AccessLog: slog.New(slog.NewJSONHandler(&logs, nil)),
		AccessLogFields: []string{"method", "query", "status", "duration_seconds"}})
	p.Update(tableOf(backendOf("ns/a", route.Policy{}, a.addr())))
	if r := get(t, c, srv.URL+"/x?token=t1"); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	var entry map[string]any
	line, _, _ := bytes.Cut(logs.Bytes(), []byte("\n"))
	if err := json.Unmarshal(line, &entry); err != nil {
		t.Fatalf("access log line %q: %v", line, err)
	}
	for _, k := range []string{"time", "level", "msg"} {
		delete(entry, k)
	}
	if len(entry) != 4 || entry["method"] != "GET" || entry["query"] != "token=t1" || entry["status"] != 200.0 {
		t.Errorf("access log %v, want exactly method, query, status, duration_seconds", entry)
	}
	if _, ok := entry["duration_seconds"].(float64); !ok {
		t.Errorf("duration_seconds %v is not a number of seconds", entry["duration_seconds"])
	}
	if err := CheckAccessLogFields([]string{"method", "password"}); err == nil {
		t.Error("an unknown field was accepted")
	}
	if slices.Contains(DefaultAccessLogFields, "query") {
		t.Error("the default fields log the query string")
	}
}

// TestAccessLogRequestBytes: request_bytes is the body the proxy read from
// the client, chunked bodies (no declared length) included.
func TestAccessLogRequestBytes(t *testing.T) {
	a := newBackend(t, "a", nil)
	var logs bytes.Buffer
	p, srv, c := front(t, Options{AccessLog: slog.New(slog.NewJSONHandler(&logs, nil)),
		AccessLogFields: []string{"method", "request_bytes"}})
	p.Update(tableOf(backendOf("ns/a", route.Policy{}, a.addr())))
	for _, body := range []io.Reader{
		strings.NewReader(strings.Repeat("x", 1000)),                 // Content-Length
		io.MultiReader(strings.NewReader(strings.Repeat("y", 1500))), // chunked
		nil,
	} {
		req, _ := http.NewRequest("POST", srv.URL+"/x", body)
		if r := do(t, c, req); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	}
	var got []float64
	for line := range bytes.Lines(logs.Bytes()) {
		var entry map[string]any
		if err := json.Unmarshal(line, &entry); err != nil {
			t.Fatalf("access log line %q: %v", line, err)
		}
		n, _ := entry["request_bytes"].(float64)
		got = append(got, n)
	}
	if want := []float64{1000, 1500, 0}; !slices.Equal(got, want) {
		t.Errorf("request_bytes %v, want %v", got, want)
	}
}
