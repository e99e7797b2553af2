package http1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The harness runs the same handler behind a plain http.Server ("std")
// and behind the fast loop with an http.Server for its hand-offs
// ("fast"), both on loopback, and talks raw bytes to them.

// hangTimeout bounds every wait of the tests; it only guards against
// hangs and is never an expectation about speed.
const hangTimeout = 20 * time.Second

// seen is what the test handler saw of one request.
type seen struct {
	Method, RequestURI, URL, Host, Proto string
	Header                               http.Header
	ContentLength                        int64
	TransferEncoding                     []string
	Body, BodyErr                        string
	Close                                bool
	Trailer                              http.Header
	// LocalAddr: the context has http.LocalAddrContextKey.
	LocalAddr bool
	// via is "F" when the fast loop served the request, "N" when net/http
	// did; not compared.
	via string
}

func (s seen) String() string {
	return fmt.Sprintf("%s %q url=%q host=%q %s hdr=%v cl=%d te=%v body=%q err=%q close=%v trailer=%v local=%v",
		s.Method, s.RequestURI, s.URL, s.Host, s.Proto, s.Header, s.ContentLength, s.TransferEncoding,
		s.Body, s.BodyErr, s.Close, s.Trailer, s.LocalAddr)
}

// reqLog collects what a handler saw, per client address.
type reqLog struct {
	mu sync.Mutex
	m  map[string][]seen
}

func (l *reqLog) add(remote string, s seen) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string][]seen{}
	}
	l.m[remote] = append(l.m[remote], s)
}

// reset forgets what was seen from remote: a new connection from the
// same address (loopback reuses ports quickly) starts afresh.
func (l *reqLog) reset(remote string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, remote)
}

func (l *reqLog) get(remote string) []seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.m[remote])
}

// diffHandler records each request in log and answers deterministically,
// as the request's query asks:
//
//	noread=1   leave the request body unread
//	read=N     read only N bytes of the request body
//	bclose=1   close the request body before reading it
//	st=N       status N
//	info=N     send the informational status N (with a Link field) first
//	cl=N|auto  a Content-Length field: N as given, auto the true length
//	n=N        a body of N bytes ("x", N up to maxTestBody), instead of a summary of the request
//	ct=V       Content-Type V (otherwise none is set)
//	close=1    a "Connection: close" field
//	ka=1       a "Connection: keep-alive" field
//	flush=1    flush after the first byte of the body
//	trailer=1  a trailer declared in a Trailer field, set after the body
//	ptrailer=1 a trailer set with http.TrailerPrefix after the body
//	hdr=V      an X-Echo field with value V
func diffHandler(l *reqLog) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{
			Method: r.Method, RequestURI: r.RequestURI, URL: r.URL.String(), Host: r.Host,
			Proto: r.Proto, Header: r.Header.Clone(), ContentLength: r.ContentLength,
			TransferEncoding: r.TransferEncoding, Close: r.Close, via: "N",
			LocalAddr: r.Context().Value(http.LocalAddrContextKey) != nil,
		}
		if _, ok := w.(*response); ok {
			s.via = "F"
		}
		q := r.URL.Query()
		if q.Get("bclose") != "" {
			r.Body.Close()
		}
		if n, err := strconv.ParseInt(q.Get("read"), 10, 64); err == nil {
			b, err := io.ReadAll(io.LimitReader(r.Body, n))
			s.Body = string(b)
			if err != nil {
				s.BodyErr = err.Error()
			}
		} else if q.Get("noread") == "" {
			b, err := io.ReadAll(r.Body)
			s.Body = string(b)
			if err != nil {
				s.BodyErr = err.Error()
			}
			s.Trailer = r.Trailer.Clone()
		}
		l.add(r.RemoteAddr, s)

		body := []byte(fmt.Sprintf("%s %s %d\n", r.Method, r.RequestURI, len(s.Body)))
		if n, err := strconv.Atoi(q.Get("n")); err == nil && n >= 0 && n <= maxTestBody {
			body = bytes.Repeat([]byte("x"), n)
		}
		h := w.Header()
		if v := q.Get("ct"); v != "" {
			h.Set("Content-Type", noCTL(v))
		}
		if v := q.Get("hdr"); v != "" {
			h.Set("X-Echo", noCTL(v))
		}
		switch v := q.Get("cl"); v {
		case "":
		case "auto":
			h.Set("Content-Length", strconv.Itoa(len(body)))
		default:
			// net/http sends an invalid handler Content-Length on a HEAD
			// response as it is (an unreadable response; on other methods
			// it drops the field): a quirk the fast loop does not copy.
			if _, err := strconv.ParseUint(v, 10, 63); err == nil || r.Method != http.MethodHead {
				h.Set("Content-Length", v)
			}
		}
		if q.Get("close") != "" {
			h.Set("Connection", "close")
		}
		if q.Get("ka") != "" {
			h.Set("Connection", "keep-alive")
		}
		if q.Get("trailer") != "" {
			h.Set("Trailer", "X-Trailer")
		}
		if v, err := strconv.Atoi(q.Get("info")); err == nil {
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(v)
		}
		st := http.StatusOK
		if v, err := strconv.Atoi(q.Get("st")); err == nil && v >= 100 && v <= 999 {
			st = v
		}
		w.WriteHeader(st)
		if q.Get("flush") != "" && len(body) > 0 {
			w.Write(body[:1])
			w.(http.Flusher).Flush()
			body = body[1:]
		}
		w.Write(body)
		if q.Get("trailer") != "" {
			h.Set("X-Trailer", "declared")
		}
		if q.Get("ptrailer") != "" {
			h.Set(http.TrailerPrefix+"X-Late", "prefixed")
		}
	})
}

