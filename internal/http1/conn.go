package http1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"
)

// maxDiscard is how much of a request body the handler left unread is
// read and dropped to keep the connection; net/http's limit.
const maxDiscard = 256 << 10

// conn is one client connection served by the loop.
type conn struct {
	s      *Server
	nc     net.Conn
	cr     connReader
	br     *bufio.Reader
	remote string
	ctx    context.Context // values for every request
	tls    *tlsState       // Request.TLS of every request; nil on plain TCP

	// idle is set while the loop waits for the first bytes of a request;
	// fresh until the first request's header is read.
	idle, fresh atomic.Bool
	accepted    time.Time
	// deadline is the read deadline in effect, as far as the loop knows;
	// zero for none.
	deadline time.Time
	// lastPOST: the previous request was a POST (CRLF after its body is
	// skipped, as net/http does).
	lastPOST bool
	// linger: the connection closes with a request body left unread.
	linger bool
	// header is the last response's header map, emptied, for the next
	// response: a handler may not use its ResponseWriter, the header
	// included, once it returned.
	header http.Header

	// The background read that watches for the client going away while a
	// handler waits (started on demand by the request context).
	bgMu    sync.Mutex
	bgDone  chan struct{} // closed when the background read ended; nil if none
	bgErr   error         // the read failed: the client is gone
	bgAbort atomic.Bool   // the loop stopped the read itself

	// The idle wait without a buffer (idle.go); raw is nil when the
	// connection does not give its descriptor.
	raw     syscall.RawConn
	tryRead func(fd uintptr) bool
	idleErr error
	parkState
}

// connReader is the reader below the bufio.Reader: it hands out the byte
// the background read found first.
type connReader struct {
	nc      net.Conn
	pending byte
	has     bool
	// direct: recv(2) on fd (in the idle wait's callback, idle.go);
	// notSock: fd is not a socket, read(2) it.
	direct, notSock bool
	fd              int
}

func (r *connReader) Read(p []byte) (int, error) {
	if r.direct {
		return r.readDirect(p)
	}
	if r.has && len(p) > 0 {
		p[0] = r.pending
		r.has = false
		return 1, nil
	}
	return r.nc.Read(p)
}

// ServeConn serves nc until it closes, or hands it to Options.HandOff. It
// returns when the connection is closed or handed off.
func (s *Server) ServeConn(nc net.Conn) {
	c := &conn{s: s, nc: nc, remote: nc.RemoteAddr().String()}
	c.cr.nc = nc
	c.tls = connTLS(nc)
	// As net/http's, with the address the connection came to.
	c.ctx = context.WithValue(context.Background(), http.LocalAddrContextKey, nc.LocalAddr())
	if s.o.ConnContext != nil {
		c.ctx = s.o.ConnContext(c.ctx, nc)
	}
	c.br = s.brs.Get().(*bufio.Reader)
	c.br.Reset(&c.cr)
	c.accepted = time.Now()
	c.fresh.Store(true)
	c.initIdleWait()
	s.track(c, true)
	c.loop(true)
}

// loop serves c's requests until it closes, is handed off, or is parked
// (park.go: the goroutine ends, and the poller starts a new loop when the
// client sends again). first: c has not sent a request yet.
func (c *conn) loop(first bool) {
	s, nc := c.s, c.nc
	handedOff, parked := false, false
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("http1: panic serving connection", "remote", c.remote, "panic", v, "stack", string(debug.Stack()))
		}
		if parked {
			return // c is the poller's now
		}
		s.track(c, false)
		if !handedOff {
			nc.Close()
		}
		c.br.Reset(nil)
		s.brs.Put(c.br)
	}()

	for ; ; first = false {
		x, reason, err := c.readRequest(first)
		if err == errParked {
			parked = true
			return
		}
		if reason != "" {
			handedOff = c.handOff(reason)
			return
		}
		if err != nil {
			var re *requestError
			if errors.As(err, &re) {
				c.badRequest(re)
			}
			return
		}
		if !c.serve(x) {
			if c.linger {
				c.lingerClose()
			}
			return
		}
		c.recycle(x)
	}
}

