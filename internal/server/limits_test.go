package server

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// The client limits, each on real loopback sockets, through the fast
// HTTP/1.1 loop and (with -fast-http1=false, or a request the loop hands
// off) net/http. The timeouts are short; the tests wait on outcomes and
// counters, never on durations.

// waitMetric polls until the sample of name with label=value is want (the
// counting may follow the close the client saw), or fails after a
// failsafe.
func (ts *testServer) waitMetric(name, label, value string, want float64) {
	ts.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := ts.metric(name, label, value)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("%s{%s=%q} = %v, want %v", name, label, value, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// trickle writes s a byte at a time, every, until stop is closed or a
// write fails. It reports the bytes written.
func trickle(c net.Conn, s string, every time.Duration, stop <-chan struct{}) int {
	for i := 0; ; i++ {
		if _, err := c.Write([]byte{s[i%len(s)]}); err != nil {
			return i
		}
		select {
		case <-stop:
			return i + 1
		case <-time.After(every):
		}
	}
}

// TestSlowlorisClosedByHeaderTimeout: a client that trickles its header,
// a field line after another, never finishing it, is cut by the read
// header timeout however often it sends; one that sends nothing after
// connecting too. A normal request meanwhile is served.
func TestSlowlorisClosedByHeaderTimeout(t *testing.T) {
	ts := start(t, func(o *Options) { o.ReadHeaderTimeout = 300 * time.Millisecond })
	c := dialRaw(t, ts.httpAddr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n")
	stop := make(chan struct{})
	defer close(stop)
	go trickle(c, "X-Slow: 1\r\n", 20*time.Millisecond, stop)
	// net/http answers 400 first; the fast loop closes without a word.
	if !c.closedAfterAnything() {
		t.Fatal("slowloris connection not closed")
	}
	silent := dialRaw(t, ts.httpAddr)
	if !silent.closedByServer() {
		t.Fatal("silent connection not closed")
	}
	ts.waitMetric("sluice_client_timeouts_total", "timeout", "read_header", 2)
	if code, _ := get(t, "http://"+ts.httpAddr+"/"); code != http.StatusOK {
		t.Errorf("normal request: status %d", code)
	}
}

// closedAfterAnything reports whether the server closed the connection,
// whatever it sent before.
func (c *rawConn) closedAfterAnything() bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c.r)
	return err == nil || errors.Is(err, syscall.ECONNRESET)
}

// bodyCounter answers with the bytes of the request body it read, or 408
// with the error; errs gets every read error.
func bodyCounter(errs chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			errs <- err
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		fmt.Fprint(w, n)
	})
}