// maxTestBody bounds the body diffHandler writes for n=N: a fuzzed N of
// billions ran the fuzzer out of memory.
const maxTestBody = 1 << 20

// noCTL drops the control characters but line breaks and tabs from v:
// both servers write a field value as it is but for line breaks, and a
// NUL in it would make their responses unreadable to the comparison.
func noCTL(v string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' && r != '\r' && r != '\n' && r != '\t' || r == 0x7f {
			return -1
		}
		return r
	}, v)
}

// trackedConn notes when the server closes a connection.
type trackedConn struct {
	net.Conn
	once sync.Once
	done chan struct{}
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// SyscallConn keeps the descriptor, so the fast loop waits for idle
// connections' requests without a buffer (idle.go), as it does in the
// proxy; net/http does not use it.
func (c *trackedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// CloseWrite keeps the half-close both servers use before closing.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// connTracker finds the server side of a client's connection by the
// client's address.
type connTracker struct {
	mu    sync.Mutex
	conns map[string]*trackedConn
	all   []*trackedConn
}

func (t *connTracker) track(c net.Conn) *trackedConn {
	tc := &trackedConn{Conn: c, done: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conns == nil {
		t.conns = map[string]*trackedConn{}
	}
	t.conns[c.RemoteAddr().String()] = tc
	t.all = append(t.all, tc)
	return tc
}

// waitClosed waits until the server closed the connection from the
// client address remote (accepted or not yet).
func (t *connTracker) waitClosed(tb testing.TB, remote string) {
	tb.Helper()
	deadline := time.Now().Add(hangTimeout)
	for {
		t.mu.Lock()
		tc := t.conns[remote]
		t.mu.Unlock()
		if tc != nil {
			select {
			case <-tc.done:
				return
			case <-time.After(time.Until(deadline)):
				tb.Fatalf("server did not close the connection from %s", remote)
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("server never accepted the connection from %s", remote)
		}
		time.Sleep(time.Millisecond)
	}
}

// forgetClosed drops the closed connection from remote, if any, so that
// waitClosed waits for a new connection from the same address.
func (t *connTracker) forgetClosed(remote string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tc := t.conns[remote]; tc != nil {
		select {
		case <-tc.done:
			delete(t.conns, remote)
		default:
		}
	}
}

func (t *connTracker) closeAll() {
	t.mu.Lock()
	all := t.all
	t.mu.Unlock()
	for _, c := range all {
		c.Close()
	}
}

type trackingListener struct {
	net.Listener
	t *connTracker
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.t.track(c), nil
}

// target is one of the two servers under test.
type target struct {
	name  string
	addr  string
	log   *reqLog
	conns *connTracker
	fast  *Server // nil for std
	// dial, if set, connects a client (over TLS: tls_test.go); nil
	// dials addr over TCP.
	dial func() (net.Conn, error)

	mu       sync.Mutex
	handoffs map[string]int
}

func (tg *target) handoffCount(reason string) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.handoffs[reason]
}

// maxHeaderBytes is the MaxHeaderBytes of the test's http.Servers
// (net/http allows 4096 bytes more).
const maxHeaderBytes = 16 << 10

func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		MaxHeaderBytes:    maxHeaderBytes,
		ReadHeaderTimeout: hangTimeout,
		IdleTimeout:       hangTimeout,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startStd serves h with a plain http.Server.
func startStd(t testing.TB, mk func(*reqLog) http.Handler) *target {
	tg := &target{name: "std", log: &reqLog{}, conns: &connTracker{}}
	ln := listen(t)
	tg.addr = ln.Addr().String()
	srv := newHTTPServer(mk(tg.log))
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(trackingListener{ln, tg.conns})
	}()
	t.Cleanup(func() {
		srv.Close()
		tg.conns.closeAll()
		<-done
	})
	return tg
}

// startFast serves h with the fast loop (with o's settings) and an
// http.Server for its hand-offs.
func startFast(t testing.TB, mk func(*reqLog) http.Handler, o Options) *target {
	tg := &target{name: "fast", log: &reqLog{}, conns: &connTracker{}, handoffs: map[string]int{}}
	ln := listen(t)
	tg.addr = ln.Addr().String()
	h := mk(tg.log)
	hl := NewListener(ln.Addr())
	o.Handler = h
	o.HandOff = hl
	next := o.OnHandOff
	o.OnHandOff = func(reason string) {
		tg.mu.Lock()
		tg.handoffs[reason]++
		tg.mu.Unlock()
		if next != nil {
			next(reason)
		}
	}
	tg.fast = New(o)
	hsrv := newHTTPServer(h)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		hsrv.Serve(hl)
	}()
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				tg.fast.ServeConn(tg.conns.track(c))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		tg.fast.Shutdown()
		hsrv.Close()
		tg.conns.closeAll()
		wg.Wait()
	})
	return tg
}