// requestError is a request the loop answers with 400 and a close, as
// net/http's server does. text, if set, is net/http's explanation (of its
// own checks after parsing), which goes into the status line and body.
type requestError struct {
	text string
	err  error // the parse error, if any
}

func (e *requestError) Error() string {
	if e.text != "" {
		return "bad request: " + e.text
	}
	return "bad request: " + e.err.Error()
}

func (e *requestError) Unwrap() error { return e.err }

// errShutdown ends the loop of an idle connection at shutdown.
var errShutdown = errors.New("server shutting down")

// setDeadline sets the read deadline to timeout from now unless the one
// in effect is within an eighth of the timeout (at most a second) of it:
// a timeout need not be exact, and most requests then cost no timer
// update. The deadline in effect is never more than that slack early, so
// never in the past.
func (c *conn) setDeadline(now time.Time, timeout time.Duration) {
	t := now.Add(timeout)
	slack := min(time.Second, timeout/8)
	if d := t.Sub(c.deadline); !c.deadline.IsZero() && d < slack && d > -slack {
		return
	}
	c.deadline = t
	c.nc.SetReadDeadline(t)
}

// now is the time for c's deadlines: the time of the accept moved on by
// the monotonic clock. That is one clock read where time.Now makes two
// (wall and monotonic), and deadlines go by the monotonic clock anyway.
func (c *conn) now() time.Time { return c.accepted.Add(time.Since(c.accepted)) }

// readRequest waits for the next request and reads its header into a new
// exchange. A non-empty reason means the connection goes to net/http,
// with nothing of the request consumed.
func (c *conn) readRequest(first bool) (*exchange, string, error) {
	o := &c.s.o
	// As net/http: the first request has ReadHeaderTimeout from the
	// accept; a later one has IdleTimeout for its first 4 bytes, and a
	// connection that ends before them closes without an answer.
	want := 4
	if first {
		want = 1
		c.setDeadline(time.Now(), o.ReadHeaderTimeout)
	} else if c.br.Buffered() < want {
		c.setDeadline(c.now(), o.IdleTimeout)
	}
	c.idle.Store(true)
	if c.s.shutdown.Load() {
		if !first {
			return nil, "", errShutdown
		}
		// As net/http: a connection that has not sent its first request
		// yet may have one on the way; it gets 5 s from its
		// accept to send it, and its response then closes it.
		c.nc.SetReadDeadline(c.accepted.Add(c.s.o.freshGrace))
	}
	if !first && c.br.Buffered() == 0 {
		// The response just went out, so the client's next request
		// cannot be here yet: reading now would find nothing and cost a
		// read that fails. Under load, letting the other connections run
		// first gives it time to arrive (about one failed read fewer per
		// request: 5.2 → 4.3 system calls per proxied request).
		runtime.Gosched()
	}
	var err error
	if c.raw != nil && c.br.Buffered() == 0 && !c.cr.has {
		if err = c.waitIdle(first); err == errParked {
			return nil, "", err // c is the poller's now: touch nothing
		}
	}
	if err == nil {
		_, err = c.br.Peek(want)
	}
	c.idle.Store(false)
	c.fresh.Store(false)
	if err != nil {
		kind := TimeoutKeepAlive
		if first {
			kind = TimeoutReadHeader
		}
		return nil, "", c.s.timedOut(err, kind)
	}
	if c.lastPOST {
		b, _ := c.br.Peek(4)
		c.br.Discard(leadingCRLF(b))
	}
	headerDeadline := first
	var head []byte
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		n, reason := scanHead(buf)
		if reason != "" {
			return nil, reason, nil
		}
		if n > 0 {
			head = buf[:n]
			break
		}
		if len(buf) == c.br.Size() {
			return nil, reasonHeaderSize, nil
		}
		if !headerDeadline {
			// The header is arriving in pieces: it has ReadHeaderTimeout
			// from now, not the idle timeout.
			headerDeadline = true
			c.setDeadline(c.now(), o.ReadHeaderTimeout)
		}
		if _, err := c.br.Peek(len(buf) + 1); err != nil {
			if err == io.EOF && len(buf) > 0 {
				// The client ended its side within a header: net/http
				// parses what came, fails, and answers 400.
				return nil, "", &requestError{err: io.ErrUnexpectedEOF}
			}
			// A timeout or a reset: close without an answer, as net/http does.
			return nil, "", c.s.timedOut(err, TimeoutReadHeader)
		}
	}

	x := c.newExchange()
	req := &x.req
	if parseHead(head, x, c.br) {
		c.br.Discard(len(head))
	} else if err := c.readStdRequest(x, head); err != nil {
		return nil, "", err
	}
	req.RemoteAddr = c.remote
	req.TLS = c.tls
	c.lastPOST = req.Method == http.MethodPost
	return x, "", nil
}

