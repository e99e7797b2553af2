package proxy

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sluice.dev/sluice/internal/route"
)

// upstream is the state of one pod endpoint address. It lives in the
// Proxy's registry and survives table swaps for as long as some backend of
// the current table lists the address, so in-flight counts and passive
// health are not reset by unrelated configuration changes.
type upstream struct {
	addr     string
	inflight atomic.Int64
	// fails counts consecutive connect failures; a response resets it.
	fails atomic.Int32
	// ejectedUntil is a Unix time in nanoseconds; 0 means never ejected.
	ejectedUntil atomic.Int64
	// slots caps the requests in flight (Options.MaxConnsPerEndpoint).
	slots slots
	// pools by timeout settings; guarded by Proxy.mu (touched only in Update).
	pools map[poolKey]*pool
}

func (u *upstream) ejected(now int64) bool {
	t := u.ejectedUntil.Load()
	return t != 0 && now < t
}

func (u *upstream) succeeded() {
	if u.fails.Load() != 0 {
		u.fails.Store(0)
	}
}

// connectFailed records a connect failure and reports whether it ejected
// the endpoint. An endpoint whose ejection has expired is ejected again by
// its next failure, since only a response resets the count.
func (u *upstream) connectFailed(now int64, threshold int, d time.Duration) bool {
	if int(u.fails.Add(1)) < threshold {
		return false
	}
	for {
		t := u.ejectedUntil.Load()
		if t != 0 && now < t {
			return false
		}
		if u.ejectedUntil.CompareAndSwap(t, now+int64(d)) {
			return true
		}
	}
}

// poolKey selects the connection pool of an upstream: backends that share an
// endpoint but set different timeouts need different Transports.
type poolKey struct {
	connect, response time.Duration
	// send is the write timeout of its connections (iotimeout.go).
	send     time.Duration
	protocol route.Protocol
	// tls is the backend's route.UpstreamTLS in comparable form, "" for
	// none: its server name, skip-verify flag and CA bundle.
	tls string
}

// pool holds the idle connections of one upstream and one timeout
// setting: its own for the synchronous path (h1.go), and an http.Transport
// for the requests that need one. A pool no longer used by the current
// table is retired: its idle connections are closed at once, and
// connections that finish in-flight requests later are closed as they
// become idle.
type pool struct {
	tr *http.Transport
	// once carries the requests of the Transport path that could not be
	// sent again (see roundTripper): its idle connections live for
	// Options.UnsafeReuseWindow only. Nil for HTTP/2 backends.
	once *http.Transport
	// h2 carries the requests of HTTP/2 backends (h2c, gRPC, gRPCs); nil
	// for HTTP/1.1 ones.
	h2       *h2pool
	scheme   string // of upstream request URLs: "http" or "https"
	retired  atomic.Bool
	addr     string
	dialer   net.Dialer
	response time.Duration // response header timeout
	send     time.Duration // write timeout of its connections; 0 for none
	maxIdle  int
	idleFor  time.Duration // IdleConnTimeout

	mu    sync.Mutex
	idle  []*h1conn // oldest first
	timer *time.Timer
	armed bool // timer is pending
}

func (p *pool) retire() {
	p.retired.Store(true)
	p.tr.CloseIdleConnections()
	if p.once != nil {
		p.once.CloseIdleConnections()
	}
	if p.h2 != nil {
		p.h2.retire()
	}
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, hc := range idle {
		hc.close()
	}
}

// release is called after a request on the pool's Transport is done with
// its connection.
func (p *pool) release() {
	if p.retired.Load() {
		p.tr.CloseIdleConnections()
		if p.once != nil {
			p.once.CloseIdleConnections()
		}
	}
}

// dial opens a new connection for the synchronous path.
func (p *pool) dial(ctx context.Context) (*h1conn, error) {
	c, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, &connectError{err: err}
	}
	hc := &h1conn{pl: p, c: c}
	hc.lr.R = c
	if sc, ok := c.(syscall.Conn); ok {
		hc.raw, _ = sc.SyscallConn()
	}
	if hc.raw != nil {
		hc.sock.Init(c, hc.raw)
	}
	return hc, nil
}

// get takes the most recently used idle connection, nil if none (the
// timer of sweep closes connections idle too long). With check, a
// connection the upstream closed (or sent unasked bytes on) is detected
// and discarded first. With since above 0, only a connection idle since
// then (Unix nanoseconds) will do: older ones stay for other requests.
func (p *pool) get(check bool, since int64) *h1conn {
	p.mu.Lock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		hc := p.idle[n-1]
		if hc.idleAt < since {
			break // the others are older still
		}
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if check && !hc.rdl.IsZero() {
			// The last response's header deadline may have passed since.
			hc.c.SetReadDeadline(time.Time{})
			hc.rdl = time.Time{}
		}
		if !check || hc.alive() {
			return hc
		}
		hc.close()
		p.mu.Lock()
	}
	p.mu.Unlock()
	return nil
}

