package http1

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests of the fast loop's own behaviour: hand-offs, streaming, the
// request context, timeouts and shutdown.

// client is a raw connection with a reader for responses.
type client struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, tg *target) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", tg.addr, hangTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(hangTimeout))
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

func (cl *client) send(s string) {
	cl.t.Helper()
	if _, err := cl.c.Write(crlf(s)); err != nil {
		cl.t.Fatal(err)
	}
}

// response reads a response to a request with method.
func (cl *client) response(method string) *http.Response {
	cl.t.Helper()
	res, err := http.ReadResponse(cl.br, &http.Request{Method: method})
	if err != nil {
		cl.t.Fatal(err)
	}
	return res
}

// body reads a response body to its end, failing the test on an error.
func (cl *client) body(res *http.Response) string {
	cl.t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		cl.t.Fatalf("reading body: %v (read %q)", err, b)
	}
	return string(b)
}

// closed waits for the server to close the connection, failing the test
// if it sends anything more first.
func (cl *client) closed() {
	cl.t.Helper()
	b, err := io.ReadAll(cl.br)
	if err != nil && !isReset(err) {
		cl.t.Fatalf("waiting for close: %v", err)
	}
	if len(b) > 0 {
		cl.t.Fatalf("got %q before the close", b)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// handlerFunc makes a target's handler of f (the request log is unused).
func handlerFunc(f http.HandlerFunc) func(*reqLog) http.Handler {
	return func(*reqLog) http.Handler { return f }
}

func TestBodyReadAfterContextDone(t *testing.T) {
	// The handler waits on the context before it reads the body: the
	// background read starts when the body ends.
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stop := context.AfterFunc(r.Context(), func() {})
		defer stop()
		_ = r.Context().Done()
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "got "+string(b))
	}), Options{})
	cl := dial(t, tg)
	cl.send(post("/", "hello"))
	if got := cl.body(cl.response("POST")); got != "got hello" {
		t.Fatalf("body %q", got)
	}
	cl.send("GET / HTTP/1.1\nHost: a\n\n")
	if got := cl.body(cl.response("GET")); got != "got " {
		t.Fatalf("second body %q", got)
	}
}

func TestUnreadBodyClosesWithoutReset(t *testing.T) {
	// The handler leaves a body larger than the loop reads to keep the
	// connection: the response says "Connection: close", and the close
	// is orderly (a reset could destroy the response in the client's
	// receive buffer).
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}), Options{})
	for range 3 {
		cl := dial(t, tg)
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			cl.c.Write(crlf("POST / HTTP/1.1\nHost: a\nContent-Length: 1000000\n\n"))
			cl.c.Write(make([]byte, 1000000))
		}()
		res := cl.response("POST")
		if got := cl.body(res); got != "ok" || !res.Close {
			t.Fatalf("body %q, close %v", got, res.Close)
		}
		if b, err := io.ReadAll(cl.br); err != nil || len(b) > 0 {
			t.Fatalf("after the response: %q, %v", b, err)
		}
		cl.c.Close()
		<-wrote
	}
}

// deadlineConn records the read deadline set on it.
type deadlineConn struct {
	net.Conn
	deadline time.Time
	sets     int
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.deadline = t
	c.sets++
	return nil
}

func TestSetDeadline(t *testing.T) {
	// Whatever the timeouts and the times of the calls, the deadline in
	// effect is within the slack (an eighth of the timeout, at most a
	// second) of the one asked for: never in the past.
	type call struct {
		at      time.Duration // since t0
		timeout time.Duration
	}
	t0 := time.Unix(1_000_000, 0)
	for _, seq := range [][]call{
		// Close header and idle timeouts, small as in tests.
		{{0, 300 * time.Millisecond}, {10 * time.Millisecond, 200 * time.Millisecond}, {250 * time.Millisecond, 200 * time.Millisecond}},
		// The defaults.
		{{0, 10 * time.Second}, {time.Millisecond, 120 * time.Second}, {2 * time.Millisecond, 120 * time.Second}, {3 * time.Millisecond, 10 * time.Second}},
		// A slow handler: the header deadline passed before the idle wait.
		{{0, 1 * time.Second}, {1500 * time.Millisecond, 1200 * time.Millisecond}},
		{{0, 2 * time.Second}, {100 * time.Millisecond, 2800 * time.Millisecond}},
		{{0, 500 * time.Millisecond}, {600 * time.Millisecond, 800 * time.Millisecond}},
	} {
		fc := &deadlineConn{}
		c := &conn{nc: fc}
		for _, cl := range seq {
			now := t0.Add(cl.at)
			c.setDeadline(now, cl.timeout)
			want := now.Add(cl.timeout)
			slack := min(time.Second, cl.timeout/8)
			if d := fc.deadline.Sub(want); d < -slack || d > slack {
				t.Errorf("%v: deadline %v from now, want %v", seq, fc.deadline.Sub(now), cl.timeout)
			}
		}
	}
	// Requests in quick succession with the default idle timeout cost
	// one timer update.
	fc := &deadlineConn{}
	c := &conn{nc: fc}
	for i := range 100 {
		c.setDeadline(t0.Add(time.Duration(i)*time.Millisecond), 120*time.Second)
	}
	if fc.sets != 1 {
		t.Errorf("%d deadline updates for 100 quick requests, want 1", fc.sets)
	}
}