// readStdRequest reads the request with http.ReadRequest into x, and
// checks it as net/http's server does: the requests parseHead does not
// take.
func (c *conn) readStdRequest(x *exchange, head []byte) error {
	req, err := http.ReadRequest(c.br)
	if err != nil {
		return &requestError{err: err}
	}
	if err := checkRequest(req, head); err != nil {
		if err.err == errUnsupported {
			c.s.log.Warn("http1: request passed the scan but needs net/http; answered 400", "remote", c.remote)
		}
		return err
	}
	x.req = *req.WithContext(&x.ctx)
	return nil
}

// errUnsupported: a request that passed the scan needs net/http after all.
var errUnsupported = errors.New("unsupported request")

// checkRequest makes the checks of net/http's server after ReadRequest
// on req, read from head.
func checkRequest(req *http.Request, head []byte) *requestError {
	// The scan made sure of the version and the fields it hands off;
	// check again.
	if req.ProtoMajor != 1 || req.ProtoMinor != 1 || req.Header["Upgrade"] != nil ||
		req.Header["Expect"] != nil || req.Header["Transfer-Encoding"] != nil {
		return &requestError{err: errUnsupported}
	}
	// http.ReadRequest took the Host field out of the header (and
	// rejected a second one); an empty Host is allowed, a missing one not.
	// The target is a path (scanHead), so req.Host is the field's value.
	// head is still intact: the header was buffered whole, so parsing it
	// read nothing more into the buffer.
	if req.Host == "" && req.Method != http.MethodConnect && !hasField(head, "Host") {
		return &requestError{text: "missing required Host header"}
	}
	if !httpguts.ValidHostHeader(req.Host) {
		return &requestError{text: "malformed Host header"}
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return &requestError{text: "invalid header name"}
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return &requestError{text: "invalid header value"}
			}
		}
	}
	return nil
}

// handOff gives the connection, with what is buffered, to net/http, and
// reports whether it went.
func (c *conn) handOff(reason string) bool {
	// readRequest peeked first, so a byte of the background read is in
	// br by now.
	var buf []byte
	if n := c.br.Buffered(); n > 0 {
		b, _ := c.br.Peek(n)
		buf = append(buf, b...)
	}
	if c.s.o.OnHandOff != nil {
		c.s.o.OnHandOff(reason)
	}
	// Deadlines are net/http's from now on.
	c.nc.SetReadDeadline(time.Time{})
	return c.s.o.HandOff.handOff(replay(c.nc, buf, c.s.o.OnHeaderTooLarge))
}

// badRequest answers a request the loop could not take, byte for byte as
// net/http does, before the connection closes.
func (c *conn) badRequest(err *requestError) {
	c.s.log.Debug("http1: bad request", "remote", c.remote, "error", err)
	msg := "400 Bad Request"
	if err.text != "" {
		msg += ": " + err.text
	}
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	io.WriteString(c.nc, "HTTP/1.1 "+msg+"\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"+msg)
}

