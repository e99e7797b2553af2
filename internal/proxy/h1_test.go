package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/sluice/internal/route"
)

// rawUpstream is an upstream that writes whatever its serve function
// writes: for responses net/http's server would never send. It counts
// connections and requests.
type rawUpstream struct {
	ln     net.Listener
	conns  atomic.Int64
	reqs   atomic.Int64
	closed atomic.Int64
}

// newRawUpstream serves each request read from a connection with serve,
// which reports whether to keep the connection open for another request.
// The request's body has been read: serve may read it again.
func newRawUpstream(t testing.TB, serve func(c net.Conn, req *http.Request) bool) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.conns.Add(1)
			go func() {
				defer u.closed.Add(1)
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					u.reqs.Add(1)
					body, _ := io.ReadAll(req.Body)
					req.Body = io.NopCloser(bytes.NewReader(body))
					if !serve(c, req) {
						return
					}
				}
			}()
		}
	}()
	return u
}

func (u *rawUpstream) addr() string { return u.ln.Addr().String() }

// canned returns a serve function writing resp and keeping the connection.
func canned(resp string) func(net.Conn, *http.Request) bool {
	return func(c net.Conn, _ *http.Request) bool {
		_, err := io.WriteString(c, resp)
		return err == nil
	}
}

func fastProxy(t *testing.T, o Options, addr string) (*Proxy, string, *http.Client) {
	t.Helper()
	p, srv, c := front(t, o)
	p.Update(tableOf(backendOf("ns/s", defaults(), addr)))
	return p, srv.URL, c
}

func TestPoolReuse(t *testing.T) {
	a := newBackend(t, "a", nil)
	_, url, c := fastProxy(t, Options{}, a.addr())
	for i := range 10 {
		if r := get(t, c, url); r.status != 200 || r.body != "a\n" {
			t.Fatalf("request %d: %d %q", i, r.status, r.body)
		}
	}
	if n := a.opened.Load(); n != 1 {
		t.Errorf("upstream connections = %d for 10 sequential requests, want 1", n)
	}
}

func TestNoReuse(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp string
	}{
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"},
		{"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"},
		{"unframed", "HTTP/1.1 200 OK\r\n\r\nok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newRawUpstream(t, func(c net.Conn, _ *http.Request) bool {
				io.WriteString(c, tc.resp)
				return false // closing ends an unframed body
			})
			_, url, c := fastProxy(t, Options{}, u.addr())
			for i := range 3 {
				if r := get(t, c, url); r.status != 200 || r.body != "ok" {
					t.Fatalf("request %d: %d %q", i, r.status, r.body)
				}
			}
			if n := u.conns.Load(); n != 3 {
				t.Errorf("upstream connections = %d, want 3 (none reused)", n)
			}
		})
	}
}

func TestKeepAliveHTTP10(t *testing.T) {
	u := newRawUpstream(t, canned("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"))
	_, url, c := fastProxy(t, Options{}, u.addr())
	for range 3 {
		if r := get(t, c, url); r.status != 200 || r.body != "ok" {
			t.Fatalf("%d %q", r.status, r.body)
		}
	}
	if n := u.conns.Load(); n != 1 {
		t.Errorf("upstream connections = %d, want 1", n)
	}
}

func TestPartiallyReadBodyClosesUpstream(t *testing.T) {
	sent := make(chan struct{})
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10000000")
		w.Write(make([]byte, 64<<10))
		w.(http.Flusher).Flush()
		close(sent)
		for range 150 { // ~10 MB, unless the proxy goes away
			if _, err := w.Write(make([]byte, 64<<10)); err != nil {
				return
			}
		}
	})
	_, url, c := fastProxy(t, Options{}, a.addr())
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(res.Body, make([]byte, 1000))
	<-sent
	res.Body.Close() // the client goes away mid-body
	eventually(t, "upstream connection closed", func() bool { return a.closed.Load() == a.opened.Load() })
}