// TestBodyIdleTimeout: a request body that stops arriving is cut by the
// body idle timeout and its connection closed; one that keeps sending a
// byte more often than the timeout is read to its end, for several times
// the timeout. With Content-Length (the fast loop's) and chunked
// (net/http's) bodies.
func TestBodyIdleTimeout(t *testing.T) {
	// The gaps of the moving body are a fortieth of the timeout: a
	// loaded machine may hold a goroutine up for hundreds of
	// milliseconds.
	const timeout = time.Second
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			errs := make(chan error, 4)
			ts := start(t, func(o *Options) {
				o.BodyIdleTimeout = timeout
				o.Handler = bodyCounter(errs)
			})
			// piece frames s as a piece of the body.
			piece := func(s string) string {
				if chunked {
					return fmt.Sprintf("%x\r\n%s\r\n", len(s), s)
				}
				return s
			}
			head := func(n int) string {
				if chunked {
					return "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
				}
				return "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n"
			}

			// Stalled: 2 bytes of 10, then nothing.
			c := dialRaw(t, ts.httpAddr)
			c.SetDeadline(time.Now().Add(20 * time.Second)) // failsafe
			io.WriteString(c, head(10)+piece("ab"))
			resp, err := http.ReadResponse(c.r, nil)
			if err != nil {
				t.Fatalf("stalled body: reading response: %v", err)
			}
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Errorf("stalled body: status %d, want 408", resp.StatusCode)
			}
			if err := <-errs; !isTimeout(err) {
				t.Errorf("stalled body: read error %v, want a timeout", err)
			}
			if !c.closedByServer() {
				t.Error("stalled body: connection not closed")
			}
			ts.waitMetric("sluice_client_timeouts_total", "timeout", "body_idle", 1)

			// Moving: a byte every 25ms, 60 of them: one and a half
			// times the timeout in all.
			const n = 60
			m := dialRaw(t, ts.httpAddr)
			io.WriteString(m, head(n))
			for range n {
				if _, err := io.WriteString(m, piece("x")); err != nil {
					select {
					case herr := <-errs:
						t.Fatalf("moving body: %v (handler: %v)", err, herr)
					default:
					}
					t.Fatalf("moving body: %v", err)
				}
				time.Sleep(25 * time.Millisecond)
			}
			if chunked {
				io.WriteString(m, "0\r\n\r\n")
			}
			resp = m.do(t, "")
			if got := body(t, resp); resp.StatusCode != http.StatusOK || got != strconv.Itoa(n) {
				t.Errorf("moving body: %d %q, want 200 %q", resp.StatusCode, got, strconv.Itoa(n))
			}
			select {
			case err := <-errs:
				t.Errorf("moving body: read error %v", err)
			default:
			}
			if got := ts.metric("sluice_client_timeouts_total", "timeout", "body_idle"); got != 1 {
				t.Errorf("body_idle timeouts %v, want 1", got)
			}
		})
	}
}

// bigWriter writes up to 256 MiB and sends how the writes ended.
func bigWriter(done chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(256<<20))
		buf := make([]byte, 1<<20)
		for range 256 {
			if _, err := w.Write(buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	})
}