// serve runs the handler for x's request and finishes its response. It
// reports whether the connection may carry another request.
func (c *conn) serve(x *exchange) (keep bool) {
	req := &x.req
	x.ctx.x = x
	x.ctx.parent = c.ctx
	x.body.x = x
	w := &x.w
	w.x = x
	w.req = req
	w.head = req.Method == http.MethodHead
	w.cl = -1
	w.header, c.header = c.header, nil
	w.closeAfter = req.Close || c.s.shutdown.Load() || hasToken(get(req.Header["Connection"]), "close")
	if req.Body != http.NoBody && req.Body != nil {
		x.body.rc = req.Body
		x.body.size = req.ContentLength
		req.Body = &x.body
		// A body may take any time to arrive, as long as it keeps
		// moving: each read has BodyIdleTimeout (reqBody.read).
		c.deadline = time.Time{}
		c.nc.SetReadDeadline(time.Time{})
	} else {
		x.body.eof = true
	}

	ok := c.runHandler(w, req)
	// As net/http: the request's context is done once the handler has
	// returned, before the end of the response goes out.
	x.ctx.finish()
	if !ok {
		w.abort()
		c.stopBackgroundRead(x)
		return false
	}
	w.finish()
	c.stopBackgroundRead(x)
	if len(w.header) <= maxReusedFields {
		clear(w.header)
		c.header = w.header
	}
	if req.MultipartForm != nil {
		req.MultipartForm.RemoveAll()
	}
	x.body.readMu.Lock()
	eof, early := x.body.eof, x.body.earlyClose
	x.body.readMu.Unlock()
	c.linger = w.tooBig || early
	return w.err == nil && !w.closeAfter && c.bgErr == nil && eof && !early
}

// maxReusedFields is the most fields a response header map may have held
// to be kept for the connection's next response (a map keeps the room it
// grew to).
const maxReusedFields = 16

// lingerRead is how long a connection closing with a request body left
// unread goes on reading after it shut its write side (net/http waits
// as long).
const lingerRead = 500 * time.Millisecond

// lingerClose shuts the write side of the connection and reads what the
// client still sends, until it closes its side or for lingerRead, before
// the connection closes: closing with unread data would reset it, and a
// reset can destroy the response before the client read it (net/http's
// closeWriteAndWait).
func (c *conn) lingerClose() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.nc.SetReadDeadline(time.Now().Add(lingerRead))
	io.Copy(io.Discard, c.nc)
}

// runHandler calls the handler, and reports false if it panicked.
func (c *conn) runHandler(w *response, req *http.Request) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			ok = false
			if v != http.ErrAbortHandler {
				c.s.log.Error("http1: panic serving request", "remote", c.remote, "method", req.Method,
					"path", req.URL.Path, "panic", v, "stack", string(debug.Stack()))
			}
		}
	}()
	c.s.o.Handler.ServeHTTP(w, req)
	return true
}

// startBackgroundRead watches the connection for the client going away
// while the handler of x runs; the request context is canceled if it
// does. It needs the request body read to its end (the body shares the
// connection) and nothing buffered (a pipelined request shows the client
// is there, and may hide its close).
func (c *conn) startBackgroundRead(x *exchange, cancel context.CancelFunc) {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if x.stopped || c.bgDone != nil || c.br.Buffered() > 0 || c.cr.has {
		return
	}
	c.bgErr = nil
	c.bgAbort.Store(false)
	c.nc.SetReadDeadline(time.Time{})
	done := make(chan struct{})
	c.bgDone = done
	go func() {
		defer close(done)
		var b [1]byte
		n, err := c.nc.Read(b[:])
		if n == 1 {
			c.cr.pending, c.cr.has = b[0], true
			return
		}
		if c.bgAbort.Load() && IsTimeout(err) {
			return
		}
		if err == nil {
			err = io.EOF
		}
		c.bgErr = err
		cancel()
	}()
}

// stopBackgroundRead ends x's background read, if one runs.
func (c *conn) stopBackgroundRead(x *exchange) {
	c.bgMu.Lock()
	x.stopped = true // no background read starts after this
	done := c.bgDone
	c.bgMu.Unlock()
	if done == nil {
		return
	}
	c.bgAbort.Store(true)
	c.nc.SetReadDeadline(aLongTimeAgo)
	<-done
	c.bgMu.Lock()
	c.bgDone = nil
	c.bgMu.Unlock()
	// The next wait sets a deadline again.
	c.deadline = aLongTimeAgo
}

// exchange is the state of one request on a connection, allocated once.
type exchange struct {
	c    *conn
	w    response
	ctx  reqContext
	body reqBody
	// stopped: the handler returned and the loop owns the connection's
	// reads again (guarded by c.bgMu).
	stopped bool

	// The request with its context, and what parseHead fills in for it:
	// the URL, room for field values, the body.
	req  http.Request
	url  url.URL
	vals [maxInlineFields]string
	lim  limitedBody
	// hdr is the empty header map of a recycled exchange (exchange.go).
	hdr http.Header
}