// counter is a handler that answers "ok" and counts its requests.
type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	io.WriteString(w, "ok")
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func TestTimeouts(t *testing.T) {
	// Small timeouts close the connection; what is asserted is the close
	// (and that no request was made up), not when it came.
	h := &counter{}
	tg := startFast(t, func(*reqLog) http.Handler { return h }, Options{
		ReadHeaderTimeout: 150 * time.Millisecond,
		IdleTimeout:       100 * time.Millisecond,
	})
	t.Run("idle after a request", func(t *testing.T) {
		cl := dial(t, tg)
		for range 3 {
			cl.send("GET / HTTP/1.1\nHost: a\n\n")
			cl.body(cl.response("GET"))
		}
		cl.closed()
	})
	t.Run("nothing sent", func(t *testing.T) {
		dial(t, tg).closed()
	})
	t.Run("header not finished", func(t *testing.T) {
		cl := dial(t, tg)
		cl.send("GET / HTTP/1.1\nHost: a\n")
		cl.closed()
	})
	t.Run("second header not finished", func(t *testing.T) {
		cl := dial(t, tg)
		cl.send("GET / HTTP/1.1\nHost: a\n\nGET /2 HTTP/1.1\n")
		cl.body(cl.response("GET"))
		cl.closed()
	})
	t.Run("second header after a pause", func(t *testing.T) {
		cl := dial(t, tg)
		cl.send("GET / HTTP/1.1\nHost: a\n\n")
		cl.body(cl.response("GET"))
		cl.send("GET /2 HTTP/1.1\n")
		cl.closed()
	})
	if n := h.count(); n != 5 {
		t.Errorf("handler called %d times, want 5", n)
	}
}

func TestShutdown(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			w.Header().Set("Connection", "keep-alive")
			close(entered)
			<-release
		}
		io.WriteString(w, "ok")
	}), Options{})

	idle := dial(t, tg)
	idle.send("GET / HTTP/1.1\nHost: a\n\n")
	idle.body(idle.response("GET"))
	fresh := dial(t, tg)
	busy := dial(t, tg)
	busy.send("GET /slow HTTP/1.1\nHost: a\n\n")
	<-entered

	tg.fast.Shutdown()
	idle.closed()
	// A connection that sent nothing yet may have its first request on
	// the way: it is served, and closed after the response.
	fresh.send("GET / HTTP/1.1\nHost: a\n\n")
	if res := fresh.response("GET"); fresh.body(res) != "ok" || !res.Close {
		t.Fatalf("first request after shutdown: Connection: close %v", res.Close)
	}
	fresh.closed()
	close(release)
	res := busy.response("GET")
	if got := busy.body(res); got != "ok" || !res.Close {
		t.Fatalf("in-flight response: body %q, Connection: close %v", got, res.Close)
	}
	if v := res.Header["Connection"]; len(v) != 0 {
		t.Errorf("Connection fields besides close: %q", v)
	}
	busy.closed()
}

func TestShutdownClosesSilentFreshConnections(t *testing.T) {
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}), Options{freshGrace: 300 * time.Millisecond})
	silent := dial(t, tg)
	tg.fast.Shutdown()
	// closed fails on the client's own timeout (hangTimeout) if the
	// server keeps the connection past the grace.
	silent.closed()
}

func TestContextCanceledWhenClientGoes(t *testing.T) {
	for _, how := range []string{"Done", "AfterFunc", "AfterFunc of a child"} {
		t.Run(how, func(t *testing.T) {
			entered := make(chan struct{})
			canceled := make(chan error, 1)
			tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx := r.Context()
				done := ctx.Done()
				switch how {
				case "AfterFunc":
					ch := make(chan struct{})
					context.AfterFunc(ctx, func() { close(ch) })
					done = ch
				case "AfterFunc of a child":
					child, cancel := context.WithCancel(ctx)
					defer cancel()
					ch := make(chan struct{})
					context.AfterFunc(child, func() { close(ch) })
					done = ch
				}
				close(entered)
				select {
				case <-done:
					canceled <- ctx.Err()
				case <-time.After(hangTimeout):
					canceled <- nil
				}
			}), Options{})
			cl := dial(t, tg)
			cl.send("GET / HTTP/1.1\nHost: a\n\n")
			<-entered
			cl.c.Close()
			if err := <-canceled; err != context.Canceled {
				t.Fatalf("context error %v after the client went, want %v", err, context.Canceled)
			}
		})
	}
}

