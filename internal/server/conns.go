package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sluice.dev/sluice/internal/http1"
)

// Reasons a traffic connection closed (label of
// sluice_connections_closed_total).
const (
	reasonServing          = "serving"           // closed while serving: client, idle timeout, errors
	reasonDrain            = "drain"             // closed politely while draining or stopping
	reasonShutdownDeadline = "shutdown_deadline" // still open at the shutdown deadline
	reasonHijackedDeadline = "hijacked_deadline" // an upgraded connection still open at the deadline
	reasonForced           = "forced"            // closed at once by a further signal
)

// tracker knows every open traffic connection, below TLS and PROXY
// protocol, so that stopping can wait for all of them (including hijacked
// ones, which net/http forgets) and force-close the rest.
type tracker struct {
	m      *metrics
	reason func() string // why a connection closing now closes
	// max is the most connections open at once (Options.MaxConnections);
	// 0: no limit.
	max int
	// writeIdle is Options.WriteIdleTimeout; 0: none (limits.go).
	writeIdle time.Duration
	// epoch is the base of the connections' write deadlines (limits.go).
	epoch time.Time
	// count431: net/http writes its 431 answers to tracked connections
	// directly (no fast loop in between, which counts them otherwise).
	count431 bool

	// lastTraffic is the UnixNano time of the latest connection's first
	// request that was not a health check (see countTraffic).
	lastTraffic atomic.Int64

	mu      sync.Mutex
	conns   map[*trackedConn]struct{}
	changed chan struct{} // closed and replaced when a connection goes
}

func newTracker(m *metrics, reason func() string) *tracker {
	return &tracker{m: m, reason: reason, epoch: time.Now(), conns: map[*trackedConn]struct{}{}, changed: make(chan struct{})}
}

// add tracks c, unless max connections are open already: it then reports
// false and c is not tracked.
func (t *tracker) add(c *trackedConn) bool {
	t.mu.Lock()
	if t.max > 0 && len(t.conns) >= t.max {
		t.mu.Unlock()
		t.m.refused.WithLabelValues(c.listener).Inc()
		return false
	}
	t.conns[c] = struct{}{}
	t.mu.Unlock()
	t.m.accepted.WithLabelValues(c.listener).Inc()
	t.m.active.WithLabelValues(c.listener).Inc()
	return true
}

func (t *tracker) remove(c *trackedConn, reason string) {
	// The counts change with the set, under mu: whoever sees the change
	// (Run's wait for the last connection, add at the limit) sees them
	// too.
	t.mu.Lock()
	delete(t.conns, c)
	t.m.active.WithLabelValues(c.listener).Dec()
	t.m.closed.WithLabelValues(reason).Inc()
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

// empty returns a channel that is closed if no connection is open, or
// that closes at the next change (the caller checks again).
func (t *tracker) empty() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.conns) == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return t.changed
}

// closeAll force-closes every open connection. reason(hijacked) names why.
func (t *tracker) closeAll(reason func(hijacked bool) string) int {
	t.mu.Lock()
	conns := make([]*trackedConn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.forceClose(reason(c.hijacked.Load()))
	}
	return len(conns)
}

type trackingListener struct {
	net.Listener
	t    *tracker
	name string
}

// Accept returns the next connection. Beyond Options.MaxConnections, new
// connections are closed as soon as they are accepted, before a byte is
// read or written (counted in sluice_connections_refused_total): the
// open ones keep working, and a load balancer sees the refusal at once
// rather than a connection that hangs.
func (l *trackingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, t: l.t, listener: l.name}
		tc.wdl.Store(noDeadline)
		tc.initSock()
		if l.t.add(tc) {
			return tc, nil
		}
		refuse(c)
	}
}