// TestWriteIdleTimeout: a client that stops reading a response is cut by
// the write idle timeout; one that reads slowly, for longer than the
// timeout in all, is not.
func TestWriteIdleTimeout(t *testing.T) {
	done := make(chan error, 2)
	ts := start(t, func(o *Options) {
		o.WriteIdleTimeout = 400 * time.Millisecond
		o.Handler = bigWriter(done)
	})

	c := dialRaw(t, ts.httpAddr)
	c.Conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	// The client reads nothing.
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("256 MiB written to a client that reads nothing")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("writes to a client that reads nothing still blocked (failsafe)")
	}
	ts.waitMetric("sluice_client_timeouts_total", "timeout", "write_idle", 1)

	// Slow but moving: 64 MiB at 1 MiB per 60 ms, longer than the
	// timeout in all, with gaps of a fiftieth of it (a loaded machine may
	// stall the reader for a while: 3 s leaves it almost 3 s).
	const size = 64 << 20
	done2 := make(chan error, 1)
	ts2 := start(t, func(o *Options) {
		o.WriteIdleTimeout = 3 * time.Second
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			buf := make([]byte, 64<<10)
			for range size / len(buf) {
				if _, err := w.Write(buf); err != nil {
					done2 <- err
					return
				}
			}
			done2 <- nil
		})
	})
	s := dialRaw(t, ts2.httpAddr)
	io.WriteString(s, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, err := http.ReadResponse(s.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got int64
	for {
		n, err := io.CopyN(io.Discard, resp.Body, 1<<20)
		got += n
		if err != nil {
			break
		}
		time.Sleep(60 * time.Millisecond)
	}
	if err := <-done2; err != nil || got != size {
		t.Errorf("slow reader: read %d of %d bytes; server: %v", got, size, err)
	}
	if n := ts2.metric("sluice_client_timeouts_total", "timeout", "write_idle"); n != 0 {
		t.Errorf("slow reader: write_idle timeouts %v, want 0", n)
	}
}

// TestKeepAliveIdleClosed: a kept-alive connection that sends no next
// request is closed after the idle timeout, and counted.
func TestKeepAliveIdleClosed(t *testing.T) {
	ts := start(t, func(o *Options) { o.IdleTimeout = 300 * time.Millisecond })
	c := dialRaw(t, ts.httpAddr)
	if resp := c.do(t, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if !c.closedByServer() {
		t.Fatal("idle keep-alive connection not closed")
	}
	ts.waitMetric("sluice_client_timeouts_total", "timeout", "keepalive_idle", 1)
	if n := ts.metric("sluice_client_timeouts_total", "timeout", "read_header"); n != 0 {
		t.Errorf("read_header timeouts %v, want 0", n)
	}
}

// TestMaxConnections: with the limit's connections open, the next one is
// closed at accept while the open ones keep working; the admin listener
// is not limited; once one closes, a new one is served.
func TestMaxConnections(t *testing.T) {
	const limit = 3
	ts := start(t, func(o *Options) { o.MaxConnections = limit })
	req := "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	var open []*rawConn
	for range limit {
		c := dialRaw(t, ts.httpAddr)
		if resp := c.do(t, req); resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		open = append(open, c)
	}
	// The reset may come before the dial returned.
	if extra, err := net.Dial("tcp", ts.httpAddr); err == nil {
		defer extra.Close()
		io.WriteString(extra, req)
		if !(&rawConn{Conn: extra, r: bufio.NewReader(extra)}).closedByServer() {
			t.Fatal("connection beyond the limit not closed")
		}
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("dialing beyond the limit: %v", err)
	}
	ts.waitMetric("sluice_connections_refused_total", "listener", "http", 1)
	for i, c := range open {
		if resp := c.do(t, req); resp.StatusCode != http.StatusOK {
			t.Errorf("open connection %d: status %d", i, resp.StatusCode)
		}
	}
	if code, _ := get(t, "http://"+ts.adminAddr+"/livez"); code != http.StatusOK {
		t.Errorf("admin at the limit: status %d", code)
	}
	open[0].Close()
	ts.waitMetric("sluice_connections_active", "listener", "http", limit-1)
	if resp := dialRaw(t, ts.httpAddr).do(t, req); resp.StatusCode != http.StatusOK {
		t.Errorf("after a close: status %d", resp.StatusCode)
	}
	if n := ts.metric("sluice_connections_refused_total", "listener", "http"); n != 1 {
		t.Errorf("refused %v, want 1", n)
	}
}

// TestHeaderTooLarge: a header larger than MaxHeaderBytes is answered 431
// and counted; one of exactly MaxHeaderBytes is served (the limit is the
// option's, not net/http's with its 4 KiB of slack).
func TestHeaderTooLarge(t *testing.T) {
	const limit = 8 << 10
	ts := start(t, func(o *Options) { o.MaxHeaderBytes = limit })
	// request returns a request whose header is n bytes.
	request := func(n int) string {
		const pre, post = "GET / HTTP/1.1\r\nHost: a\r\nX-Big: ", "\r\n\r\n"
		return pre + strings.Repeat("x", n-len(pre)-len(post)) + post
	}
	for _, tc := range []struct {
		size, want int
	}{{limit, http.StatusOK}, {limit + 1, http.StatusRequestHeaderFieldsTooLarge}, {9 << 10, http.StatusRequestHeaderFieldsTooLarge}} {
		c := dialRaw(t, ts.httpAddr)
		if resp := c.do(t, request(tc.size)); resp.StatusCode != tc.want {
			t.Errorf("%d-byte header: status %d, want %d", tc.size, resp.StatusCode, tc.want)
		}
	}
	ts.waitMetric("sluice_request_header_too_large_total", "", "", 2)
}

// TestHTTP2Limits: an HTTP/2 connection is offered the configured stream
// limit, and the header limit applies to it too (431).
func TestHTTP2Limits(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	ts := start(t, func(o *Options) {
		o.HTTPSAddress = "127.0.0.1:0"
		o.GetCertificate = cs.get
		o.MaxConcurrentStreams = 7
		o.MaxHeaderBytes = 8 << 10
	})
	c, err := tls.Dial("tcp", ts.httpsAddr, &tls.Config{ServerName: "a.test", InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %T, want SETTINGS", f)
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != 7 {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS %d (%v), want 7", v, ok)
	}

	cl := tlsClient("a.test", false)
	req, _ := http.NewRequest("GET", "https://"+ts.httpsAddr+"/", nil)
	// 6 KiB: over HTTP/2's list size for this limit (the limit less 4
	// KiB, plus 320 bytes: netHTTPHeaderBytes), and less than twice it,
	// beyond which net/http ends the connection instead (its
	// CONTINUATION-flood protection).
	for i := range 2 {
		req.Header.Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("x", 3<<10))
	}
	resp, err := cl.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("large header over HTTP/2: %s %d, want HTTP/2 431", resp.Proto, resp.StatusCode)
		}
	} else if !strings.Contains(err.Error(), "larger than peer's advertised limit") {
		// A client that has the server's SETTINGS already keeps to
		// the limit itself.
		t.Errorf("large header over HTTP/2: %v", err)
	}
}

// TestRefuseAtAcceptResets: a refused connection is reset, not left
// half-open.
func TestRefuseAtAcceptResets(t *testing.T) {
	c, s := tcpPair(t)
	refuse(s)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if _, err := c.Read(b[:]); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read on a refused connection: %v, want a reset", err)
	}
}