// reqBody is the request body handed to the handler. It notes its end,
// which allows the background read, and what is read of it, to settle
// the rest before the response as net/http does.
type reqBody struct {
	x  *exchange
	rc io.ReadCloser
	// readMu serializes reads of rc: the handler's, and the loop's when
	// it settles the body. It guards n, closed and earlyClose, and eof
	// against writes.
	readMu sync.Mutex
	size   int64 // the request's Content-Length
	n      int64 // bytes read
	// closed: the handler closed the body; earlyClose: with too much of
	// it left to read.
	closed, earlyClose bool
	// err: the body timed out (BodyIdleTimeout); every later read fails
	// with it.
	err error
	mu  sync.Mutex // guards eof and watch for the request context
	eof bool
	// watch: the request context wants the background read once the body
	// is read.
	watch context.CancelFunc
}

func (b *reqBody) Read(p []byte) (int, error) {
	b.readMu.Lock()
	defer b.readMu.Unlock()
	return b.read(p)
}

// read is Read with readMu held.
func (b *reqBody) read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.eof {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	c := b.x.c
	if t := c.s.o.BodyIdleTimeout; t > 0 {
		c.setDeadline(c.now(), t)
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if err != nil && IsTimeout(err) {
		// The client sent nothing for BodyIdleTimeout: the body is over
		// for good (a later read would wait again), and the connection
		// closes after the response (its body did not reach its end).
		b.err = c.s.timedOut(err, TimeoutBodyIdle)
	}
	// A body cut short by the client's EOF is over too (and reads as
	// io.EOF from then on, as net/http's).
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		b.mu.Lock()
		b.eof = true
		watch := b.watch
		b.mu.Unlock()
		if watch != nil {
			b.x.c.startBackgroundRead(b.x, watch)
		}
	}
	return n, err
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// Close reads what is left of the body, up to maxDiscard, as net/http's
// server does, so that the connection can carry another request; with
// more left, or a request that closes the connection, it reads nothing.
func (b *reqBody) Close() error {
	b.readMu.Lock()
	defer b.readMu.Unlock()
	if b.closed {
		return nil
	}
	var err error
	switch {
	case b.eof || b.x.w.req.Close:
	case b.size-b.n > maxDiscard:
		b.earlyClose = true
	default:
		var n int64
		n, err = io.CopyN(io.Discard, readerFunc(b.read), maxDiscard)
		if err == io.EOF {
			err = nil
		}
		if n == maxDiscard {
			b.earlyClose = true
		}
	}
	b.closed = true
	return err
}

// settle deals with what the handler left of the body before the
// response header goes out, as net/http does: up to maxDiscard is read
// and dropped to keep the connection; with more (tooBig), the connection
// closes after the response, as after a body the handler closed early.
func (b *reqBody) settle() (closeConn, tooBig bool) {
	if b.rc == nil {
		return false, false
	}
	b.readMu.Lock()
	defer b.readMu.Unlock()
	switch {
	case b.closed:
		return !b.eof, false
	case b.size-b.n >= maxDiscard:
		// As net/http, on what the length still promises, even after an
		// early EOF.
		return true, true
	case b.eof:
		return false, false
	}
	_, err := io.CopyN(io.Discard, readerFunc(b.read), maxDiscard+1)
	switch err {
	case nil:
		return true, true
	case io.EOF:
		return false, false
	}
	return true, false // a read failed: what follows on the wire is no request
}

// hasToken reports whether token (lower case) is in v, ASCII
// case-insensitively, between spaces or commas: net/http's test of a
// request's Connection field when it decides to close after the
// response, looser than the one that set the request's Close.
func hasToken(v, token string) bool {
	for sp := 0; sp+len(token) <= len(v); sp++ {
		if sp > 0 && !isTokenBoundary(v[sp-1]) {
			continue
		}
		if end := sp + len(token); end != len(v) && !isTokenBoundary(v[end]) {
			continue
		}
		if asciiEqualFold(v[sp:sp+len(token)], token) {
			return true
		}
	}
	return false
}

func isTokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }
