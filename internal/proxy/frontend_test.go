package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/sluice/internal/route"
)

// httpsTable routes secure.example.com (redirect, HSTS), open.example.com
// (HSTS only) and everything else (neither) to b.
func httpsTable(b *route.Backend) *route.Table {
	rt := func(redirect bool, hsts string) []route.Route {
		return []route.Route{{PathType: route.PathPrefix, Path: "/", Backend: b, Ingress: "default/ing", SSLRedirect: redirect, HSTS: hsts}}
	}
	return route.New(route.Config{VirtualHosts: []route.VirtualHost{
		{Host: "", Routes: rt(false, "")},
		{Host: "open.example.com", Routes: rt(false, "max-age=60")},
		{Host: "secure.example.com", Routes: rt(true, "max-age=600; includeSubDomains")},
	}})
}

func TestRedirectAndHSTS(t *testing.T) {
	a := newBackend(t, "a", nil)
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	cases := []struct {
		name    string
		trusted bool
		host    string
		hdr     []string
		status  int
		loc     string
		hsts    string
	}{
		{"plain to tls host", false, "secure.example.com:8080", nil, 308, "https://secure.example.com/p/a%20b?q=1", ""},
		{"forwarded https from trusted peer", true, "secure.example.com", []string{"X-Forwarded-Proto", "https"}, 200, "", "max-age=600; includeSubDomains"},
		{"forwarded https from untrusted peer", false, "secure.example.com", []string{"X-Forwarded-Proto", "https"}, 308, "https://secure.example.com/p/a%20b?q=1", ""},
		{"forwarded http from trusted peer", true, "secure.example.com", []string{"X-Forwarded-Proto", "http"}, 308, "https://secure.example.com/p/a%20b?q=1", ""},
		{"hsts only over https", false, "open.example.com", nil, 200, "", ""},
		{"hsts over forwarded https", true, "open.example.com", []string{"X-Forwarded-Proto", "HTTPS, http"}, 200, "", "max-age=60"},
		{"no tls host", false, "other.example.com", nil, 200, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{}
			if tc.trusted {
				o.TrustedProxies = loopback
			}
			p, srv, c := front(t, o)
			p.Update(httpsTable(backendOf("ns/a", defaults(), a.addr())))
			c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			req, _ := http.NewRequest("POST", srv.URL+"/p/a%20b?q=1", strings.NewReader("body"))
			req.Host = tc.host
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			r := do(t, c, req)
			if r.status != tc.status || r.header.Get("Location") != tc.loc || r.header.Get("Strict-Transport-Security") != tc.hsts {
				t.Errorf("got %d Location=%q HSTS=%q, want %d %q %q", r.status, r.header.Get("Location"),
					r.header.Get("Strict-Transport-Security"), tc.status, tc.loc, tc.hsts)
			}
		})
	}
}

func TestHSTSOverTLS(t *testing.T) {
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", "max-age=1") // the route's wins
	})
	p := New(Options{StdTransport: stdMode})
	p.Update(httpsTable(backendOf("ns/a", defaults(), a.addr())))
	srv := httptest.NewTLSServer(p)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.Host = "secure.example.com"
	r := do(t, srv.Client(), req)
	if r.status != 200 || strings.Join(r.header.Values("Strict-Transport-Security"), "|") != "max-age=600; includeSubDomains" {
		t.Errorf("got %d HSTS %q", r.status, r.header.Values("Strict-Transport-Security"))
	}
}

