package proxy

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStaleIdleConnection: the upstream closes every connection right
// after its response, without saying so, and the next request follows at
// once, before the proxy may have seen the close. A request that may be
// sent again (idempotent, or with an Idempotency-Key) and fails on the
// closed connection is sent again on a new one; one that may not goes on a
// new connection from the start (UnsafeReuseWindow off here: the pod of
// this test closes within a moment of answering, which real keep-alive
// timeouts never do; TestUnsafeReuseWindow shows the window). No request
// is answered 502, none reaches the upstream twice.
func TestStaleIdleConnection(t *testing.T) {
	closedIdle := make(chan struct{}, 10)
	u := newRawUpstream(t, func(c net.Conn, _ *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		closedIdle <- struct{}{}
		return false // closes without Connection: close
	})
	p, url, c := fastProxy(t, Options{UnsafeReuseWindow: -1}, u.addr())
	steps := []struct{ method, body, key string }{
		{"GET", "", ""},
		{"GET", "", ""},
		{"POST", "", ""},
		{"PUT", "payload", ""},
		{"POST", "payload", ""},
		{"POST", "payload", "k1"},
		{"DELETE", "", ""},
	}
	for i, s := range steps {
		var body io.Reader
		if s.body != "" {
			body = strings.NewReader(s.body)
		}
		req, _ := http.NewRequest(s.method, url, body)
		if s.key != "" {
			req.Header.Set("Idempotency-Key", s.key)
		}
		if r := do(t, c, req); r.status != 200 || r.body != "ok" {
			t.Fatalf("%s #%d: %d %q, want 200 ok", s.method, i, r.status, r.body)
		}
		<-closedIdle
		// The upstream has closed its side; the proxy may not know yet.
		eventually(t, "upstream closed its side", func() bool { return u.closed.Load() == u.conns.Load() })
	}
	resets := value(t, p.m.upstreamErrors.WithLabelValues("ns/s", "reset"))
	if !stdMode && resets != 0 {
		t.Errorf("reset errors = %v, want 0", resets)
	}
	// net/http's Transport sends a bodyless GET again by itself, but not
	// after every way a closed connection can fail a write: then the
	// proxy does (a reset, retried), and the request is still answered.
	if got := value(t, p.m.retries.WithLabelValues("ns/s", "reset")); got != resets {
		t.Errorf("reset retries = %v, want %v (every reset sent again)", got, resets)
	}
	if got := u.reqs.Load(); got != int64(len(steps)) {
		t.Errorf("upstream requests = %d, want %d (each once)", got, len(steps))
	}
	if got := u.conns.Load(); got != int64(len(steps)) {
		t.Errorf("upstream connections = %d, want %d", got, len(steps))
	}
	if stdMode {
		return // the Transport retries by itself, and counts nothing
	}
	if got := value(t, p.m.dials.WithLabelValues("ns/s")); got != float64(len(steps)) {
		t.Errorf("dials = %v, want %d", got, len(steps))
	}
	// The bodyless GET and DELETE never peek: they always meet the closed
	// connection, and are sent again.
	if got := value(t, p.m.retries.WithLabelValues("ns/s", "stale")); got < 2 {
		t.Errorf("stale retries = %v, want at least 2", got)
	}
}

// dropPOST is an upstream that answers every request but a POST, which it
// reads to its end, counts, and drops by closing the connection without
// a response: a pod that crashed after acting on the request.
type dropPOST struct {
	*rawUpstream
	mu     sync.Mutex
	bodies []string
}

func newDropPOST(t *testing.T) *dropPOST {
	d := &dropPOST{}
	d.rawUpstream = newRawUpstream(t, func(c net.Conn, r *http.Request) bool {
		if r.Method != "POST" {
			_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			return err == nil
		}
		b, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.bodies = append(d.bodies, string(b))
		d.mu.Unlock()
		return false
	})
	return d
}

func (d *dropPOST) posts() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.bodies...)
}

