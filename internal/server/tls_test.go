package server

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// tlsEcho answers with what the handler saw of the request's transport:
// protocol, and the TLS state's server name and ALPN ("-" without TLS).
var tlsEcho = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	st := "-"
	if r.TLS != nil {
		st = r.TLS.ServerName + "/" + r.TLS.NegotiatedProtocol
	}
	fmt.Fprintf(w, "%s %s", r.Proto, st)
})

// startTLS runs a server with an HTTPS listener for a.test whose
// handler is h.
func startTLS(t *testing.T, h http.Handler, change func(*Options)) *testServer {
	t.Helper()
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	return start(t, func(o *Options) {
		tlsOptions(&cs)(o)
		o.Handler = h
		if change != nil {
			change(o)
		}
	})
}

// dialTLS opens a TLS connection to addr for a.test offering alpn.
func dialTLS(t *testing.T, addr string, alpn ...string) *rawConn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "a.test", InsecureSkipVerify: true, NextProtos: alpn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

// handoffs sums the fast loop's hand-offs over every reason.
func (ts *testServer) handoffs() float64 {
	var n float64
	for _, r := range []string{"h2", "version", "target", "upgrade", "expect", "transfer_encoding", "header_size"} {
		n += ts.metric("sluice_http1_handoffs_total", "reason", r)
	}
	return n
}

// HTTP/1.1 (by ALPN or without ALPN) and HTTP/2 share the HTTPS listener:
// the fast loop serves the first two itself, net/http the third, and
// every request carries the connection's TLS state.
func TestHTTPSDispatchByALPN(t *testing.T) {
	ts := startTLS(t, tlsEcho, nil)
	req := "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
	for _, tc := range []struct {
		name string
		alpn []string
		want string
	}{
		{"alpn http/1.1", []string{"http/1.1"}, "HTTP/1.1 a.test/http/1.1"},
		{"alpn http/1.1 preferred over nothing", []string{"http/1.1", "spdy/3"}, "HTTP/1.1 a.test/http/1.1"},
		{"no alpn", nil, "HTTP/1.1 a.test/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.handoffs()
			c := dialTLS(t, ts.httpsAddr, tc.alpn...)
			for i := range 3 { // kept alive
				resp := c.do(t, req)
				if got := body(t, resp); resp.StatusCode != http.StatusOK || got != tc.want {
					t.Fatalf("request %d: %d %q, want %q", i, resp.StatusCode, got, tc.want)
				}
			}
			if got := ts.handoffs() - before; *fastHTTP1 && got != 0 {
				t.Errorf("%v hand-offs, want none: the fast loop serves HTTP/1.1 over TLS", got)
			}
		})
	}

	t.Run("h2", func(t *testing.T) {
		before := ts.metric("sluice_http1_handoffs_total", "reason", "h2")
		c := tlsClient("a.test", false)
		for i := range 3 {
			resp, err := c.Get("https://" + ts.httpsAddr + "/")
			if err != nil {
				t.Fatal(err)
			}
			if got := body(t, resp); got != "HTTP/2.0 a.test/h2" {
				t.Fatalf("request %d: %q", i, got)
			}
			resp.Body.Close()
		}
		if got := ts.metric("sluice_http1_handoffs_total", "reason", "h2") - before; *fastHTTP1 && got != 1 {
			t.Errorf("h2 hand-offs %v, want 1 (one connection)", got)
		}
	})
}

// Requests the fast loop hands to net/http keep their TLS state, though
// net/http then sees the connection wrapped, not as a *tls.Conn.
func TestHTTPSHandOffKeepsTLS(t *testing.T) {
	ts := startTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			tlsEcho(w, r)
			return
		}
		// An upgrade: switch, then say what was seen over the raw stream.
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n%s tls=%v\n", r.Proto, r.TLS != nil)
		brw.Flush()
		line, _ := brw.ReadString('\n')
		io.WriteString(c, "echo "+line)
	}), nil)
	for _, tc := range []struct {
		name, reason, req, want string
	}{
		{"HTTP/1.0", "version", "GET / HTTP/1.0\r\nHost: a.test\r\n\r\n", "HTTP/1.0 a.test/http/1.1"},
		{"chunked upload", "transfer_encoding", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 a.test/http/1.1"},
		{"Expect", "expect", "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\nok", "HTTP/1.1 a.test/http/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.metric("sluice_http1_handoffs_total", "reason", tc.reason)
			c := dialTLS(t, ts.httpsAddr, "http/1.1")
			resp := c.do(t, tc.req)
			if resp.StatusCode == http.StatusContinue { // the handler read the body
				resp = c.do(t, "")
			}
			if got := body(t, resp); resp.StatusCode != http.StatusOK || got != tc.want {
				t.Errorf("%d %q, want %q", resp.StatusCode, got, tc.want)
			}
			if got := ts.metric("sluice_http1_handoffs_total", "reason", tc.reason) - before; *fastHTTP1 && got != 1 {
				t.Errorf("hand-offs %q: %v, want 1", tc.reason, got)
			}
		})
	}

	t.Run("upgrade", func(t *testing.T) {
		c := dialTLS(t, ts.httpsAddr, "http/1.1")
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		if line, _ := c.r.ReadString('\n'); line != "HTTP/1.1 tls=true\n" {
			t.Errorf("upgraded handler saw %q", line)
		}
		io.WriteString(c, "ping\n")
		if line, _ := c.r.ReadString('\n'); line != "echo ping\n" {
			t.Errorf("upgraded stream: %q", line)
		}
	})
}