// startPair starts std and fast with the same handler.
func startPair(t testing.TB, mk func(*reqLog) http.Handler) (std, fast *target) {
	// The test handler keeps nothing of a request: the fast loop may
	// recycle them.
	return startStd(t, mk), startFast(t, mk, Options{RecycleRequests: true})
}

// result is what a client got from one connection.
type result struct {
	raw    []byte
	closed bool // the server closed (or reset) the connection
	reset  bool
	local  string
	seen   []seen
}

// talk connects to tg, sends the parts of data (one write each),
// and reads until the server closes the connection or nothing arrives
// for idle. With o.seq, part i+1 is sent only once the handler saw i+1
// requests (a keep-alive sequence rather than pipelining); with
// o.halfClose, the client shuts its side down after the last part. It
// then closes the connection and waits for the server to be done with it.
func talk(t testing.TB, tg *target, idle time.Duration, o talkOpts, parts ...[]byte) result {
	t.Helper()
	dial := tg.dial
	if dial == nil {
		dial = func() (net.Conn, error) { return net.DialTimeout("tcp", tg.addr, hangTimeout) }
	}
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	r := result{local: c.LocalAddr().String()}
	// An earlier connection from the same port is over (talk waited for
	// it), and this one has not sent anything yet.
	tg.log.reset(r.local)
	tg.conns.forgetClosed(r.local)
	wrote := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(wrote)
		for i, p := range parts {
			for o.seq && i > 0 && len(tg.log.get(r.local)) < i {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
			if _, err := c.Write(p); err != nil {
				return
			}
		}
		if o.halfClose {
			c.(interface{ CloseWrite() error }).CloseWrite()
		}
	}()
	r.raw, r.closed, r.reset = readAll(c, idle)
	close(stop)
	c.Close()
	<-wrote
	tg.conns.waitClosed(t, r.local)
	r.seen = tg.log.get(r.local)
	return r
}

// talkOpts are the ways of sending.
type talkOpts struct{ seq, halfClose bool }

// readAll reads c until it closes or is silent for idle (or hangTimeout
// passed).
func readAll(c net.Conn, idle time.Duration) (raw []byte, closed, reset bool) {
	var buf bytes.Buffer
	p := make([]byte, 32<<10)
	end := time.Now().Add(hangTimeout)
	for time.Now().Before(end) {
		d := time.Now().Add(idle)
		if d.After(end) {
			d = end
		}
		c.SetReadDeadline(d)
		n, err := c.Read(p)
		buf.Write(p[:n])
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return buf.Bytes(), false, false
			}
			return buf.Bytes(), true, !errors.Is(err, io.EOF)
		}
	}
	return buf.Bytes(), false, false
}