func TestContextDoneAfterHandler(t *testing.T) {
	ctxs := make(chan context.Context, 2)
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/watched" {
			_ = r.Context().Done()
		}
		if err := r.Context().Err(); err != nil {
			t.Errorf("context error %v while the handler runs", err)
		}
		ctxs <- r.Context()
		io.WriteString(w, "ok")
	}), Options{})
	cl := dial(t, tg)
	for _, path := range []string{"/", "/watched"} {
		cl.send("GET " + path + " HTTP/1.1\nHost: a\n\n")
		cl.body(cl.response("GET"))
		ctx := <-ctxs
		// The response is out: the handler returned.
		if err := ctx.Err(); err != context.Canceled {
			t.Errorf("%s: context error %v after the handler, want %v", path, err, context.Canceled)
		}
		select {
		case <-ctx.Done():
		default:
			t.Errorf("%s: context not done after the handler", path)
		}
	}
}

// TestRecycleKeepsWatchedRequests: with RecycleRequests, a request whose
// context a handler watched is never reused, so the context stays done
// (and its header as it was) however many requests follow.
func TestRecycleKeepsWatchedRequests(t *testing.T) {
	type kept struct {
		ctx context.Context
		r   *http.Request
	}
	reqs := make(chan kept, 1)
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/watched" {
			_ = r.Context().Done()
			reqs <- kept{r.Context(), r}
		}
		io.WriteString(w, "ok")
	}), Options{RecycleRequests: true})
	cl := dial(t, tg)
	cl.send("GET /watched HTTP/1.1\nHost: a\nX-Kept: 1\n\n")
	cl.body(cl.response("GET"))
	k := <-reqs
	for i := range 5 {
		cl.send("GET /" + strconv.Itoa(i) + " HTTP/1.1\nHost: b\nX-Kept: 2\n\n")
		cl.body(cl.response("GET"))
	}
	if err := k.ctx.Err(); err != context.Canceled {
		t.Errorf("context error %v after the handler, want %v", err, context.Canceled)
	}
	if got := k.r.Header.Get("X-Kept"); got != "1" || k.r.Host != "a" || k.r.URL.Path != "/watched" {
		t.Errorf("kept request changed: host %q, path %q, X-Kept %q", k.r.Host, k.r.URL.Path, got)
	}
}

func TestPipelinedWhileWatching(t *testing.T) {
	// The handler of the first request waits on its context, which reads
	// from the connection in the background; the second request arrives
	// then: it is not taken for the client going away, and is served.
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	errs := make(chan error, 1)
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/1" {
			ctx := r.Context()
			entered <- struct{}{}
			select {
			case <-ctx.Done():
				errs <- ctx.Err()
			case <-release:
			}
		}
		io.WriteString(w, r.URL.Path)
	}), Options{})
	cl := dial(t, tg)
	cl.send("GET /1 HTTP/1.1\nHost: a\n\n")
	<-entered
	cl.send("GET /2 HTTP/1.1\nHost: a\n\n")
	waitBackgroundRead(t, tg.fast)
	close(release)
	for _, want := range []string{"/1", "/2"} {
		if got := cl.body(cl.response("GET")); got != want {
			t.Fatalf("body %q, want %q", got, want)
		}
	}
	select {
	case err := <-errs:
		t.Fatalf("context canceled: %v", err)
	default:
	}
}