// put makes hc idle since idleAt (Unix nanoseconds), or closes it if the
// pool is retired or full.
func (p *pool) put(hc *h1conn, idleAt int64) {
	hc.reused = true
	hc.idleAt = idleAt
	p.mu.Lock()
	if p.retired.Load() || len(p.idle) >= p.maxIdle {
		p.mu.Unlock()
		hc.close()
		return
	}
	p.idle = append(p.idle, hc)
	if !p.armed {
		p.armed = true
		if p.timer == nil {
			p.timer = time.AfterFunc(p.idleFor, p.sweep)
		} else {
			p.timer.Reset(p.idleFor)
		}
	}
	p.mu.Unlock()
}

// sweep closes the connections idle for IdleConnTimeout and re-arms the
// timer for the oldest remaining one.
func (p *pool) sweep() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	now := time.Now().UnixNano()
	i := 0
	for i < len(p.idle) && now-p.idle[i].idleAt >= int64(p.idleFor) {
		p.idle[i].close()
		i++
	}
	n := copy(p.idle, p.idle[i:])
	clear(p.idle[n:])
	p.idle = p.idle[:n]
	if n > 0 {
		p.armed = true
		p.timer.Reset(time.Duration(p.idle[0].idleAt + int64(p.idleFor) - now))
	}
}

// connectError marks a failure to establish a connection: the request was
// never sent, so it can be retried on another endpoint whatever its method.
type connectError struct{ err error }

func (e *connectError) Error() string { return "connecting to upstream: " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

func (p *Proxy) newPool(addr string, k poolKey, ut *route.UpstreamTLS) *pool {
	pl := &pool{
		scheme:   "http",
		addr:     addr,
		dialer:   net.Dialer{Timeout: k.connect, KeepAlive: 30 * time.Second},
		response: k.response,
		send:     k.send,
		maxIdle:  p.opts.MaxIdleConnsPerEndpoint,
		idleFor:  p.opts.IdleConnTimeout,
	}
	d := &pl.dialer
	pl.tr = &http.Transport{
		Proxy: nil, // never an environment proxy between sluice and pods
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, &connectError{err: err}
			}
			return withSend(c, k.send), nil
		},
		MaxIdleConns:          0, // no global limit; per endpoint below
		MaxIdleConnsPerHost:   p.opts.MaxIdleConnsPerEndpoint,
		IdleConnTimeout:       p.opts.IdleConnTimeout,
		ResponseHeaderTimeout: k.response,
		ExpectContinueTimeout: time.Second,
		// Pass bodies through untouched: no transparent gzip.
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
		// As the synchronous path.
		MaxResponseHeaderBytes: p.opts.MaxResponseHeaderBytes,
	}
	switch k.protocol {
	case route.ProtocolHTTPS:
		pl.scheme = "https"
		pl.tr.TLSClientConfig = upstreamTLSConfig(ut, "http/1.1")
	case route.ProtocolGRPCS:
		pl.scheme = "https"
		pl.tr.TLSClientConfig = upstreamTLSConfig(ut, "h2")
		pl.h2 = newH2Pool(pl.tr, "https", addr, p.opts.MaxStreamsPerConnection)
	case route.ProtocolH2C, route.ProtocolGRPC:
		pl.h2 = newH2Pool(pl.tr, "http", addr, p.opts.MaxStreamsPerConnection)
	}
	if pl.h2 == nil {
		pl.once = pl.tr.Clone()
		if w := p.opts.UnsafeReuseWindow; w > 0 {
			pl.once.IdleConnTimeout = w
		} else {
			pl.once.DisableKeepAlives = true
		}
	}
	return pl
}

// roundTripper returns what carries the pool's requests other than the
// synchronous HTTP/1.1 path's. again reports whether the request may be
// sent again should its connection turn out closed; the Transport does so
// by itself for a retryable request without a body (it cannot replay ours
// once read). Any other goes on a connection of the once Transport: one
// that was busy within UnsafeReuseWindow, or a new one. HTTP/2 needs no
// such care: a pod closing a connection says which streams it left
// unprocessed (GOAWAY), and net/http sends those again.
func (p *pool) roundTripper(again bool) http.RoundTripper {
	switch {
	case p.h2 != nil:
		return p.h2
	case !again:
		return p.once
	}
	return p.tr
}

// tlsKey is the comparable form of an upstream TLS configuration.
func tlsKey(t *route.UpstreamTLS) string { return t.Key() }