// A failed handshake closes the connection and leaves the listener
// serving; plain HTTP sent to the HTTPS port gets net/http's 400.
func TestTLSHandshakeFailure(t *testing.T) {
	ts := startTLS(t, tlsEcho, nil)

	_, err := tls.Dial("tcp", ts.httpsAddr, &tls.Config{ServerName: "unknown.test", InsecureSkipVerify: true})
	if err == nil {
		t.Fatal("handshake with an unknown server name succeeded")
	}

	c := dialRaw(t, ts.httpsAddr)
	resp := c.do(t, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
	if got := body(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(got, "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP to the HTTPS port: %d %q", resp.StatusCode, got)
	}
	if !c.closedByServer() {
		t.Error("connection still open after the 400")
	}

	ok := dialTLS(t, ts.httpsAddr, "http/1.1")
	if got := body(t, ok.do(t, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")); got != "HTTP/1.1 a.test/http/1.1" {
		t.Errorf("after failed handshakes: %q", got)
	}
	ok.Close()
	waitActive(t, ts, 0)
}

// waitActive polls until the server tracks n open HTTPS connections.
func waitActive(t *testing.T, ts *testServer, n float64) {
	t.Helper()
	for range 2000 {
		if ts.metric("sluice_connections_active", "listener", listenerHTTPS) == n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Errorf("active HTTPS connections %v, want %v", ts.metric("sluice_connections_active", "listener", listenerHTTPS), n)
}

// A client that connects and never finishes its handshake is closed after
// ReadHeaderTimeout, as net/http bounds the handshake.
func TestTLSHandshakeTimeout(t *testing.T) {
	ts := startTLS(t, tlsEcho, func(o *Options) { o.ReadHeaderTimeout = 100 * time.Millisecond })
	for _, tc := range []struct{ name, send string }{
		{"silent", ""},
		{"partial ClientHello", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, ts.httpsAddr)
			io.WriteString(c, tc.send)
			if !c.closedByServer() {
				t.Error("connection with an unfinished handshake still open")
			}
		})
	}
	waitActive(t, ts, 0)
	// Counted as header timeouts, on both paths.
	ts.waitMetric("sluice_client_timeouts_total", "timeout", "read_header", 2)
}

// Over HTTPS on the fast loop, draining answers with Connection: close
// and closes; stopping closes an idle connection.
func TestHTTPSFastLoopDrains(t *testing.T) {
	ts := startTLS(t, tlsEcho, nil)
	req := "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
	busy, idle := dialTLS(t, ts.httpsAddr, "http/1.1"), dialTLS(t, ts.httpsAddr)
	for _, c := range []*rawConn{busy, idle} {
		if resp := c.do(t, req); resp.Close {
			t.Fatal("Connection: close while serving")
		}
	}
	ts.signal()
	ts.waitState(StateDraining)
	if resp := busy.do(t, req); !resp.Close {
		t.Error("no Connection: close while draining")
	}
	if !busy.closedByServer() {
		t.Error("connection open after its response while draining")
	}
	close(ts.drained)
	ts.waitState(StateExited)
	if !idle.closedByServer() {
		t.Error("idle connection open after stopping")
	}
	if err := ts.wait(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// The listener over TLS keeps the address the client connected to in
// the request context, as net/http does.
func TestHTTPSLocalAddr(t *testing.T) {
	ts := startTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		fmt.Fprint(w, a)
	}), nil)
	c := dialTLS(t, ts.httpsAddr, "http/1.1")
	if got := body(t, c.do(t, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")); got != ts.httpsAddr {
		t.Errorf("local address %q, want %q", got, ts.httpsAddr)
	}
}
