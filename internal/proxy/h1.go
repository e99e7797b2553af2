package proxy

// The synchronous HTTP/1.1 upstream path. net/http.Transport runs two
// goroutines per connection (readLoop, writeLoop) and hands every request
// and response between them and the caller over channels: about one
// context switch and some forty allocations per request. Here the
// handler's own goroutine takes an idle connection from the endpoint's
// pool, writes the request, reads the response with net/http's own parser
// (http.ReadResponse) and, once the body has been copied to the client,
// returns the connection to the pool. Only plain requests take this path
// (see fastPath); upgrades, 100-continue and request trailers stay on the
// Transport. The bytes on the wire are internal/http1's (WriteRequest,
// ResponseReader), shared with the server loop; the pool, deadlines and
// retries are here.
//
// Unlike the Transport, the request body is written before the response is
// read: an upstream that answers early (a 413) is heard once the body is
// sent or the write fails, and one that neither reads the body nor answers
// holds the handler until it closes the connection.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"runtime"
	"syscall"
	"time"

	"sluice.dev/sluice/internal/http1"
)

var (
	errTooMany1xx      = errors.New("too many 1xx responses from upstream")
	errConnClosedByCtx = errors.New("request canceled")
)

// max1xx bounds the informational responses skipped before the final one.
const max1xx = 5

// fastPath reports whether r (its header already rewritten) can take the
// synchronous path.
func (p *Proxy) fastPath(r *http.Request, upgrade string) bool {
	return !p.opts.StdTransport && upgrade == "" && r.Trailer == nil && len(r.Header["Expect"]) == 0
}

// h1conn is one upstream connection of the synchronous path. Between
// requests it sits in its pool's idle list without buffers.
type h1conn struct {
	pl  *pool
	c   net.Conn
	raw syscall.RawConn // for the liveness peek; nil if unavailable
	// sock reads and writes c with recv(2) and send(2) when raw is set
	// (http1.SockIO).
	sock http1.SockIO
	lr   http1.HeaderLimitReader
	br   *bufio.Reader // while in use
	// stop unregisters the request context's close callback (nil if none);
	// it reports false if the callback already ran (the connection is
	// closed).
	stop func() bool
	// rdl is the read deadline in effect, zero for none: a request's
	// short deadline stays in effect when the next one's is within
	// shortSlack after it (exchange).
	rdl  time.Time
	body h1body
	// rr parses the common responses, reusing one Response from one
	// response to the next: a response lives only until finish.
	rr http1.ResponseReader
	// lazy is the request's context while the body is read under the
	// header's short deadline: the client is watched only if the body
	// stalls past it (bodyReader). Nil otherwise.
	lazy context.Context
	// length is the body's length if it is framed by Content-Length
	// (copyLength), 0 otherwise.
	length int64
	idleAt int64 // Unix nanoseconds, while idle
	sent   int64 // Unix nanoseconds, when the current request was sent
	reused bool  // served a request before the current one
}

// h1body is the response body handed to respond: it records whether the
// body was read to its end, and its Close does nothing, because closing a
// body of http.ReadResponse drains it; finish decides the connection's fate.
type h1body struct {
	hc  *h1conn
	rc  io.ReadCloser
	eof bool
}

func (b *h1body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *h1body) Close() error { return nil }

func (hc *h1conn) close() { hc.c.Close() }

