package h2

import (
	"crypto/tls"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// maxPending is how many bytes a Conn accepts behind the write in
// progress: a Write beyond it waits until the flusher took them,
// so a client that reads nothing holds back the server as it did
// before (the server stops writing, its streams' flow control and write
// timeouts take over) instead of growing a buffer.
const maxPending = 64 << 10

// closeGrace is how long the bytes accepted before Close have to reach
// the client (net/http's HTTP/2 server waits as long for its GOAWAY).
const closeGrace = time.Second

// bufPool holds the batch buffers; an idle connection keeps none.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// Conn is the connection the HTTP/2 server writes to and reads from.
//
// Writes are batched: Write copies the bytes and returns; a flusher
// goroutine, started when the first bytes arrive and gone once they are
// written, first yields the processor so that every goroutine already
// runnable (the server's loop, handlers whose upstream answered) adds its
// frames, then writes everything in one Write below: with TLS, one
// record (up to 16 KiB) and one write(2) for the frames of many streams,
// where the server alone flushes once per frame burst. The first write
// error fails every later Write and closes the connection.
//
// Reads pass through a frame guard (guard.go) that ends a connection
// flooding the server with frames that make it work without being
// requests; the responses written give its budget back.
type Conn struct {
	net.Conn // below: *tls.Conn, or the TCP connection for h2c
	g        guard
	served   atomic.Uint64 // HEADERS and DATA frames written, for the guard

	mu      sync.Mutex
	drained sync.Cond // signalled when the flusher took pending
	pending *[]byte   // accepted, not yet written; nil when empty
	writing bool      // a flusher runs
	closing bool      // Close was called while the flusher ran
	err     error     // the first write error
	out     frameCounter
}

// NewConn wraps c; sawPreface says the client preface was read already
// (h2c handed over by net/http). Over TLS, the result reports c's
// ConnectionState, from which the server sets Request.TLS.
func NewConn(c net.Conn, sawPreface bool, limits Limits) net.Conn {
	bc := &Conn{Conn: c}
	bc.drained.L = &bc.mu
	bc.g.init(limits, !sawPreface, &bc.served)
	if tc, ok := c.(*tls.Conn); ok {
		return &tlsConn{Conn: bc, tc: tc}
	}
	return bc
}

// tlsConn is a Conn over TLS.
type tlsConn struct {
	*Conn
	tc *tls.Conn
}

// ConnectionState is the handshake's outcome.
func (c *tlsConn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

// Write queues p for the flusher; it returns at once unless maxPending
// bytes wait already.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	for c.err == nil && c.pending != nil && len(*c.pending) >= maxPending {
		c.drained.Wait()
	}
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	if c.pending == nil {
		c.pending = bufPool.Get().(*[]byte)
	}
	*c.pending = append(*c.pending, p...)
	if n := c.out.count(p); n > 0 {
		c.served.Add(n)
	}
	if !c.writing {
		c.writing = true
		go c.flush()
	}
	c.mu.Unlock()
	return len(p), nil
}

// flush writes the pending bytes until there are none, then ends.
func (c *Conn) flush() {
	// Let the goroutines that are ready add their frames first: this is
	// what makes one batch of many streams' responses.
	runtime.Gosched()
	c.mu.Lock()
	for c.err == nil && c.pending != nil {
		buf := c.pending
		c.pending = nil
		c.drained.Broadcast()
		c.mu.Unlock()
		_, err := c.Conn.Write(*buf)
		*buf = (*buf)[:0]
		if cap(*buf) <= 4*maxPending {
			bufPool.Put(buf)
		}
		c.mu.Lock()
		if err != nil {
			c.err = err
			c.closing = true
		}
	}
	if c.pending != nil {
		*c.pending = (*c.pending)[:0]
		bufPool.Put(c.pending)
		c.pending = nil
	}
	c.writing = false
	closing := c.closing
	if closing && c.err == nil {
		c.err = net.ErrClosed
	}
	c.drained.Broadcast()
	c.mu.Unlock()
	if closing {
		c.Conn.Close()
	}
}

// Room reports whether Writes of n bytes in all would return without
// waiting for the flusher: they wait only once maxPending bytes are
// pending.
func (c *Conn) Room(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	pending := 0
	if c.pending != nil {
		pending = len(*c.pending)
	}
	return c.err != nil || pending+n <= maxPending
}

// Close closes the connection once the bytes accepted so far are
// written (the server's last frames, a GOAWAY, are among them); it does
// not wait for that. A client that takes none of them is cut by the
// connection's write timeouts below.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.writing {
		c.closing = true
		c.mu.Unlock()
		// The flusher closes; a client that takes nothing more has
		// closeGrace to do so.
		c.Conn.SetWriteDeadline(time.Now().Add(closeGrace))
		return nil
	}
	c.closing = true
	if c.err == nil {
		c.err = net.ErrClosed
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// Read reads from the connection below, through the frame guard.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if gerr := c.g.scan(p[:n]); gerr != nil {
			return 0, gerr
		}
	}
	return n, err
}