// refuse closes a connection beyond the limit with a reset (SO_LINGER 0):
// the client learns at once, and the proxy keeps no TIME_WAIT state for it.
func refuse(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

type trackedConn struct {
	net.Conn
	t        *tracker
	listener string
	hijacked atomic.Bool
	once     sync.Once
	// wdl is the write deadline in effect, in nanoseconds since t.epoch;
	// noDeadline for none (limits.go).
	wdl atomic.Int64
	// wdlAbove: the write deadline in effect was set from above.
	wdlAbove atomic.Bool
	// writeTimedOut: a write timed out (counted once).
	writeTimedOut atomic.Bool
	// For net/http's timeouts (limits.go): its last ConnState; whether
	// the last read timed out; whether a handler ran since the
	// connection last went active; whether a request body timed out.
	httpState                      atomic.Int32
	readTimedOut, served, bodyIdle atomic.Bool

	// sock reads and writes the socket with recv(2) and send(2)
	// (http1.SockIO), when hasSock; rmu and wmu serialize its reads and
	// its writes (net.Conn allows concurrent calls).
	sock     http1.SockIO
	hasSock  bool
	rmu, wmu sync.Mutex
}

// initSock sets c up to read and write its socket with recv(2) and
// send(2) when the connection gives its descriptor.
func (c *trackedConn) initSock() {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	c.sock.Init(c.Conn, raw)
	c.hasSock = true
}

// read and write are the connection's Read and Write, through sock when
// it has one.
func (c *trackedConn) read(p []byte) (int, error) {
	if !c.hasSock {
		return c.Conn.Read(p)
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.sock.Read(p)
}

func (c *trackedConn) write(p []byte) (int, error) {
	if !c.hasSock {
		return c.Conn.Write(p)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.sock.Write(p)
}

// SyscallConn passes on the descriptor of a plain TCP connection, so the
// fast HTTP/1.1 loop can wait for an idle connection's next request without
// holding a buffer (internal/http1). A wrapped connection (PROXY protocol)
// has none: the loop then keeps its buffer.
func (c *trackedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// ReadFrom passes on the plain TCP connection's, so that a response body
// copied from an upstream connection moves with splice(2) (the fast
// HTTP/1.1 loop's response.ReadFrom, net.TCPConn.ReadFrom).
func (c *trackedConn) ReadFrom(r io.Reader) (int64, error) {
	if c.t != nil && c.t.writeIdle > 0 {
		return c.copyFrom(r) // limits.go
	}
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.t.remove(c, c.t.reason()) })
	return err
}

func (c *trackedConn) forceClose(reason string) {
	c.once.Do(func() { c.t.remove(c, reason) })
	c.Conn.Close()
}

// connTrafficKey is the context key of a connection's *connTraffic.
type connTrafficKey struct{}

// connTraffic is per-connection state shared by the requests on one
// connection (concurrent ones, for HTTP/2).
type connTraffic struct {
	counted atomic.Bool // a request other than a health check was seen
	// tc is the tracked connection below (nil if none): net/http's
	// timeouts are told apart through it (limits.go).
	tc *trackedConn
}

// connContext gives every traffic connection its connTraffic
// (http.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connTrafficKey{}, &connTraffic{tc: unwrap(c)})
}

// countTraffic records r, a request that is not a health check, as new
// traffic for DrainQuietPeriod if it is the first such request on its
// connection. A connection is new traffic from its first real request
// on, not from its accept: load balancers that health-check the traffic
// port open a connection per check and keep checking a deregistered
// target, and pre-opened or TCP-checked connections carry no request.
func (t *tracker) countTraffic(r *http.Request) {
	if ct, ok := r.Context().Value(connTrafficKey{}).(*connTraffic); ok && !ct.counted.CompareAndSwap(false, true) {
		return
	}
	t.lastTraffic.Store(time.Now().UnixNano())
}

// connState marks hijacked connections (WebSocket and other upgrades),
// which net/http no longer tracks or closes at shutdown.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	tc := unwrap(c)
	if tc == nil {
		return
	}
	switch st {
	case http.StateHijacked:
		tc.hijacked.Store(true)
	case http.StateActive:
		tc.served.Store(false)
	case http.StateClosed:
		s.countNetHTTPTimeout(tc)
	}
	tc.httpState.Store(int32(st))
}

// unwrap finds the tracked connection below TLS and PROXY protocol.
func unwrap(c net.Conn) *trackedConn {
	for c != nil {
		if tc, ok := c.(*trackedConn); ok {
			return tc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}