// roundTrip sends r over an idle or new connection of pl and reads the
// response header. rb is r's body, nil if it has none. A request that
// fails on a reused connection before any byte of response arrived is sent
// again on a new connection where RFC 9110 (section 9.2.2) allows an
// automatic retry: an idempotent method or an Idempotency-Key, and a body
// that can be replayed. The upstream may have closed the idle connection
// just as it was taken, or may have read the request and gone away. A
// request that could not be sent again is not risked on a connection that
// may have been closed under it: it takes only one that was busy a moment
// ago (UnsafeReuseWindow) and passes a peek, or a new one (HAProxy's
// "http-reuse safe" in spirit). Such a request is sent again only when the
// upstream provably never saw it: it closed the reused connection (a clean
// end, no byte of response) before acknowledging any byte of the request,
// as a server does that closes its idle connections when it stops (RFC
// 9110 section 9.2.2 allows a retry where the client can "detect that the
// original request was never applied"). The caller must call finish with
// the returned connection.
func (p *Proxy) roundTrip(r *http.Request, pl *pool, rb *replayBody, m *backendMetrics, start time.Time) (*http.Response, *h1conn, error) {
	ctx := r.Context()
	again := retryable(r) && rb.replayable()
	// A body is not sent down a connection the upstream already closed,
	// nor is a request that could not be sent again.
	check := rb != nil || !again
	var since int64
	if !again {
		since = math.MaxInt64 // no idle connection will do
		if w := p.opts.UnsafeReuseWindow; w > 0 {
			since = start.UnixNano() - int64(w)
		}
	}
	fresh := false
	for {
		var hc *h1conn
		if !fresh {
			hc = pl.get(check, since)
		}
		if hc == nil {
			var err error
			if hc, err = pl.dial(ctx); err != nil {
				return nil, nil, err
			}
			m.dials.Inc()
		}
		// A request that may not be sent again keeps its short body on a
		// reused connection, and notes what the upstream had acknowledged.
		before := int64(-1)
		if hc.reused && !again && rb.keepUpTo(r.ContentLength) {
			before = hc.acked()
		}
		if testHookReused != nil && hc.reused {
			testHookReused(hc)
		}
		res, wrote, err := p.exchange(ctx, hc, r, rb, start)
		if err == nil {
			return res, hc, nil
		}
		// The upstream closed the connection before any byte of the
		// request reached it: its closing FIN acknowledged none. Only a
		// clean end proves it: the acknowledgement a reset carries is not
		// taken into account, so after a reset the upstream may have read
		// the request although none of it shows as acknowledged.
		unseen := before >= 0 && errors.Is(err, io.EOF) && hc.acked() == before
		if hc.stop != nil {
			hc.stop()
		}
		hc.close()
		p.putReader(hc)
		if hc.reused && hc.lr.N == 0 && !http1.IsTimeout(err) && ctx.Err() == nil &&
			!errors.Is(err, http1.ErrInvalidHeader) && !isBodyReadError(err) &&
			(!wrote || again || unseen) && rb.rewind() {
			m.retries[retryStale].Inc()
			fresh = true
			continue
		}
		return nil, nil, err
	}
}

// testHookReused, set by tests only, runs before a request is written on
// a reused connection.
var testHookReused func(hc *h1conn)

func isBodyReadError(err error) bool {
	var be *http1.BodyReadError
	return errors.As(err, &be)
}

// watchAfter is how long the synchronous path waits for the first byte
// of a response before it starts watching the client's context. Most
// responses come sooner, and skip the cost of a context callback (a few
// allocations and locks per request).
const watchAfter = 100 * time.Millisecond

// shortSlack is how much earlier than watchAfter from now a connection's
// short deadline may be and still stay for the next request: moving a
// deadline updates a runtime timer, and under load a connection serves
// many requests within the slack, so most requests move none. The client
// is then watched (and the response timeout set) up to shortSlack sooner.
const shortSlack = watchAfter / 8