// TestPostNeverSentTwice: a POST the upstream read and then dropped
// without a response is answered 502 and reaches the upstream exactly
// once, on a new connection and on a reused one alike, whatever the
// retry budget.
func TestPostNeverSentTwice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reuse bool // a GET first leaves a connection to reuse
		body  string
	}{
		{"new connection", false, "payload"},
		{"reused connection", true, "payload"},
		{"reused connection, no body", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDropPOST(t)
			// A window of an hour: the POST takes the GET's connection
			// however loaded the machine is.
			p, url, c := fastProxy(t, Options{UnsafeReuseWindow: time.Hour}, d.addr())
			if tc.reuse {
				if r := get(t, c, url); r.status != 200 {
					t.Fatalf("GET: %d", r.status)
				}
			}
			req, _ := http.NewRequest("POST", url, strings.NewReader(tc.body))
			if r := do(t, c, req); r.status != 502 {
				t.Fatalf("POST: %d %q, want 502", r.status, r.body)
			}
			if got := d.posts(); len(got) != 1 || got[0] != tc.body {
				t.Errorf("upstream got POST bodies %q, want exactly one %q", got, tc.body)
			}
			if tc.reuse && !stdMode && d.conns.Load() != 1 {
				t.Errorf("upstream connections = %d, want 1 (the POST reused the GET's)", d.conns.Load())
			}
			for _, reason := range retryReasons {
				if got := value(t, p.m.retries.WithLabelValues("ns/s", reason)); got != 0 {
					t.Errorf("retries{reason=%s} = %v, want 0", reason, got)
				}
			}
		})
	}
}

// TestIdempotencyKeyRetried: the upstream answers the first request of
// each connection and drops a POST that comes later on one, after reading
// it. A POST with an Idempotency-Key, sent on the reused connection, is
// sent again on a new one and answered: the upstream sees it twice, as
// the key allows. (The Transport path sends a request with a body on a
// new connection from the start: there it is seen once.)
func TestIdempotencyKeyRetried(t *testing.T) {
	for _, body := range []string{"payload", ""} {
		t.Run("body="+body, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[net.Conn]int{}
			var posts []string
			u := newRawUpstream(t, func(c net.Conn, r *http.Request) bool {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				n := seen[c]
				seen[c]++
				if r.Method == "POST" {
					posts = append(posts, string(b))
				}
				mu.Unlock()
				if r.Method == "POST" && n > 0 {
					return false // dropped
				}
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				return err == nil
			})
			p, url, c := fastProxy(t, Options{}, u.addr())
			if r := get(t, c, url); r.status != 200 {
				t.Fatalf("GET: %d", r.status)
			}
			req, _ := http.NewRequest("POST", url, strings.NewReader(body))
			req.Header.Set("Idempotency-Key", "k1")
			if r := do(t, c, req); r.status != 200 || r.body != "ok" {
				t.Fatalf("POST with Idempotency-Key: %d %q, want 200 ok", r.status, r.body)
			}
			want := 2
			if stdMode && body != "" {
				want = 1
			}
			mu.Lock()
			got := append([]string(nil), posts...)
			mu.Unlock()
			if len(got) != want {
				t.Fatalf("upstream got %d POSTs, want %d", len(got), want)
			}
			for _, g := range got {
				if g != body {
					t.Errorf("upstream got POST body %q, want %q", g, body)
				}
			}
			if !stdMode {
				if got := value(t, p.m.retries.WithLabelValues("ns/s", "stale")); got != 1 {
					t.Errorf("stale retries = %v, want 1", got)
				}
				if got := value(t, p.m.dials.WithLabelValues("ns/s")); got != 2 {
					t.Errorf("dials = %v, want 2", got)
				}
			}
		})
	}
}

