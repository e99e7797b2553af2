package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"sluice.dev/sluice/internal/proxy"
	"sluice.dev/sluice/internal/route"
)

// The proxy behind the real server, over HTTPS on each path a connection
// can take (the fast loop, its hand-offs to net/http, HTTP/2): every
// request counts as HTTPS, so an HTTPS-redirect route serves it and the
// backend sees X-Forwarded-Proto: https; plain HTTP is redirected.
func TestHTTPSThroughProxy(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Header.Get("Upgrade") == "" {
			fmt.Fprintf(w, "%s xfp=%s", r.Proto, r.Header.Get("X-Forwarded-Proto"))
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nxfp=%s\n", r.Header.Get("X-Forwarded-Proto"))
		brw.Flush()
		line, _ := brw.ReadString('\n')
		io.WriteString(c, "echo "+line)
	}))
	t.Cleanup(backend.Close)

	p := proxy.New(proxy.Options{})
	be := &route.Backend{Name: "ns/svc:80", Namespace: "ns", Service: "svc", Port: "80",
		Policy: route.Policy{Retries: -1}, Endpoints: []route.Endpoint{{Address: backend.Listener.Addr().String()}}}
	p.Update(route.New(route.Config{VirtualHosts: []route.VirtualHost{{Host: "a.test", Routes: []route.Route{{
		PathType: route.PathPrefix, Path: "/", Backend: be, Ingress: "ns/ing", SSLRedirect: true,
	}}}}}))
	ts := startTLS(t, p, nil)

	plain := dialRaw(t, ts.httpAddr)
	if resp := plain.do(t, "GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n"); resp.StatusCode != http.StatusPermanentRedirect ||
		resp.Header.Get("Location") != "https://a.test/x" {
		t.Errorf("plain HTTP: %d Location %q, want the redirect", resp.StatusCode, resp.Header.Get("Location"))
	}

	for _, tc := range []struct{ name, req, want string }{
		{"fast loop", "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", "HTTP/1.1 xfp=https"},
		{"HTTP/1.0", "GET / HTTP/1.0\r\nHost: a.test\r\n\r\n", "HTTP/1.1 xfp=https"},
		{"chunked upload", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 xfp=https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialTLS(t, ts.httpsAddr, "http/1.1")
			resp := c.do(t, tc.req)
			if got := body(t, resp); resp.StatusCode != http.StatusOK || got != tc.want {
				t.Errorf("%d %q, want %q", resp.StatusCode, got, tc.want)
			}
		})
	}

	t.Run("h2", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "https://"+ts.httpsAddr+"/", nil)
		req.Host = "a.test"
		resp, err := tlsClient("a.test", false).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if got := body(t, resp); resp.Proto != "HTTP/2.0" || got != "HTTP/1.1 xfp=https" {
			t.Errorf("%s %d %q", resp.Proto, resp.StatusCode, got)
		}
	})

	t.Run("websocket", func(t *testing.T) {
		c := dialTLS(t, ts.httpsAddr, "http/1.1")
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		if line, _ := c.r.ReadString('\n'); line != "xfp=https\n" {
			t.Errorf("backend saw %q", line)
		}
		io.WriteString(c, "ping\n")
		if line, _ := c.r.ReadString('\n'); line != "echo ping\n" {
			t.Errorf("upgraded stream: %q", line)
		}
	})
}