// waitBackgroundRead waits until the background read of s's one
// connection has ended (found a byte or an error).
func waitBackgroundRead(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(hangTimeout)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		var done chan struct{}
		for c := range s.conns {
			c.bgMu.Lock()
			done = c.bgDone
			c.bgMu.Unlock()
		}
		s.mu.Unlock()
		if done != nil {
			select {
			case <-done:
				return
			case <-time.After(hangTimeout):
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no background read ended")
}

type ctxKey struct{}

func TestContextValues(t *testing.T) {
	// The request context carries the connection context's values,
	// deadline and cancellation, and the local address as net/http's.
	parentDeadline := time.Now().Add(time.Hour)
	canceled := make(chan struct{})
	type seenCtx struct {
		value, local any
		deadline     time.Time
		hasDeadline  bool
		err          error
	}
	got := make(chan seenCtx, 1)
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		d, ok := ctx.Deadline()
		got <- seenCtx{ctx.Value(ctxKey{}), ctx.Value(http.LocalAddrContextKey), d, ok, ctx.Err()}
	}), Options{ConnContext: func(ctx context.Context, c net.Conn) context.Context {
		ctx = context.WithValue(ctx, ctxKey{}, "v")
		ctx, cancel := context.WithDeadline(ctx, parentDeadline)
		go func() {
			<-canceled
			cancel()
		}()
		return ctx
	}})
	cl := dial(t, tg)
	cl.send("GET / HTTP/1.1\nHost: a\n\n")
	cl.body(cl.response("GET"))
	s := <-got
	if s.value != "v" || s.err != nil || !s.hasDeadline || !s.deadline.Equal(parentDeadline) {
		t.Errorf("value %v, err %v, deadline %v %v", s.value, s.err, s.deadline, s.hasDeadline)
	}
	if a, ok := s.local.(net.Addr); !ok || a.String() != tg.addr {
		t.Errorf("local address %v, want %s", s.local, tg.addr)
	}
	close(canceled)
	deadline := time.Now().Add(hangTimeout)
	for {
		cl.send("GET / HTTP/1.1\nHost: a\n\n")
		cl.body(cl.response("GET"))
		if s := <-got; s.err == context.Canceled {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("context error %v after the connection context was canceled", s.err)
		}
	}
}

// handOffHandler echoes: after a hijack for an Upgrade request, the lines
// the client sends; otherwise the request body.
func handOffHandler(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") == "echo" {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		for {
			l, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			brw.WriteString("echo " + l)
			brw.Flush()
		}
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	io.WriteString(w, r.Proto+" "+string(b))
}

func TestHandOff(t *testing.T) {
	tg := startFast(t, handlerFunc(handOffHandler), Options{})
	t.Run("upgrade", func(t *testing.T) {
		cl := dial(t, tg)
		// A request first, served by the loop; then the upgrade, with
		// the first line of the new protocol in the same write.
		cl.send("POST / HTTP/1.1\nHost: a\nContent-Length: 2\n\nhi" +
			"GET / HTTP/1.1\nHost: a\nUpgrade: echo\nConnection: Upgrade\n\none\n")
		if got := cl.body(cl.response("POST")); got != "HTTP/1.1 hi" {
			t.Fatalf("first body %q", got)
		}
		if res := cl.response("GET"); res.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %s", res.Status)
		}
		for _, l := range []string{"one", "two"} {
			if l == "two" {
				cl.send("two\n")
			}
			got, err := cl.br.ReadString('\n')
			if err != nil || got != "echo "+l+"\r\n" {
				t.Fatalf("got %q, %v", got, err)
			}
		}
	})
	t.Run("expect", func(t *testing.T) {
		cl := dial(t, tg)
		cl.send("POST / HTTP/1.1\nHost: a\nExpect: 100-continue\nContent-Length: 5\n\n")
		if res := cl.response("POST"); res.StatusCode != http.StatusContinue {
			t.Fatalf("status %s, want 100", res.Status)
		}
		cl.c.Write([]byte("hello"))
		if got := cl.body(cl.response("POST")); got != "HTTP/1.1 hello" {
			t.Fatalf("body %q", got)
		}
	})
	t.Run("chunked", func(t *testing.T) {
		cl := dial(t, tg)
		cl.send("POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n5\nhello\n0\n\n")
		if got := cl.body(cl.response("POST")); got != "HTTP/1.1 hello" {
			t.Fatalf("body %q", got)
		}
	})
	t.Run("HTTP/1.0", func(t *testing.T) {
		cl := dial(t, tg)
		cl.send("POST / HTTP/1.0\nContent-Length: 5\n\nhello")
		if got := cl.body(cl.response("POST")); got != "HTTP/1.0 hello" {
			t.Fatalf("body %q", got)
		}
		cl.closed()
	})
	t.Run("large header", func(t *testing.T) {
		cl := dial(t, tg)
		cl.send(bigHeader(6000))
		if got := cl.body(cl.response("GET")); got != "HTTP/1.1 " {
			t.Fatalf("body %q", got)
		}
	})
	t.Run("target", func(t *testing.T) {
		cl := dial(t, tg)
		cl.send("GET http://a/ HTTP/1.1\nHost: a\n\n")
		if got := cl.body(cl.response("GET")); got != "HTTP/1.1 " {
			t.Fatalf("body %q", got)
		}
	})
	for reason, n := range map[string]int{
		reasonUpgrade: 1, reasonExpect: 1, reasonTransferEncoding: 1, reasonVersion: 1, reasonHeaderSize: 1, reasonTarget: 1,
	} {
		if got := tg.handoffCount(reason); got != n {
			t.Errorf("%d hand-offs for %s, want %d", got, reason, n)
		}
	}
}

