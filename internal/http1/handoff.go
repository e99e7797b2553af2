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
	buf []byte
}

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
