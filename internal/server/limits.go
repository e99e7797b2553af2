package server

// Client timeouts that net/http has no idle form of, on every traffic
// connection whatever serves it (the fast HTTP/1.1 loop, net/http's
// HTTP/1.1 and HTTP/2, upgraded tunnels):
//
//   - the write idle timeout lives in trackedConn, below TLS: every write
//     to the client moves the connection's write deadline forward, so a
//     client that takes no byte for WriteIdleTimeout is cut, and one that
//     reads slowly but reads is not;
//   - the body idle timeout of requests net/http serves is idleBody, a
//     request body that moves the read deadline forward before each read
//     (http.ResponseController). The fast loop keeps its own
//     (http1.Options.BodyIdleTimeout).
//
// Deadlines are moved lazily: only when the new one is off the one in
// effect by an eighth of the timeout (at most a second), so a busy
// connection updates its timer about once a second, not once a write.

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"sluice.dev/sluice/internal/http1"
)

// Values of the "timeout" label of sluice_client_timeouts_total.
const (
	timeoutReadHeader = "read_header"
	timeoutBodyIdle   = "body_idle"
	timeoutWriteIdle  = "write_idle"
	timeoutKeepAlive  = "keepalive_idle"
)

// noDeadline is trackedConn.wdl when no write deadline is set.
const noDeadline = math.MinInt64

// writeChunk is the most written under one write deadline: a larger
// write is cut in pieces, each with a fresh deadline, so the timeout is
// about progress, not about the size of a write.
const writeChunk = 64 << 10

// slack is how far a deadline may lag behind the one it would be set to
// now before it is moved: an eighth of the timeout, at most a second.
func slack(timeout time.Duration) time.Duration { return min(time.Second, timeout/8) }

// Write writes p, moving the write deadline forward before each piece of
// at most writeChunk when the write idle timeout is on.
func (c *trackedConn) Write(p []byte) (int, error) {
	if c.t != nil && c.t.count431 && http1.IsHeaderTooLarge(p) {
		c.t.m.headerTooLarge.Inc()
	}
	if c.t == nil || c.t.writeIdle <= 0 {
		return c.write(p)
	}
	var n int
	for {
		chunk := p[:min(len(p), writeChunk)]
		c.moveWriteDeadline()
		k, err := c.write(chunk)
		n += k
		p = p[k:]
		if err != nil {
			c.writeFailed(err)
			return n, err
		}
		if len(p) == 0 {
			return n, nil
		}
	}
}

// moveWriteDeadline sets the write deadline to the idle timeout from now,
// unless the one in effect is within slack of it.
func (c *trackedConn) moveWriteDeadline() {
	t := c.t
	if c.wdlAbove.Load() {
		return // the deadline set from above stands until cleared
	}
	now := int64(time.Since(t.epoch))
	want := now + int64(t.writeIdle)
	if cur := c.wdl.Load(); cur != noDeadline && want-cur < int64(slack(t.writeIdle)) {
		return
	}
	c.wdl.Store(want)
	c.Conn.SetWriteDeadline(t.epoch.Add(time.Duration(want)))
}

// writeFailed counts a write that timed out, once per connection.
func (c *trackedConn) writeFailed(err error) {
	if isTimeout(err) && c.writeTimedOut.CompareAndSwap(false, true) {
		c.t.m.timeouts.WithLabelValues(timeoutWriteIdle).Inc()
	}
}

// SetWriteDeadline and SetDeadline note a deadline set from above (TLS
// handshake, the fast loop's 400 answer): it stands, and the idle timeout
// is not applied, until it is cleared.
func (c *trackedConn) SetWriteDeadline(d time.Time) error {
	c.noteWriteDeadline(d)
	return c.Conn.SetWriteDeadline(d)
}

func (c *trackedConn) SetDeadline(d time.Time) error {
	c.noteWriteDeadline(d)
	return c.Conn.SetDeadline(d)
}

func (c *trackedConn) noteWriteDeadline(d time.Time) {
	c.wdl.Store(noDeadline)
	c.wdlAbove.Store(!d.IsZero())
}