// exchange writes r on hc and reads the response header. wrote reports
// whether the whole request was written.
// start is when the request arrived: without a body to send or a
// connection to open, it stands for the time the request was sent (one
// clock read less).
func (p *Proxy) exchange(ctx context.Context, hc *h1conn, r *http.Request, rb *replayBody, start time.Time) (res *http.Response, wrote bool, err error) {
	hc.stop = nil
	hc.br = p.brs.Get().(*bufio.Reader)
	hc.lr.R = (*bodyReader)(hc)
	hc.br.Reset(&hc.lr)
	hc.lr.N = 0
	hc.body = h1body{hc: hc}
	hc.lazy = nil
	hc.length = 0

	werr := p.writeRequest(hc, r, rb)
	if werr != nil {
		if _, ok := werr.(*http1.BodyReadError); ok || werr == http1.ErrInvalidHeader {
			return nil, false, werr
		}
		if hc.pl.send > 0 && http1.IsTimeout(werr) {
			// The send timeout: the upstream stopped reading; an
			// answer is not waited for (504).
			return nil, true, werr
		}
	}
	// After a write error the upstream may still have answered (a 413
	// before the whole body): read what it sent.
	fail := func(err error) (*http.Response, bool, error) {
		if werr != nil {
			err = werr
		}
		if ctx.Err() != nil {
			err = errConnClosedByCtx
		}
		return nil, werr == nil, err
	}
	now := start
	if rb != nil || !hc.reused { // after a body or a dial, start is too early
		now = time.Now()
	}
	hc.sent = now.UnixNano()
	var deadline time.Time
	if hc.pl.response > 0 {
		deadline = now.Add(hc.pl.response)
	}
	first := now.Add(watchAfter)
	if !deadline.IsZero() && deadline.Before(first) {
		first = deadline
	}
	// short: the deadline in effect is first, not the response timeout.
	short := !first.Equal(deadline)
	if d := first.Sub(hc.rdl); !short || hc.rdl.IsZero() || d < 0 || d >= shortSlack {
		hc.c.SetReadDeadline(first)
		hc.rdl = first
	}
	extend := func() {
		if short {
			short = false
			hc.watch(ctx)
			hc.c.SetReadDeadline(deadline)
			hc.rdl = deadline
		}
	}
	hc.lr.Left = p.opts.MaxResponseHeaderBytes
	// The upstream has just been sent the request: its answer is not
	// there yet. Let the goroutines of other requests run first, so that
	// the read below more often finds the answer instead of costing a
	// read that fails with EAGAIN, a park and a wake-up. With nothing
	// else to run, this returns at once.
	runtime.Gosched()
	_, err = hc.br.Peek(1)
	if err != nil && short && http1.IsTimeout(err) {
		extend()
		_, err = hc.br.Peek(1)
	}
	if err != nil {
		return fail(err)
	}
	if short && !http1.HeaderBuffered(hc.br) {
		extend() // the rest of the header may come later
	}
	for i := 0; ; i++ {
		var ok bool
		if res, ok = hc.rr.Parse(hc.br, r); !ok {
			res, err = http.ReadResponse(hc.br, r)
		}
		if err != nil {
			return fail(err)
		}
		if res.StatusCode >= 200 || res.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if i == max1xx {
			return nil, werr == nil, errTooMany1xx
		}
		extend() // the final response may come much later (103 Early Hints)
		hc.lr.Left = p.opts.MaxResponseHeaderBytes
	}
	hc.lr.Left = math.MaxInt64
	if werr != nil {
		res.Close = true // the request was not fully sent: no reuse
	}
	// A body already in the buffer is copied without reading from the
	// connection: the header deadline may stay, and the client need not be
	// watched. Otherwise the body may take any time (a stream); while the
	// header's short deadline is in effect, the change waits until the
	// body stalls past it (bodyReader): most bodies have come by then.
	if res.Body != http.NoBody && (res.ContentLength < 0 || int64(hc.br.Buffered()) < res.ContentLength) {
		if short {
			hc.lazy = ctx
		} else {
			hc.c.SetReadDeadline(time.Time{})
			hc.rdl = time.Time{}
			hc.watch(ctx)
		}
	}
	if res.Body != http.NoBody && res.ContentLength > 0 && len(res.TransferEncoding) == 0 {
		hc.length = res.ContentLength
	}
	hc.body.rc = res.Body
	res.Body = &hc.body
	return res, true, nil
}

// watch closes hc when ctx is done (the client went away), until finish.
func (hc *h1conn) watch(ctx context.Context) {
	if hc.stop == nil {
		c := hc.c
		hc.stop = context.AfterFunc(ctx, func() { c.Close() })
	}
}

// finish returns hc to its pool if the response was read to its end and
// allows another request, and closes it otherwise.
func (p *Proxy) finish(hc *h1conn, res *http.Response) {
	hc.lazy = nil // the request's context is not kept
	alive := hc.stop == nil || hc.stop()
	if alive && hc.body.eof && !res.Close && hc.br.Buffered() == 0 {
		// A response that came at once ended when it was sent, near
		// enough for the idle timeout; a slow one needs the clock.
		idleAt := hc.sent
		if hc.stop != nil {
			idleAt = time.Now().UnixNano()
		}
		p.putReader(hc)
		hc.body = h1body{}
		hc.pl.put(hc, idleAt)
		return
	}
	hc.close()
	p.putReader(hc)
}

func (p *Proxy) putReader(hc *h1conn) {
	if hc.br != nil {
		hc.br.Reset(nil)
		p.brs.Put(hc.br)
		hc.br = nil
	}
}

// writeRequest writes r and its body (rb, nil for none) to hc with a
// pooled bufio.Writer and copy buffer (http1.WriteRequest). The header was
// rewritten by rewriteRequestHeader.
func (p *Proxy) writeRequest(hc *h1conn, r *http.Request, rb *replayBody) error {
	bw := p.bws.Get().(*bufio.Writer)
	switch d := hc.pl.send; {
	case d > 0: // iotimeout.go
		bw.Reset(withSend(hc.c, d))
		defer hc.c.SetWriteDeadline(time.Time{})
	case hc.raw != nil:
		bw.Reset(&hc.sock)
	default:
		bw.Reset(hc.c)
	}
	defer func() {
		bw.Reset(nil)
		p.bws.Put(bw)
	}()
	var body io.Reader
	var buf []byte
	if rb != nil {
		body = rb
		bp := p.bufs.Get().(*[]byte)
		defer p.bufs.Put(bp)
		buf = *bp
	}
	return http1.WriteRequest(bw, r, hc.pl.addr, body, buf)
}
