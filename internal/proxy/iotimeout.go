package proxy

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// Per-Ingress read and send timeouts (sluice.dev/proxy-read-timeout and
// proxy-send-timeout, nginx's proxy_read_timeout and proxy_send_timeout):
// bounds on the gap between two successive reads of an upstream's
// response, and between two successive writes of a request to it, not on
// the whole exchange. Both cost nothing when unset.
//
//   - Send: a pool of a backend with a send timeout wraps its connections
//     (both paths, HTTP/1.1 and HTTP/2) in sendConn, which sets a write
//     deadline before each write; a write that blocks longer (the upstream
//     stopped reading) fails with a timeout, and the request is answered
//     504 as any upstream timeout before the response.
//   - Read: the response body is wrapped in idleBody, which arms a timer
//     while a Read waits for the upstream; when it fires, abort closes the
//     upstream connection (synchronous path) or cancels the attempt's
//     context (Transport path), and the client's response is aborted (its
//     header is already sent). The wait for the response header is the
//     response timeout's.

// sendConn sets a write deadline of d before each write.
type sendConn struct {
	net.Conn
	d time.Duration
}

func (c *sendConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.d)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// withSend wraps c when d is set.
func withSend(c net.Conn, d time.Duration) net.Conn {
	if d <= 0 {
		return c
	}
	return &sendConn{Conn: c, d: d}
}

// idleBody is a response body whose reads may wait for the upstream at
// most d each; abort ends the exchange when one waits longer.
type idleBody struct {
	rc    io.ReadCloser
	d     time.Duration
	abort func()
	// done runs once when the body is closed (the Transport path's
	// context cancel); nil for none.
	done func()

	mu    sync.Mutex
	t     *time.Timer
	fired bool
}

func newIdleBody(rc io.ReadCloser, d time.Duration, abort, done func()) *idleBody {
	return &idleBody{rc: rc, d: d, abort: abort, done: done}
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.t == nil {
		b.t = time.AfterFunc(b.d, b.expire)
	} else {
		b.t.Reset(b.d)
	}
	b.mu.Unlock()
	n, err := b.rc.Read(p)
	b.t.Stop()
	return n, err
}

func (b *idleBody) expire() {
	b.mu.Lock()
	b.fired = true
	b.mu.Unlock()
	b.abort()
}

// expired reports whether a read timed out.
func (b *idleBody) expired() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fired
}

func (b *idleBody) Close() error {
	if b.t != nil {
		b.t.Stop()
	}
	err := b.rc.Close()
	if b.done != nil {
		b.done()
	}
	return err
}

// attemptContext returns the context of one Transport-path attempt: with
// a read timeout, one that idleBody can cancel; else ctx itself and a
// no-op.
func attemptContext(ctx context.Context, read time.Duration) (context.Context, context.CancelFunc) {
	if read <= 0 {
		return ctx, func() {}
	}
	return context.WithCancel(ctx)
}
