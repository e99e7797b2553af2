package http1

import (
	"bufio"
	"errors"
	"os"
	"sync/atomic"
	"time"
)

// Parking (issue 16): an idle keep-alive connection costs its goroutine,
// whose stack grew to 8 KiB while it served a request, even once the read
// buffer went back to the pool (idle.go). A connection that stays idle
// for a while is therefore parked: its descriptor is registered with one
// epoll instance per Server (park_linux.go), it drops what it can, and
// its goroutine returns, which frees the stack. One poller goroutine
// waits for the parked descriptors and starts a new loop on a connection
// when its client sends again (or closes).
//
// When to park. Under load a connection is never idle for long, and the
// request path must not pay for parking: no clock read, no timer. The
// loop only counts its waits in an atomic word (parkState.wait); the
// poller, every parkTick (1 s), walks the connections and asks those it
// finds in the same wait as at its previous sweep to park, waking their
// wait with a past read deadline, as Shutdown wakes idle connections. A
// connection is thus parked after 1–2 s of idleness. Only keep-alive
// waits park: a connection that has not sent its first request yet is
// under ReadHeaderTimeout and Shutdown's grace for fresh connections.
//
// What holds while parked:
//   - IdleTimeout: the poller closes a parked connection once the read
//     deadline its wait had is past (checked at every sweep, so up to one
//     parkTick late). A connection woken by the client gets a new
//     IdleTimeout for its first 4 bytes, as after a response.
//   - Shutdown closes parked connections at once (they are idle).
//   - A client that closes wakes the connection like bytes would
//     (EPOLLRDHUP, EPOLLHUP): the new loop reads EOF and closes.
//   - Bytes that arrived between the wait's end and the registration
//     wake it at once: the registration is level-triggered.
//   - The registration is one-shot, keyed by a token that is never
//     reused (not the descriptor's number, which is), and every epoll
//     call on a descriptor goes through RawConn.Control, which holds the
//     descriptor open meanwhile. The parked set, events, sweeps and
//     Shutdown are serialized by Server.mu.
//
// Connections without a descriptor (a *tls.Conn, a PROXY-protocol or
// in-memory connection: no SyscallConn) and builds for systems other
// than Linux never park; they keep the goroutine (and, without a
// descriptor, the read buffer) while idle.

// defaultParkTick is the poller's default sweep interval.
const defaultParkTick = time.Second

// errParked ends a loop whose connection was parked: the goroutine must
// return without touching the connection, which is the poller's now.
var errParked = errors.New("connection parked")

// The bits of parkState.wait below the wait count.
const (
	waitingBit = 1 << iota // the loop waits for a keep-alive request
	parkBit                // the poller asked the wait to park
	waitShift  = iota
)

// parkState is a connection's part in parking (embedded in conn).
type parkState struct {
	// wait is the loop's wait count << waitShift | waitingBit while it
	// waits | parkBit once the poller asked it to park.
	wait atomic.Uint32
	// waits is the loop's count of its waits (the loop's own).
	waits uint32
	// seen is wait at the poller's previous sweep (the poller's, under
	// Server.mu).
	seen uint32
	// While parked (under Server.mu): the key in parking.conns and the
	// end of the idle timeout.
	token  uint64
	expiry time.Time
}

// parking is a Server's set of parked connections, guarded by Server.mu.
type parking struct {
	conns   map[uint64]*conn
	next    uint64 // the last token handed out
	running bool   // the poller goroutine runs
	poller         // the platform's part
}

// beginWait notes the start of a wait that may park; it reports whether
// this one may.
func (c *conn) beginWait(first bool) bool {
	if first || c.s.o.parkTick < 0 || !parkSupported {
		return false
	}
	c.waits++
	c.wait.Store(c.waits<<waitShift | waitingBit)
	return true
}

// endWait notes the end of a wait and reports whether the poller asked it
// to park (it then set a past read deadline, or is about to).
func (c *conn) endWait() bool {
	return c.wait.Swap(c.waits<<waitShift)&parkBit != 0
}

// afterWait settles a wait the poller asked to park; err is what the wait
// returned. It reports whether the connection is parked: the caller must
// then return errParked and touch nothing of c. Otherwise the wait's read
// deadline is back in place if a request came.
func (c *conn) afterWait(err error) bool {
	if c.br == nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return c.park()
	}
	// A request came first. The poller set the past deadline while
	// holding mu: once mu is ours, it is set, and can be replaced.
	c.s.mu.Lock()
	c.s.mu.Unlock()
	c.nc.SetReadDeadline(c.deadline)
	return false
}

// park hands c to the poller, unless its idle timeout is over, the server
// shuts down, or the registration fails: then c's loop goes on to close
// it, as after the timeout.
func (c *conn) park() bool {
	s := c.s
	if !c.deadline.After(time.Now()) {
		return false
	}
	c.header = nil // rebuilt by the next response
	if s.o.beforePark != nil {
		s.o.beforePark()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &s.park
	if s.shutdown.Load() || !p.running {
		return false
	}
	p.next++
	c.token, c.expiry = p.next, c.deadline
	// Shutdown looks for idle connections with a goroutine; this one is
	// in the parked set.
	c.idle.Store(false)
	p.conns[c.token] = c
	if err := p.register(c); err != nil {
		delete(p.conns, c.token)
		c.idle.Store(true)
		s.log.Debug("http1: parking connection", "remote", c.remote, "error", err)
		return false
	}
	return true
}

// resume serves c again on a new goroutine's stack after the poller saw
// it readable (or closed).
func (c *conn) resume() {
	c.s.park.deregister(c)
	// The poller's past deadline is still set: the next wait replaces it.
	c.deadline = aLongTimeAgo
	c.br = c.s.brs.Get().(*bufio.Reader)
	c.br.Reset(&c.cr)
	c.loop(false)
}

// sweep, with s.mu held, asks the connections found in the same wait as at
// the previous sweep to park, and closes the parked ones whose idle
// timeout is over.
func (s *Server) sweep(now time.Time) {
	for c := range s.conns {
		if c.raw == nil {
			continue
		}
		v := c.wait.Load()
		if v&waitingBit != 0 && v == c.seen && c.wait.CompareAndSwap(v, v|parkBit) {
			c.nc.SetReadDeadline(aLongTimeAgo) // wakes the wait
		}
		c.seen = v
	}
	for _, c := range s.park.conns {
		if !now.Before(c.expiry) {
			s.closeParkedConn(c)
			if s.o.OnTimeout != nil {
				s.o.OnTimeout(TimeoutKeepAlive)
			}
		}
	}
}

// ready takes the parked connection of token out of the set (s.mu held);
// nil if it left already (closed by a sweep or Shutdown).
func (s *Server) ready(token uint64) *conn {
	c := s.park.conns[token]
	if c != nil {
		delete(s.park.conns, token)
	}
	return c
}

// closeParked closes every parked connection (s.mu held).
func (s *Server) closeParked() {
	for _, c := range s.park.conns {
		s.closeParkedConn(c)
	}
}

// closeParkedConn closes and forgets a parked connection (s.mu held): it
// leaves the poller before its descriptor is closed.
func (s *Server) closeParkedConn(c *conn) {
	delete(s.park.conns, c.token)
	s.park.deregister(c)
	c.nc.Close()
	delete(s.conns, c)
}