// TestUnsafeReuseWindow: a POST without an Idempotency-Key takes the
// connection a request just used when UnsafeReuseWindow allows (an hour
// here, so a loaded machine cannot make it too old), and a new connection
// when the window is off. The upstream keeps every connection.
func TestUnsafeReuseWindow(t *testing.T) {
	for _, tc := range []struct {
		name         string
		window       time.Duration
		fast, viaStd int64 // upstream connections for GET, POST, POST
	}{
		// The Transport path keeps the POSTs' connections apart from
		// the GET's.
		{"reuse", time.Hour, 1, 2},
		{"off", -1, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newRawUpstream(t, canned("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			p, url, c := fastProxy(t, Options{UnsafeReuseWindow: tc.window}, u.addr())
			get(t, c, url)
			for range 2 {
				req, _ := http.NewRequest("POST", url, strings.NewReader("x"))
				if r := do(t, c, req); r.status != 200 {
					t.Fatalf("POST: %d", r.status)
				}
			}
			want := tc.fast
			if stdMode {
				want = tc.viaStd
			}
			if got := u.conns.Load(); got != want {
				t.Errorf("upstream connections = %d, want %d", got, want)
			}
			if !stdMode {
				if got := value(t, p.m.dials.WithLabelValues("ns/s")); got != float64(want) {
					t.Errorf("dials = %v, want %d", got, want)
				}
			}
		})
	}
}

// TestIdleTimeoutClosesPooled: the proxy closes an upstream connection
// idle for IdleConnTimeout itself, before the pod's keep-alive timeout
// would, and the next request opens a new one. The default is below the
// 5s of Node.js and uvicorn.
func TestIdleTimeoutClosesPooled(t *testing.T) {
	if d := New(Options{}).opts.IdleConnTimeout; d >= 4*time.Second {
		t.Errorf("default IdleConnTimeout = %v, want below 4s", d)
	}
	a := newBackend(t, "a", nil)
	p, url, c := fastProxy(t, Options{IdleConnTimeout: 50 * time.Millisecond}, a.addr())
	for i := range 2 {
		if r := get(t, c, url); r.status != 200 {
			t.Fatalf("GET %d: %d", i, r.status)
		}
		// The backend keeps idle connections forever: only the proxy
		// closes this one.
		eventually(t, "proxy closed the idle connection", func() bool { return a.closed.Load() == int64(i+1) })
	}
	if got := a.opened.Load(); got != 2 {
		t.Errorf("upstream connections = %d, want 2", got)
	}
	if !stdMode {
		if got := value(t, p.m.dials.WithLabelValues("ns/s")); got != 2 {
			t.Errorf("dials = %v, want 2", got)
		}
	}
}

// TestPostNotSeenSentAgain: the upstream closes an idle connection (as a
// server does when it stops) just after the proxy took it for a POST and
// found it alive, so the POST is written onto a connection the upstream
// has already closed. The upstream's closing FIN acknowledged none of the
// request: it provably never saw it, so the proxy sends it again on a new
// connection, and the upstream sees it exactly once. A body the proxy does
// not keep (chunked, or longer than it keeps) cannot be sent again: 502,
// and the upstream saw nothing. (TestPostNeverSentTwice is the other side:
// a POST the upstream read is never sent again.)
func TestPostNotSeenSentAgain(t *testing.T) {
	if stdMode {
		t.Skip("the Transport path sends a request with a body on a new connection")
	}
	for _, tc := range []struct {
		name    string
		body    string
		chunked bool
		want    int // status
		posts   int // POSTs the upstream saw
	}{
		{"short body", "payload", false, 200, 1},
		{"no body", "", false, 200, 1},
		{"longest kept body", strings.Repeat("x", maxReplay), false, 200, 1},
		{"longer body", strings.Repeat("x", maxReplay+1), false, 502, 0},
		{"chunked body", "payload", true, 502, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idle := make(chan net.Conn, 1)
			var posts atomic.Int64
			u := newRawUpstream(t, func(c net.Conn, r *http.Request) bool {
				if r.Method == "POST" {
					posts.Add(1)
				}
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				if r.Method == "GET" {
					idle <- c
				}
				return err == nil
			})
			testHookReused = func(hc *h1conn) {
				(<-idle).Close() // the upstream closes the idle connection
				eventually(t, "the upstream's FIN arrived", hc.broken)
			}
			t.Cleanup(func() { testHookReused = nil })
			p, url, c := fastProxy(t, Options{UnsafeReuseWindow: time.Hour}, u.addr())
			if r := get(t, c, url); r.status != 200 {
				t.Fatalf("GET: %d", r.status)
			}
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // no length: sent chunked
			}
			req, _ := http.NewRequest("POST", url, body)
			if r := do(t, c, req); r.status != tc.want {
				t.Fatalf("POST: %d %q, want %d", r.status, r.body, tc.want)
			}
			if got := posts.Load(); got != int64(tc.posts) {
				t.Errorf("upstream saw %d POSTs, want %d", got, tc.posts)
			}
			stale := value(t, p.m.retries.WithLabelValues("ns/s", "stale"))
			if want := float64(tc.posts); stale != want {
				t.Errorf("stale retries = %v, want %v", stale, want)
			}
		})
	}
}