// parsedResp is one response of a connection, as compared.
type parsedResp struct {
	Status, Proto    string
	Header           http.Header
	TransferEncoding []string
	Body, BodyErr    string
	Trailer          http.Header
	Close            bool // "Connection: close" (ReadResponse takes it out of Header)
	// Connection is the Connection fields as sent.
	Connection []string
}

func (p parsedResp) String() string {
	return fmt.Sprintf("%s %s hdr=%v te=%v body=%q err=%q trailer=%v close=%v connection=%q",
		p.Proto, p.Status, p.Header, p.TransferEncoding, p.Body, p.BodyErr, p.Trailer, p.Close, p.Connection)
}

// parseResponses splits raw into responses. methods are the methods of
// the requests the handler saw, in order (for the framing of HEAD); a
// response beyond them is taken as one to a GET (a 400, 431 and the
// like). rest is what did not parse.
func parseResponses(raw []byte, methods []string) (rs []parsedResp, rest string) {
	rd := bytes.NewReader(raw)
	br := bufio.NewReader(rd)
	for i := 0; ; {
		if _, err := br.Peek(1); err != nil {
			return rs, ""
		}
		pos := len(raw) - rd.Len() - br.Buffered()
		head, _, _ := bytes.Cut(raw[pos:], []byte("\r\n\r\n"))
		var conn []string
		for l := range bytes.Lines(head) {
			if k, v, ok := bytes.Cut(l, []byte(":")); ok && strings.EqualFold(string(k), "Connection") {
				conn = append(conn, strings.TrimSpace(string(v)))
			}
		}
		m := http.MethodGet
		if i < len(methods) {
			m = methods[i]
		}
		res, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			b, _ := io.ReadAll(br)
			return rs, fmt.Sprintf("error %v before %q", err, b)
		}
		body, err := io.ReadAll(res.Body)
		p := parsedResp{
			Status: res.Status, Proto: res.Proto, Header: res.Header,
			TransferEncoding: res.TransferEncoding, Body: string(body), Trailer: res.Trailer,
			Close: res.Close, Connection: conn,
		}
		if err != nil {
			p.BodyErr = err.Error()
		}
		p.Header.Del("Date")
		if v := p.Header["Content-Length"]; len(v) == 1 {
			if n, err := strconv.ParseInt(v[0], 10, 64); err == nil {
				v[0] = strconv.FormatInt(n, 10)
			}
		}
		rs = append(rs, p)
		if res.StatusCode >= 200 || res.StatusCode == http.StatusSwitchingProtocols {
			i++
		}
	}
}

// compareResults reports how the fast loop's result differs from
// net/http's, after the intentional differences are taken out:
//
//   - Content-Type sniffing: net/http sets a Content-Type the handler did
//     not set from the first bytes of the body; the fast loop does not.
//     (The handler sets one only when asked to; a test asks and checks it
//     arrives.)
//   - Date values differ in time, and are not compared.
//   - A handler's Content-Length goes out as the number it is ("15");
//     net/http sends the field as the handler wrote it ("0015", "+15",
//     which a client rejects). Values compare as numbers.
func compareResults(std, fast result) []string {
	var diffs []string
	if !slices.EqualFunc(std.seen, fast.seen, func(a, b seen) bool { return a.String() == b.String() }) {
		diffs = append(diffs, fmt.Sprintf("handler saw:\n  std:  %v\n  fast: %v", std.seen, fast.seen))
	}
	var methods []string
	for _, s := range std.seen {
		methods = append(methods, s.Method)
	}
	srs, srest := parseResponses(std.raw, methods)
	frs, frest := parseResponses(fast.raw, methods)
	for i := range min(len(srs), len(frs)) {
		if _, ok := frs[i].Header["Content-Type"]; !ok {
			delete(srs[i].Header, "Content-Type")
		}
	}
	if !slices.EqualFunc(srs, frs, func(a, b parsedResp) bool { return a.String() == b.String() }) || srest != frest {
		diffs = append(diffs, fmt.Sprintf("responses:\n  std:  %v %s\n  fast: %v %s", srs, srest, frs, frest))
	}
	if std.closed != fast.closed {
		diffs = append(diffs, fmt.Sprintf("closed: std %v, fast %v", std.closed, fast.closed))
	}
	return diffs
}

// crlf turns "\n" into "\r\n", so that cases can be written as text.
func crlf(s string) []byte { return []byte(strings.ReplaceAll(s, "\n", "\r\n")) }
