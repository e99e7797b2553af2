// Package http1 is sluice's HTTP/1.1 wire: its own server connection loop
// for plain keep-alive traffic, the common case on an ingress behind a load
// balancer, and the wire half of the upstream client (WriteRequest,
// ResponseReader; the proxy keeps the connection pool, deadlines and
// retries). Both share the parsing, framing, chunked bodies and timeout
// test (wire.go), and SockIO, socket reads and writes with recv(2) and
// send(2) (sock.go), which the listener's connections use too.
//
// The server loop: net/http's server costs a background read, a context, and
// several goroutine hand-offs per request; this loop serves each request
// on the connection's goroutine with one read and one write when the
// traffic allows it.
//
// It serves a subset of HTTP/1.1 and leaves everything else to net/http:
// before it consumes a request, it scans the buffered header (scanHead),
// and a request that is not HTTP/1.1, asks to upgrade, carries Expect or
// Transfer-Encoding, or has a header larger than the loop's buffer makes
// it hand the whole connection, with the bytes already read, to a
// Listener served by a net/http server. Requests it keeps are parsed by
// http.ReadRequest and checked as net/http's server checks them, so the
// bytes a request is made of mean the same on both paths; a differential
// fuzz test holds the two to that.
//
// Data flow: listener → Server.ServeConn → scanHead → http.ReadRequest →
// handler (internal/proxy) → response (framing, Date, Connection) → conn;
// and upstream: internal/proxy → WriteRequest → pod → ResponseReader.Parse
// (or http.ReadResponse) → internal/proxy.
package http1

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// bufSize is the size of a connection's read buffer. A request header
// must fit in it to be served here; a larger one goes to net/http, which
// applies the server's MaxHeaderBytes.
const bufSize = 4 << 10

// writeBufSize is the size of the write buffer lent per response (not
// held while idle): the header and a body of up to about 16 KiB go out in
// one write, as with HAProxy's 16 KiB buffers; with 4 KiB a 10 KiB body
// took two writes, each a wake-up of the client.
const writeBufSize = 16 << 10

// Options configure a Server.
type Options struct {
	// Handler serves the requests. Required.
	Handler http.Handler
	// HandOff receives the connections the loop does not serve. Required.
	HandOff *Listener
	// ReadHeaderTimeout bounds the arrival of a request header once it
	// has started (default 10s); IdleTimeout the wait for the next
	// request on a kept-alive connection (default 120s).
	ReadHeaderTimeout, IdleTimeout time.Duration
	// BodyIdleTimeout bounds the time a request body may go without a
	// byte while the handler reads it: the read then fails, and the
	// connection closes after the response. It is not a total: a large
	// body that keeps moving is never cut. Zero means 60s; negative: no
	// limit.
	BodyIdleTimeout time.Duration
	// OnTimeout, if set, is told each time a client timeout ends a
	// connection or a request body: TimeoutReadHeader,
	// TimeoutKeepAlive or TimeoutBodyIdle. Not while shutting down.
	OnTimeout func(kind string)
	// OnHeaderTooLarge, if set, is told each time net/http answers 431
	// on a connection the loop handed to it (a header larger than its
	// MaxHeaderBytes).
	OnHeaderTooLarge func()
	// ConnContext returns the context whose values every request of a
	// connection carries (as http.Server.ConnContext). Nil means none.
	ConnContext func(context.Context, net.Conn) context.Context
	// OnHandOff, if set, is told why each handed-off connection went.
	OnHandOff func(reason string)
	// Logger receives handler panics and protocol trouble; nil discards.
	Logger *slog.Logger
	// RecycleRequests reuses a request's state (the Request, its context,
	// URL, header map and values, about a kilobyte) for a later request
	// once the handler returned, unless the handler subscribed to the
	// context's cancellation (exchange.go). Set it only for a handler that
	// keeps nothing of a request once it returned, as net/http does not
	// demand; false (the default) allocates afresh for every request.
	RecycleRequests bool

	// freshGrace is how long after its accept a connection may send its
	// first request once the server shuts down: net/http's 5 seconds;
	// shorter in tests.
	freshGrace time.Duration
	// idleWait, if set, is called each time a connection starts waiting
	// for a request without a buffer (tests).
	idleWait func()
	// parkTick is the poller's sweep interval: a keep-alive connection
	// found waiting in the same wait at two sweeps is parked (park.go).
	// Default 1s; shorter in tests; negative: never park.
	parkTick time.Duration
	// beforePark, if set, runs just before a connection is registered
	// with the poller (tests).
	beforePark func()
}