func TestHandOffAfterListenerClosed(t *testing.T) {
	// Once the hand-off listener is closed (its server shut down), a
	// connection to hand off is closed instead.
	h := &counter{}
	tg := startFast(t, func(*reqLog) http.Handler { return h }, Options{})
	tg.fast.o.HandOff.Close()
	cl := dial(t, tg)
	cl.send("GET / HTTP/1.0\n\n")
	cl.closed()
	if h.count() != 0 {
		t.Fatal("request served")
	}
}

func TestStreaming(t *testing.T) {
	// Flushed parts arrive while the handler still runs.
	next := make(chan struct{})
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, part := range []string{"one", "two", "three"} {
			io.WriteString(w, part)
			w.(http.Flusher).Flush()
			<-next
		}
	}), Options{})
	cl := dial(t, tg)
	cl.send("GET / HTTP/1.1\nHost: a\n\n")
	res := cl.response("GET")
	if len(res.TransferEncoding) != 1 || res.TransferEncoding[0] != "chunked" {
		t.Fatalf("transfer encoding %v", res.TransferEncoding)
	}
	for _, part := range []string{"one", "two", "three"} {
		b := make([]byte, len(part))
		if _, err := io.ReadFull(res.Body, b); err != nil || string(b) != part {
			t.Fatalf("read %q, %v, want %q", b, err, part)
		}
		next <- struct{}{}
	}
	if rest := cl.body(res); rest != "" {
		t.Fatalf("more body %q", rest)
	}
}

func TestTrailers(t *testing.T) {
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Declared, X-Forbidden-Not")
		io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Declared", "d")
		w.Header().Set(http.TrailerPrefix+"X-Prefixed", "p")
	}), Options{})
	cl := dial(t, tg)
	for range 2 {
		cl.send("GET / HTTP/1.1\nHost: a\n\n")
		res := cl.response("GET")
		if got := cl.body(res); got != "body" {
			t.Fatalf("body %q", got)
		}
		if got := res.Trailer.Get("X-Declared"); got != "d" {
			t.Errorf("declared trailer %q", got)
		}
		if got := res.Trailer.Get("X-Prefixed"); got != "p" {
			t.Errorf("prefixed trailer %q", got)
		}
		if res.Header.Get("X-Declared") != "" {
			t.Errorf("trailer in the header")
		}
	}
}

func TestShortBody(t *testing.T) {
	// A body shorter than its Content-Length: the connection closes, so
	// that the client sees the response is cut.
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "short")
	}), Options{})
	cl := dial(t, tg)
	cl.send("GET / HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")
	res := cl.response("GET")
	b, err := io.ReadAll(res.Body)
	if string(b) != "short" || err != io.ErrUnexpectedEOF {
		t.Fatalf("body %q, %v", b, err)
	}
	cl.closed()
}

// logRecorder is a slog.Handler keeping the messages logged.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

func TestPanic(t *testing.T) {
	// A panicking handler (http.ErrAbortHandler too) leaves an incomplete
	// response: what was flushed, then the close. Only a real panic is
	// logged.
	logs := &logRecorder{}
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("flush") != "" {
			io.WriteString(w, "part")
			w.(http.Flusher).Flush()
		}
		if r.URL.Query().Get("cl") != "" {
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "part")
		}
		if r.URL.Query().Get("abort") != "" {
			panic(http.ErrAbortHandler)
		}
		panic("boom")
	}), Options{Logger: slog.New(logs)})
	for _, q := range []string{"", "flush=1", "cl=1", "abort=1", "abort=1&flush=1"} {
		t.Run(q, func(t *testing.T) {
			cl := dial(t, tg)
			cl.send("GET /?" + q + " HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\nHost: a\n\n")
			res, err := http.ReadResponse(cl.br, nil)
			if q == "" || q == "abort=1" {
				// Nothing was sent.
				if err != io.ErrUnexpectedEOF && err != io.EOF {
					t.Fatalf("response %v, %v", res, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(res.Body)
			if string(b) != "part" || err != io.ErrUnexpectedEOF {
				t.Fatalf("body %q, %v", b, err)
			}
			cl.closed()
		})
	}
	if n := logs.count("http1: panic serving request"); n != 3 {
		t.Errorf("%d panics logged, want 3", n)
	}
}