// copyBufs are the buffers of copyFrom.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyFrom is ReadFrom with the write idle timeout on: a copy through
// Write, without splice(2). A splice would wait for the source under the
// write deadline set before it, and a source slower than the timeout (an
// idle WebSocket, a slow upstream) would then fail a write to a client
// that reads fine.
func (c *trackedConn) copyFrom(r io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var n int64
	for {
		k, rerr := r.Read(buf)
		if k > 0 {
			w, werr := c.Write(buf[:k])
			n += int64(w)
			if werr != nil {
				return n, werr
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// netHTTPHandler wraps the handler of the requests net/http serves (every
// request but the fast loop's): it notes that a request was served (see
// countNetHTTPTimeout) and gives the request a body with the body idle
// timeout.
func (s *Server) netHTTPHandler(next http.Handler) http.Handler {
	timeout, writeTimeout := s.o.BodyIdleTimeout, s.o.WriteIdleTimeout
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct, _ := r.Context().Value(connTrafficKey{}).(*connTraffic)
		if ct != nil && ct.tc != nil {
			ct.tc.served.Store(true)
		}
		var ctl *http.ResponseController
		h2 := r.ProtoMajor == 2
		if timeout > 0 && r.Body != nil && r.Body != http.NoBody && !(h2 && isGRPC(r)) {
			ctl = http.NewResponseController(w)
			b := &idleBody{rc: r.Body, ctl: ctl, timeout: timeout, m: s.m, h2: h2}
			if ct != nil {
				b.tc = ct.tc
			}
			r.Body = b
		}
		if writeTimeout > 0 && h2 {
			// HTTP/2 flow control holds a write to a client that reads
			// nothing before the connection does: the stream's own
			// write deadline bounds it.
			if ctl == nil {
				ctl = http.NewResponseController(w)
			}
			w = &idleWriter{ResponseWriter: w, ctl: ctl, timeout: writeTimeout, m: s.m}
		}
		next.ServeHTTP(w, r)
	})
}

// Read notes whether the read timed out, for net/http's timeouts.
func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.read(p)
	if to := err != nil && isTimeout(err); to || c.readTimedOut.Load() {
		c.readTimedOut.Store(to) // most reads change nothing: no store
	}
	return n, err
}

// countNetHTTPTimeout counts the timeout, if any, that made net/http close
// tc (at its StateClosed): its last read timed out, and the connection
// was new (read_header: no first request in time, or a TLS handshake),
// idle (keepalive_idle), or active without a handler having run (a
// header that started but did not end in time: read_header). A request
// body that timed out was counted when it did. Connections the fast loop
// serves never get here: it counts its own.
func (s *Server) countNetHTTPTimeout(tc *trackedConn) {
	if !tc.readTimedOut.Load() || tc.bodyIdle.Load() || s.State() >= StateStopping {
		return
	}
	switch http.ConnState(tc.httpState.Load()) {
	case http.StateNew:
		s.m.timeouts.WithLabelValues(timeoutReadHeader).Inc()
	case http.StateIdle:
		s.m.timeouts.WithLabelValues(timeoutKeepAlive).Inc()
	case http.StateActive:
		if !tc.served.Load() {
			s.m.timeouts.WithLabelValues(timeoutReadHeader).Inc()
		}
	}
}

// idleBody is a request body that fails a read once the client sent no
// byte of it for timeout: before each read, the read deadline (of the
// HTTP/1.1 connection, or of the HTTP/2 stream) is moved forward.
//
// An HTTP/2 stream's deadline is a timer that fires whether or not a read
// waits: a handler that pauses its reads would see the body fail while
// flow control, not the client, held the bytes back. There the deadline
// is set for each read and cleared after it. gRPC streams are left
// alone: a client may be quiet on an open stream for as long as it
// likes (a watch, a subscription); the stream and connection limits
// bound them.
type idleBody struct {
	rc      io.ReadCloser
	ctl     *http.ResponseController
	timeout time.Duration
	m       *metrics
	tc      *trackedConn // the connection below, if known
	set     time.Time    // when the deadline was last moved
	off     bool         // the writer has no read deadline, or the body ended
	h2      bool         // an HTTP/2 stream: the deadline is set per read
	counted bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.h2 {
		return b.readStream(p)
	}
	if !b.off {
		if now := time.Now(); now.Sub(b.set) >= slack(b.timeout) {
			b.set = now
			if err := b.ctl.SetReadDeadline(now.Add(b.timeout)); err != nil {
				b.off = true
			}
		}
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF && !b.off:
		// net/http's HTTP/1.1 connection now reads in the background
		// to see the client go away: with a deadline, it would take
		// its expiry for the client leaving and cancel the request.
		b.off = true
		b.ctl.SetReadDeadline(time.Time{})
	case err != nil && !b.counted && isTimeout(err):
		b.counted = true
		b.m.timeouts.WithLabelValues(timeoutBodyIdle).Inc()
		if b.tc != nil {
			b.tc.bodyIdle.Store(true)
		}
	}
	return n, err
}

// readStream is Read on an HTTP/2 stream: the deadline covers this read
// only.
func (b *idleBody) readStream(p []byte) (int, error) {
	if b.off {
		return b.rc.Read(p)
	}
	if err := b.ctl.SetReadDeadline(time.Now().Add(b.timeout)); err != nil {
		b.off = true
		return b.rc.Read(p)
	}
	n, err := b.rc.Read(p)
	b.ctl.SetReadDeadline(time.Time{})
	if err != nil && !b.counted && isTimeout(err) {
		b.counted = true
		b.m.timeouts.WithLabelValues(timeoutBodyIdle).Inc()
	}
	return n, err
}

func (b *idleBody) Close() error { return b.rc.Close() }

// idleWriter is the ResponseWriter of an HTTP/2 request with the write
// idle timeout: each write and flush that may reach the stream runs under
// the stream's write deadline, set before it and cleared after it (the
// stream's deadline is a timer that fires whether or not a write waits,
// and a response may be quiet for long between writes: an event stream, a
// gRPC stream). Setting it is a round trip to the connection's server
// loop and a timer, so a write the HTTP/2 response writer only buffers
// (it cannot wait for the client) goes without: most responses are one
// small write, sent when the handler returns.
type idleWriter struct {
	http.ResponseWriter
	ctl     *http.ResponseController
	timeout time.Duration
	m       *metrics
	off     bool // the writer has no write deadline
	counted bool
	// buffered is what the response writer holds since it last wrote to
	// the stream: the bytes written since the response began or since
	// the last flush that succeeded; -1 once a write may have reached the
	// stream (the writer then holds an unknown part).
	buffered int
}

// h2WriteBuffer is the buffer of golang.org/x/net/http2's response
// writer (handlerChunkWriteSize): a write that fits in what is left of
// it is only copied. TestHTTP2WriteBuffered fails if it shrinks.
const h2WriteBuffer = 4 << 10

func (w *idleWriter) Write(p []byte) (int, error) {
	if w.buffered >= 0 && w.buffered+len(p) <= h2WriteBuffer {
		n, err := w.ResponseWriter.Write(p)
		w.buffered += n
		return n, err
	}
	deadline := w.arm()
	n, err := w.ResponseWriter.Write(p)
	w.disarm(deadline, err)
	w.buffered = -1
	return n, err
}

// FlushError flushes under the write deadline (http.ResponseController
// finds it before the writer below).
func (w *idleWriter) FlushError() error {
	deadline := w.arm()
	err := w.ctl.Flush()
	w.disarm(deadline, err)
	if err == nil {
		w.buffered = 0
	} else {
		w.buffered = -1
	}
	return err
}

// Unwrap gives http.ResponseController the writer below.
func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// arm sets the write deadline and returns it; zero if there is none.
func (w *idleWriter) arm() time.Time {
	if w.off {
		return time.Time{}
	}
	d := time.Now().Add(w.timeout)
	if err := w.ctl.SetWriteDeadline(d); err != nil {
		w.off = true
		return time.Time{}
	}
	return d
}

// disarm clears the write deadline set for a write, and counts the write
// if it failed once the deadline had passed (the deadline reset the
// stream).
func (w *idleWriter) disarm(deadline time.Time, err error) {
	if deadline.IsZero() {
		return
	}
	if err != nil && !w.counted && !time.Now().Before(deadline) {
		w.counted = true
		w.m.timeouts.WithLabelValues(timeoutWriteIdle).Inc()
		return
	}
	w.ctl.SetWriteDeadline(time.Time{})
}

// isGRPC reports a gRPC request (as the proxy tells them).
func isGRPC(r *http.Request) bool {
	ct := r.Header["Content-Type"]
	return len(ct) > 0 && strings.HasPrefix(ct[0], "application/grpc")
}

// isTimeout reports a deadline that expired.
func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