// The kinds of timeout told to Options.OnTimeout.
const (
	TimeoutReadHeader = "read_header"    // a request header did not arrive in ReadHeaderTimeout
	TimeoutKeepAlive  = "keepalive_idle" // no next request in IdleTimeout
	TimeoutBodyIdle   = "body_idle"      // a request body sent no byte for BodyIdleTimeout
)

// Server runs the loop on the connections given to ServeConn.
type Server struct {
	o    Options
	log  *slog.Logger
	brs  sync.Pool // *bufio.Reader, held by a connection except while idle (idle.go)
	bws  sync.Pool // *bufio.Writer, lent per response
	xs   sync.Pool // *exchange, recycled (exchange.go)
	date atomic.Pointer[dateLine]

	shutdown atomic.Bool
	mu       sync.Mutex
	conns    map[*conn]struct{}
	park     parking // the parked connections (park.go), guarded by mu
}

// New returns a Server.
func New(o Options) *Server {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = 10 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 120 * time.Second
	}
	if o.BodyIdleTimeout == 0 {
		o.BodyIdleTimeout = 60 * time.Second
	}
	if o.freshGrace <= 0 {
		o.freshGrace = 5 * time.Second
	}
	if o.parkTick == 0 {
		o.parkTick = defaultParkTick
	}
	s := &Server{o: o, log: o.Logger, conns: map[*conn]struct{}{}, park: parking{conns: map[uint64]*conn{}}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.brs.New = func() any { return bufio.NewReaderSize(nil, bufSize) }
	s.bws.New = func() any { return bufio.NewWriterSize(nil, writeBufSize) }
	return s
}

// Shutdown closes every connection waiting for a later request, and
// makes the others close after the response they are writing (with
// "Connection: close" unless its header went out before), as
// http.Server.Shutdown does. A connection that has not sent its first
// request yet may still be carrying one: as with net/http, it is closed
// only if none came within 5 seconds of its accept. Shutdown does not
// wait.
func (s *Server) Shutdown() {
	s.shutdown.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeParked() // idle, without a goroutine: closed at once
	for c := range s.conns {
		if !c.idle.Load() {
			continue
		}
		if c.fresh.Load() {
			c.nc.SetReadDeadline(c.accepted.Add(s.o.freshGrace))
		} else {
			// Wake the read; the loop sees shutdown and closes.
			c.nc.SetReadDeadline(aLongTimeAgo)
		}
	}
}

var aLongTimeAgo = time.Unix(1, 0)

// timedOut tells Options.OnTimeout of err if it is a timeout that was not
// the server's doing (shutdown), and returns err.
func (s *Server) timedOut(err error, kind string) error {
	if s.o.OnTimeout != nil && IsTimeout(err) && !s.shutdown.Load() {
		s.o.OnTimeout(kind)
	}
	return err
}

func (s *Server) track(c *conn, add bool) {
	s.mu.Lock()
	if add {
		s.conns[c] = struct{}{}
		s.startPoller()
	} else {
		delete(s.conns, c)
	}
	s.mu.Unlock()
}

// dateLine is a formatted "Date:" header line and the second it is for.
type dateLine struct {
	sec  int64
	line []byte
}

// dateHeader returns the Date header line for now, formatted once a
// second.
func (s *Server) dateHeader(now time.Time) []byte {
	sec := now.Unix()
	if d := s.date.Load(); d != nil && d.sec == sec {
		return d.line
	}
	b := make([]byte, 0, 40)
	b = append(b, "Date: "...)
	b = now.UTC().AppendFormat(b, http.TimeFormat)
	b = append(b, "\r\n"...)
	s.date.Store(&dateLine{sec: sec, line: b})
	return b
}