func TestChunkedBothWays(t *testing.T) {
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && (len(r.TransferEncoding) != 1 || r.TransferEncoding[0] != "chunked" || r.ContentLength != -1) {
			t.Errorf("upstream request framing TE %v CL %d, want chunked", r.TransferEncoding, r.ContentLength)
		}
		for i := range 3 {
			fmt.Fprintf(w, "part%d;", i)
			w.(http.Flusher).Flush()
		}
	})
	// A window of an hour: the second POST may take the first's
	// connection however loaded the machine is.
	_, url, c := fastProxy(t, Options{UnsafeReuseWindow: time.Hour}, a.addr())
	for range 2 {
		pr, pw := io.Pipe()
		go func() {
			for i := range 3 {
				fmt.Fprintf(pw, "up%d;", i)
			}
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", url, pr)
		r := do(t, c, req)
		if r.status != 200 || r.body != "part0;part1;part2;" {
			t.Fatalf("%d %q", r.status, r.body)
		}
		if _, body := a.lastRequest(); body != "up0;up1;up2;" {
			t.Errorf("upstream body %q", body)
		}
	}
	if a.opened.Load() != 1 {
		t.Errorf("upstream connections = %d, want 1 (chunked exchanges reuse)", a.opened.Load())
	}
}

// TestLargeBodiesStream: both bodies pass piece by piece; a proxy that
// buffered either would deadlock against the handshakes below.
func TestLargeBodiesStream(t *testing.T) {
	gotFirst := make(chan struct{})
	clientGot := make(chan struct{})
	const size = 8 << 20
	// Not newBackend: it reads the whole request body first.
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadFull(r.Body, make([]byte, 64<<10)); err != nil {
			t.Error(err)
			return
		}
		close(gotFirst)
		n, _ := io.Copy(io.Discard, r.Body)
		if n != size-64<<10 {
			t.Errorf("upstream got %d more bytes, want %d", n, size-64<<10)
		}
		w.Write(make([]byte, 64<<10))
		w.(http.Flusher).Flush()
		select {
		case <-clientGot:
		case <-time.After(10 * time.Second):
			t.Error("response body not streamed")
			return
		}
		w.Write(make([]byte, size-64<<10))
	}))
	defer a.Close()
	_, url, c := fastProxy(t, Options{}, a.Listener.Addr().String())
	pr, pw := io.Pipe()
	go func() {
		pw.Write(make([]byte, 64<<10))
		select {
		case <-gotFirst:
		case <-time.After(10 * time.Second):
			pw.CloseWithError(fmt.Errorf("request body not streamed"))
			return
		}
		pw.Write(make([]byte, size-64<<10))
		pw.Close()
	}()
	req, _ := http.NewRequest("PUT", url, pr)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := io.ReadFull(res.Body, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	close(clientGot)
	n, err := io.Copy(io.Discard, res.Body)
	if err != nil || n != size-64<<10 {
		t.Errorf("client got %d more bytes (%v), want %d", n, err, size-64<<10)
	}
}

func TestHeadAndNoBodyStatuses(t *testing.T) {
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(204)
		case "/304":
			w.WriteHeader(304)
		default:
			w.Header().Set("Content-Length", "100")
			if r.Method != "HEAD" {
				w.Write(make([]byte, 100))
			}
		}
	})
	_, url, c := fastProxy(t, Options{}, a.addr())
	for _, tc := range []struct {
		method, path string
		status, n    int
	}{
		{"HEAD", "/", 200, 0}, {"GET", "/204", 204, 0}, {"GET", "/304", 304, 0}, {"HEAD", "/", 200, 0}, {"GET", "/", 200, 100},
	} {
		req, _ := http.NewRequest(tc.method, url+tc.path, nil)
		r := do(t, c, req)
		if r.status != tc.status || len(r.body) != tc.n {
			t.Errorf("%s %s: %d with %d bytes, want %d with %d", tc.method, tc.path, r.status, len(r.body), tc.status, tc.n)
		}
		if tc.method == "HEAD" && r.header.Get("Content-Length") != "100" {
			t.Errorf("HEAD lost Content-Length: %v", r.header)
		}
	}
	if n := a.opened.Load(); n != 1 {
		t.Errorf("upstream connections = %d, want 1", n)
	}
}