// TestHTTP2IdleTimeouts: over HTTP/2 the body and write idle timeouts
// hold per stream: a body that stops is cut (408), a response the client
// does not read fails the handler's write, and a response that is quiet
// between writes for longer than the timeout, to a client that reads, is
// not cut.
func TestHTTP2IdleTimeouts(t *testing.T) {
	const timeout = 400 * time.Millisecond
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	errs := make(chan error, 4)
	writes := make(chan error, 4)
	ts := start(t, func(o *Options) {
		o.HTTPSAddress = "127.0.0.1:0"
		o.GetCertificate = cs.get
		o.BodyIdleTimeout = timeout
		o.WriteIdleTimeout = timeout
		mux := http.NewServeMux()
		mux.Handle("/body", bodyCounter(errs))
		mux.Handle("/big", bigWriter(writes))
		mux.HandleFunc("/quiet", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "a")
			http.NewResponseController(w).Flush()
			time.Sleep(3 * timeout)
			if _, err := io.WriteString(w, "b"); err != nil {
				writes <- err
			}
		})
		o.Handler = mux
	})
	cl := tlsClient("a.test", false)
	url := "https://" + ts.httpsAddr

	// Stalled body.
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte("ab"))
	resp, err := cl.Post(url+"/body", "text/plain", pr)
	if err != nil {
		t.Fatalf("stalled body: %v", err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("stalled body: %s %d, want HTTP/2 408", resp.Proto, resp.StatusCode)
	}
	if err := <-errs; !isTimeout(err) {
		t.Errorf("stalled body: read error %v, want a timeout", err)
	}
	ts.waitMetric("sluice_client_timeouts_total", "timeout", "body_idle", 1)

	// Quiet response, read by the client.
	resp, err = cl.Get(url + "/quiet")
	if err != nil {
		t.Fatal(err)
	}
	if got := body(t, resp); got != "ab" {
		t.Errorf("quiet response: %q, want \"ab\"", got)
	}
	resp.Body.Close()

	// A response the client does not read.
	resp, err = cl.Get(url + "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	select {
	case err := <-writes:
		if err == nil {
			t.Fatal("256 MiB written to a client that reads nothing")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("writes to a client that reads nothing still blocked (failsafe)")
	}
	ts.waitMetric("sluice_client_timeouts_total", "timeout", "write_idle", 1)
}
