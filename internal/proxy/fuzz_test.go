package proxy

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/sluice/internal/http1"
	"sluice.dev/sluice/internal/route"
)

// FuzzPeer: RemoteAddr comes from the connection or a PROXY protocol
// header; any value must yield a substring and no panic.
func FuzzPeer(f *testing.F) {
	for _, s := range []string{"127.0.0.1:80", "[::1]:443", "[fe80::1%eth0]:1", "::1", "1.2.3.4", "", "[", "]:", "x:y:z", "[::ffff:10.0.0.1]:9"} {
		f.Add(s)
	}
	p := New(Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	f.Fuzz(func(t *testing.T, remote string) {
		ip, trusted := p.peer(remote)
		if !strings.Contains(remote, ip) {
			t.Fatalf("peer(%q) = %q, not a substring", remote, ip)
		}
		if trusted {
			a, err := netip.ParseAddr(ip)
			if err != nil || !p.trusted(a) {
				t.Fatalf("peer(%q) trusted with ip %q", remote, ip)
			}
		}
		_ = portOf(remote)
		r := &http.Request{RemoteAddr: "10.1.1.1:5", Header: http.Header{"X-Forwarded-For": {remote, "10.0.0.7"}}}
		if c := p.clientIP(r); !strings.Contains(remote+"10.0.0.710.1.1.1", c) {
			t.Fatalf("clientIP with X-Forwarded-For %q = %q", remote, c)
		}
	})
}

// FuzzPinned: the Cookie header is client input.
func FuzzPinned(f *testing.F) {
	for _, s := range []string{"route=abc", `a=1; route="x"; route=y`, ";;;", "route", "route=", "=route", " route = v ;"} {
		f.Add(s)
	}
	p := New(Options{})
	b := backendOf("ns/s", route.Policy{Affinity: &route.CookieAffinity{Name: "route"}}, "10.0.0.1:80", "10.0.0.2:80")
	p.Update(tableOf(b))
	bv := p.view.Load().backends[b]
	valid := bv.eps[1].cookie
	f.Fuzz(func(t *testing.T, cookie string) {
		h := http.Header{"Cookie": {cookie}}
		i := bv.pinned(h, 0)
		if i < -1 || i >= len(bv.eps) {
			t.Fatalf("pinned(%q) = %d", cookie, i)
		}
		h = http.Header{"Cookie": {cookie, "route=" + valid}}
		if i := bv.pinned(h, 0); i < 0 {
			t.Fatalf("valid cookie after %q not found", cookie)
		}
	})
}

// FuzzRewriteRequestHeader: whatever the client sends, no hop-by-hop header
// and no untrusted forwarding header survives, and X-Forwarded-For ends
// with the peer.
func FuzzRewriteRequestHeader(f *testing.F) {
	f.Add("Connection", "X-A, upgrade", "Upgrade", "websocket", "X-A", "1", "host.example:8080")
	f.Add("Te", "trailers", "X-Forwarded-For", "1.1.1.1", "Proxy-Foo", "x", "h")
	f.Add("Connection", "close", "Keep-Alive", "1", "Forwarded", "for=x", "[::1]:99")
	p := New(Options{})
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3, host string) {
		h := make(http.Header)
		for _, kv := range [][2]string{{k1, v1}, {k2, v2}, {k3, v3}} {
			h.Add(kv[0], kv[1])
		}
		r := &http.Request{Header: h, Host: host, Method: "GET"}
		upgrade, _ := p.rewriteRequestHeader(r, "192.0.2.1", false)
		for k := range h {
			switch {
			case k == "Connection" || k == "Upgrade":
				if upgrade == "" {
					t.Fatalf("%s kept without an upgrade", k)
				}
			case k == "Te":
				if h.Get("Te") != "trailers" {
					t.Fatalf("Te = %q", h.Get("Te"))
				}
			case http1.HopHeader(k):
				t.Fatalf("hop-by-hop %s kept", k)
			case k == "Forwarded":
				t.Fatalf("untrusted Forwarded kept")
			}
		}
		if xff := h["X-Forwarded-For"]; len(xff) != 1 || xff[0] != "192.0.2.1" {
			t.Fatalf("X-Forwarded-For = %q", xff)
		}
		if upgrade != "" && !isPrint(upgrade) {
			t.Fatalf("upgrade %q", upgrade)
		}
	})
}

// FuzzUpstreamResponse: whatever bytes an upstream sends back, the
// synchronous path answers 502/504 or relays a response, without panic or
// hang (the upstream closes after sending; a response header timeout
// bounds the rest).
func FuzzUpstreamResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nunframed",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"garbage", "", "\r\n\r\n", "HTTP/1.1 999 X\r\n\r\n",
	} {
		f.Add([]byte(s), false)
	}
	var resp atomic.Pointer[[]byte]
	u := newRawUpstream(f, func(c net.Conn, _ *http.Request) bool {
		c.Write(*resp.Load())
		return false
	})
	p := New(Options{Retries: -1, ResponseHeaderTimeout: 2 * time.Second, MaxResponseHeaderBytes: 64 << 10})
	p.Update(tableOf(backendOf("ns/s", defaults(), u.addr())))
	f.Fuzz(func(t *testing.T, b []byte, head bool) {
		resp.Store(&b)
		method := "GET"
		if head {
			method = "HEAD"
		}
		w := httptest.NewRecorder()
		func() {
			defer func() {
				if v := recover(); v != nil && v != http.ErrAbortHandler {
					t.Fatalf("panic: %v", v)
				}
			}()
			p.ServeHTTP(w, httptest.NewRequest(method, "http://app.example/", nil))
		}()
		if w.Code < 100 || w.Code > 999 {
			t.Fatalf("status %d", w.Code)
		}
	})
}