func TestRequestID(t *testing.T) {
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "from-upstream") // the proxy's wins
		w.Write([]byte(r.Header.Get("X-Request-Id")))
	})
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	var logs bytes.Buffer
	p, srv, c := front(t, Options{RequestID: true, AccessLog: slog.New(slog.NewJSONHandler(&logs, nil))})
	p.Update(tableOf(backendOf("ns/a", defaults(), a.addr())))
	seen := map[string]bool{}
	for range 3 {
		r := get(t, c, srv.URL+"/", "X-Request-Id", "client-chosen", "User-Agent", "test-agent")
		id := r.header.Get("X-Request-Id")
		if len(id) != 32 || r.body != id || seen[id] || len(r.header.Values("X-Request-Id")) != 1 {
			t.Errorf("untrusted peer: response id %q, upstream saw %q, seen before %v", id, r.body, seen[id])
		}
		seen[id] = true
	}
	var entry map[string]any
	line, _, _ := bytes.Cut(logs.Bytes(), []byte("\n"))
	if err := json.Unmarshal(line, &entry); err != nil {
		t.Fatal(err)
	}
	if !seen[entry["request_id"].(string)] || entry["user_agent"] != "test-agent" || entry["protocol"] != "HTTP/1.1" ||
		entry["retries"] != 0.0 || entry["upstream_seconds"] == nil {
		t.Errorf("access log %s", line)
	}

	p2, srv2, c2 := front(t, Options{RequestID: true, TrustedProxies: loopback})
	p2.Update(tableOf(backendOf("ns/a", defaults(), a.addr())))
	if r := get(t, c2, srv2.URL+"/", "X-Request-Id", "0f1e-2d3c"); r.body != "0f1e-2d3c" || r.header.Get("X-Request-Id") != "0f1e-2d3c" {
		t.Errorf("trusted peer's id not kept: upstream %q, response %q", r.body, r.header.Get("X-Request-Id"))
	}
	if r := get(t, c2, srv2.URL+"/", "X-Request-Id", "bad id\twith space"); len(r.body) != 32 {
		t.Errorf("trusted peer's invalid id kept: %q", r.body)
	}

	// Off: the header passes untouched and none is made up.
	p3, srv3, c3 := front(t, Options{})
	p3.Update(tableOf(backendOf("ns/a", defaults(), a.addr())))
	if r := get(t, c3, srv3.URL+"/"); r.body != "" {
		t.Errorf("request id without the option: %q", r.body)
	}
}

func TestValidRequestID(t *testing.T) {
	for id, want := range map[string]bool{
		"": false, "abc": true, "6ba7b810-9dad-11d1-80b4-00c04fd430c8": true, "00-4bf92f-00f067aa-01": true,
		"a b": false, "a\r\nb": false, "é": false, "a;b": false, strings.Repeat("a", maxRequestIDLen): true,
		strings.Repeat("a", maxRequestIDLen+1): false, "dGVzdA==": true,
	} {
		if got := validRequestID(id); got != want {
			t.Errorf("validRequestID(%q) = %v, want %v", id, got, want)
		}
	}
}

// FuzzRequestID: an ID kept from a peer is always safe in a header and a
// log line.
func FuzzRequestID(f *testing.F) {
	f.Add("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	f.Add("a\r\nX-Evil: 1")
	f.Add("")
	f.Fuzz(func(t *testing.T, id string) {
		if !validRequestID(id) {
			return
		}
		if len(id) > maxRequestIDLen || strings.ContainsAny(id, " \t\r\n\x00\"\\,;") {
			t.Fatalf("accepted %q", id)
		}
	})
}

// TestBrokenRequestBody: a chunked body whose framing breaks after the
// upstream was contacted is the client's error: 400, a client error
// counted, nothing against the endpoint.
func TestBrokenRequestBody(t *testing.T) {
	a := newBackend(t, "a", nil)
	reg := prometheus.NewRegistry()
	p, srv, _ := front(t, Options{Registerer: reg})
	p.Update(tableOf(backendOf("ns/a", route.Policy{Retries: 2}, a.addr())))
	for _, body := range []string{
		"5\r\nhello\r\nzz\r\n",                 // a chunk size that is not hex
		"5\r\nhello\r\n5\nworld\r\n0\r\n\r\n",  // a bare LF after a chunk size
		"5\r\nhello\r\nffffffffffffffffff\r\n", // a chunk size that overflows
	} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.Write([]byte("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("body %q: %v", body, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("body %q: status %d, want 400", body, res.StatusCode)
		}
	}
	if got := value(t, p.m.clientErrors.WithLabelValues("ns/a")); got != 3 {
		t.Errorf("client_errors_total = %v, want 3", got)
	}
	for _, k := range kindNames {
		if got := value(t, p.m.upstreamErrors.WithLabelValues("ns/a", k)); got != 0 {
			t.Errorf("upstream_errors_total{kind=%s} = %v, want 0", k, got)
		}
	}
	for _, reason := range retryReasons {
		if got := value(t, p.m.retries.WithLabelValues("ns/a", reason)); got != 0 {
			t.Errorf("retries{reason=%s} = %v, want 0", reason, got)
		}
	}
	p.mu.Lock()
	u := p.ups[a.addr()]
	p.mu.Unlock()
	if u.fails.Load() != 0 || u.ejectedUntil.Load() != 0 {
		t.Errorf("passive health touched: fails=%d", u.fails.Load())
	}
}
