package proxyproto

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"
)

// Options configures NewListener.
type Options struct {
	// Trusted lists the peers whose PROXY headers are honoured. Connections
	// from any other peer are returned by Accept unwrapped, their bytes
	// untouched: a header they send reaches the consumer as payload (and
	// fails as a bad HTTP request or TLS record). Empty trusts nobody.
	Trusted []netip.Prefix
	// HeaderTimeout bounds the wait for the header of a trusted peer's
	// connection. Zero means 5s.
	HeaderTimeout time.Duration
	// Required makes a trusted peer's connection without a header fail.
	// Without it, a trusted peer may send a header or not (a load balancer
	// whose health checks do not carry one); detection cannot be fooled
	// because neither HTTP nor TLS can start like a header.
	Required bool
}

// NewListener wraps inner so that connections from trusted peers report the
// client address of their PROXY header as RemoteAddr. Accept never waits for
// a header: it is read on the connection's first Read, RemoteAddr or Header
// call, in the consumer's goroutine.
func NewListener(inner net.Listener, o Options) net.Listener {
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = 5 * time.Second
	}
	return &listener{Listener: inner, o: o}
}

type listener struct {
	net.Listener
	o Options
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if !l.trusted(c.RemoteAddr()) {
		return c, nil
	}
	return newConn(c, l.o), nil
}

func (l *listener) trusted(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return false
	}
	ip = ip.Unmap()
	for _, p := range l.o.Trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Conn is a connection from a trusted peer. Its header is read once, on the
// first Read, RemoteAddr or Header call.
type Conn struct {
	net.Conn
	o Options

	once   sync.Once
	header *Header
	err    error
	rest   []byte // payload read along with the header

	mu           sync.Mutex
	headerDone   bool
	userDeadline time.Time // the consumer's read deadline
}

var _ net.Conn = (*Conn)(nil)

func newConn(c net.Conn, o Options) *Conn {
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = 5 * time.Second
	}
	return &Conn{Conn: c, o: o}
}

func (c *Conn) init() {
	c.mu.Lock()
	deadline := time.Now().Add(c.o.HeaderTimeout)
	if !c.userDeadline.IsZero() && c.userDeadline.Before(deadline) {
		deadline = c.userDeadline
	}
	c.mu.Unlock()
	if err := c.Conn.SetReadDeadline(deadline); err != nil {
		c.err = err
		return
	}
	c.header, c.rest, c.err = readHeader(c.Conn, c.o.Required)
	if !c.o.Required && (c.err == io.EOF || errors.Is(c.err, os.ErrDeadlineExceeded)) {
		// A trusted peer that sent nothing (yet): a plain connection. Its
		// next Read reports EOF or, if the consumer's own deadline
		// passed, the timeout.
		c.err = nil
	}
	c.mu.Lock()
	c.headerDone = true
	if err := c.Conn.SetReadDeadline(c.userDeadline); err != nil && c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// Header returns the connection's PROXY header, nil if it sent none, or the
// error that made reading it fail.
func (c *Conn) Header() (*Header, error) {
	c.once.Do(c.init)
	return c.header, c.err
}

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Read serves the payload after the header. A bad or missing (when
// required) header makes every Read fail.
func (c *Conn) Read(b []byte) (int, error) {
	c.once.Do(c.init)
	if c.err != nil {
		return 0, c.err
	}
	if len(c.rest) > 0 {
		n := copy(b, c.rest)
		c.rest = c.rest[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// RemoteAddr returns the client address of the header, or the peer's
// address for LOCAL and UNKNOWN headers, headers without a TCP address,
// connections without a header and broken headers.
func (c *Conn) RemoteAddr() net.Addr {
	c.once.Do(c.init)
	if c.err == nil && c.header.HasAddress() {
		return net.TCPAddrFromAddrPort(c.header.Source)
	}
	return c.Conn.RemoteAddr()
}

// LocalAddr returns the destination address of the header (the address
// the client reached: the load balancer's), or the connection's own local
// address for LOCAL and UNKNOWN headers, headers without a TCP address,
// connections without a header and broken headers. The proxy routes by it
// when a Gateway has an address of its own (route.Scope).
func (c *Conn) LocalAddr() net.Addr {
	c.once.Do(c.init)
	if c.err == nil && c.header.HasAddress() {
		return Destination{net.TCPAddrFromAddrPort(c.header.Destination)}
	}
	return c.Conn.LocalAddr()
}

// Destination is the LocalAddr of a connection whose PROXY header carried
// the address the client reached.
type Destination struct{ *net.TCPAddr }

// Reached returns the load-balancer address and port a connection with
// local address a (its LocalAddr) reached, for route.Table.For: a PROXY
// header's destination with its port; otherwise the local address with
// port 0, since the proxy's own port says nothing of the load balancer's.
func Reached(a net.Addr) netip.AddrPort {
	switch v := a.(type) {
	case Destination:
		ap := v.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(v.IP)
		return netip.AddrPortFrom(ip.Unmap(), 0)
	}
	return netip.AddrPort{}
}

// SetDeadline sets both deadlines; see SetReadDeadline.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// SetReadDeadline records the consumer's read deadline. While the header is
// being read, the earlier of it and the header timeout applies.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.userDeadline = t
	if !c.headerDone {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}