func TestTrailersReuse(t *testing.T) {
	u := newRawUpstream(t, canned("HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\nX-Sum: 42\r\n\r\n"))
	_, url, c := fastProxy(t, Options{}, u.addr())
	for range 2 {
		res, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if string(b) != "body" || res.Trailer.Get("X-Sum") != "42" {
			t.Errorf("body %q trailer %v, want body and X-Sum 42", b, res.Trailer)
		}
	}
	if n := u.conns.Load(); n != 1 {
		t.Errorf("upstream connections = %d, want 1", n)
	}
}

func TestBadUpstreamResponses(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp string
		max  int64
	}{
		{"garbage", "this is not http\r\n\r\n", 0},
		{"binary", "\x00\x01\x02\xff\r\n\r\n", 0},
		{"bad status", "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", 0},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n", 0},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 0},
		{"unknown coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nab", 0},
		{"oversized header", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\nContent-Length: 0\r\n\r\n", 0},
		{"over small limit", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\nContent-Length: 0\r\n\r\n", 4 << 10},
		{"endless 1xx", strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 10), 0},
		{"unasked 101", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newRawUpstream(t, func(c net.Conn, _ *http.Request) bool {
				io.WriteString(c, tc.resp)
				return false
			})
			_, url, c := fastProxy(t, Options{MaxResponseHeaderBytes: tc.max, Retries: -1}, u.addr())
			if r := get(t, c, url); r.status != 502 {
				t.Errorf("%d %q, want 502", r.status, r.body)
			}
		})
	}
}

func TestInformationalSkipped(t *testing.T) {
	u := newRawUpstream(t, canned("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	_, url, c := fastProxy(t, Options{}, u.addr())
	if r := get(t, c, url); r.status != 200 || r.body != "ok" {
		t.Errorf("%d %q, want 200 ok", r.status, r.body)
	}
}

func TestPoolLimits(t *testing.T) {
	a := newBackend(t, "a", nil)
	p, url, c := fastProxy(t, Options{MaxIdleConnsPerEndpoint: 2, IdleConnTimeout: 100 * time.Millisecond}, a.addr())
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 10 {
				if res, err := c.Get(url); err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	pl := p.view.Load().backends[p.Table().Config().VirtualHosts[0].Routes[0].Backend].eps[0].pool
	pl.mu.Lock()
	idle := len(pl.idle)
	pl.mu.Unlock()
	if !stdMode && idle > 2 {
		t.Errorf("idle connections = %d, want at most 2", idle)
	}
	// IdleConnTimeout closes every idle connection.
	eventually(t, "idle connections closed", func() bool { return a.closed.Load() == a.opened.Load() })
}

func TestClientGoneWhileWaiting(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	_, url, _ := fastProxy(t, Options{}, a.addr())
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	eventually(t, "request upstream", func() bool { return a.hits.Load() == 1 })
	conn.Close()
	eventually(t, "upstream connection closed", func() bool { return a.closed.Load() == 1 })
}

func TestRequestHeaderRewriteOnWire(t *testing.T) {
	var raw atomic.Value
	u := newRawUpstream(t, func(c net.Conn, req *http.Request) bool {
		var b bytes.Buffer
		req.Header.Write(&b)
		raw.Store(req.Method + " " + req.RequestURI + " " + req.Host + "\n" + b.String())
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		return true
	})
	// The escaped path goes out as it came (an encoded slash is allowed
	// here; by default it is refused, path_test.go).
	_, url, c := fastProxy(t, Options{AllowEncodedSlashes: true}, u.addr())
	req, _ := http.NewRequest("POST", url+"/a%2Fb/c?x=1&y", nil)
	req.Host = "app.example"
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "1")
	req.Header.Set("Te", "trailers")
	req.Header.Add("X-Multi", "1")
	req.Header.Add("X-Multi", "2")
	do(t, c, req)
	got, _ := raw.Load().(string)
	for _, want := range []string{"POST /a%2Fb/c?x=1&y app.example\n", "Content-Length: 0\r\n", "Te: trailers\r\n",
		"X-Multi: 1\r\nX-Multi: 2\r\n", "X-Forwarded-For: 127.0.0.1\r\n", "User-Agent: Go-http-client/1.1\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("upstream request lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"X-Hop", "Connection"} {
		if strings.Contains(got, bad) {
			t.Errorf("upstream request has %s:\n%s", bad, got)
		}
	}
}

// TestSlowResponseTimeoutOverride: Policy.ResponseTimeout is a deadline on
// the pooled connection, and it does not outlive the response header.
func TestSlowBodyAfterHeaders(t *testing.T) {
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		time.Sleep(300 * time.Millisecond)
		w.Write([]byte("late"))
	})
	p, srv, c := front(t, Options{})
	p.Update(tableOf(backendOf("ns/s", route.Policy{Retries: -1, ResponseTimeout: 100 * time.Millisecond}, a.addr())))
	if r := get(t, c, srv.URL); r.status != 200 || r.body != "late" {
		t.Errorf("%d %q, want 200 late (the header timeout ends with the header)", r.status, r.body)
	}
}

