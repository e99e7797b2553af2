package http1

import (
	"net"
	"sync"
)

// Listener is the net.Listener through which the fast loop hands
// connections to net/http: serve it with the http.Server that handles
// everything the fast loop does not (http.Server.Serve(l)). Closing it
// (http.Server.Shutdown does) makes later hand-offs close their
// connection instead.
type Listener struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

// NewListener returns a Listener reporting addr as its address.
func NewListener(addr net.Addr) *Listener {
	return &Listener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept returns the next handed-off connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept. Connections handed off later are closed.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the address of the listener the connections came from.
func (l *Listener) Addr() net.Addr { return l.addr }

// handOff gives c to the Accept caller; it reports false (and c stays the
// caller's) once the listener is closed.
func (l *Listener) handOff(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

// replayConn is a connection handed to net/http: the bytes the fast loop
// had read but not consumed come first, then the connection itself.
type replayConn struct {
	net.Conn
	buf   []byte
	on431 func() // Options.OnHeaderTooLarge
}

// Write passes p on, and tells on431 of net/http's answer to a header
// larger than its MaxHeaderBytes.
func (c *replayConn) Write(p []byte) (int, error) {
	if c.on431 != nil && IsHeaderTooLarge(p) {
		c.on431()
	}
	return c.Conn.Write(p)
}

// tooLarge is net/http's whole answer to a request header larger than its
// MaxHeaderBytes, written in one piece before it closes the connection.
const tooLarge = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large"

// IsHeaderTooLarge reports whether p, one write to a connection net/http
// serves, is its 431 answer to a header too large.
func IsHeaderTooLarge(p []byte) bool { return len(p) == len(tooLarge) && string(p) == tooLarge }

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.buf) > 0 {
		n := copy(p, c.buf)
		c.buf = c.buf[n:]
		if len(c.buf) == 0 {
			c.buf = nil
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

// NetConn returns the connection below, as tls.Conn does, so that callers
// can find what they wrapped.
func (c *replayConn) NetConn() net.Conn { return c.Conn }