// TestSlowHeaders: a response header that arrives in pieces, or a final
// response long after a 1xx, is waited for up to the response timeout,
// not the shorter first-byte wait of the synchronous path.
func TestSlowHeaders(t *testing.T) {
	for _, parts := range [][]string{
		{"HTTP/1.1 200 OK\r\nContent-", "Length: 2\r\n\r\nok"},
		{"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
		{"", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	} {
		u := newRawUpstream(t, func(c net.Conn, _ *http.Request) bool {
			for i, part := range parts {
				if i > 0 {
					time.Sleep(2 * watchAfter)
				}
				io.WriteString(c, part)
			}
			return true
		})
		_, url, c := fastProxy(t, Options{}, u.addr())
		if r := get(t, c, url); r.status != 200 || r.body != "ok" {
			t.Errorf("%q: %d %q, want 200 ok", parts, r.status, r.body)
		}
	}
}

// TestShortDeadlineKept: back-to-back requests on one upstream connection
// mostly keep the short read deadline the previous one set (shortSlack),
// and a slow answer after them is still waited for past watchAfter (the
// kept deadline extends to the response timeout like a new one).
func TestShortDeadlineKept(t *testing.T) {
	if stdMode {
		t.Skip("the synchronous path's deadlines")
	}
	var slow atomic.Bool
	u := newRawUpstream(t, func(c net.Conn, _ *http.Request) bool {
		if slow.Load() {
			time.Sleep(2 * watchAfter)
		}
		_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return err == nil
	})
	_, url, c := fastProxy(t, Options{}, u.addr())
	var seen []time.Time
	testHookReused = func(hc *h1conn) { seen = append(seen, hc.rdl) }
	t.Cleanup(func() { testHookReused = nil })
	const n = 20
	for range n {
		if r := get(t, c, url); r.status != 200 || r.body != "ok" {
			t.Fatalf("%d %q, want 200 ok", r.status, r.body)
		}
	}
	moved := 0
	for i := 1; i < len(seen); i++ {
		if !seen[i].Equal(seen[i-1]) {
			moved++
		}
	}
	if len(seen) < n-1 || moved >= len(seen)-1 {
		t.Errorf("%d reused requests moved the deadline %d times; want it kept at least once", len(seen), moved)
	}
	slow.Store(true)
	if r := get(t, c, url); r.status != 200 || r.body != "ok" {
		t.Errorf("slow answer after a kept deadline: %d %q, want 200 ok", r.status, r.body)
	}
	if u.conns.Load() != 1 {
		t.Errorf("%d upstream connections, want 1", u.conns.Load())
	}
}
