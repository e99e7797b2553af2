package proxy

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"
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
}

// pool is the idle-connection pool (an http.Transport) of one upstream and
// one timeout setting. A pool no longer used by the current table is
// retired: its idle connections are closed at once, and connections that
// finish in-flight requests later are closed as they become idle.
type pool struct {
	tr      *http.Transport
	retired atomic.Bool
}

func (p *pool) retire() {
	p.retired.Store(true)
	p.tr.CloseIdleConnections()
}

// release is called after a request on the pool is done with its
// connection.
func (p *pool) release() {
	if p.retired.Load() {
		p.tr.CloseIdleConnections()
	}
}

// connectError marks a failure to establish a connection: the request was
// never sent, so it can be retried on another endpoint whatever its method.
type connectError struct{ err error }

func (e *connectError) Error() string { return "connecting to upstream: " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

func (p *Proxy) newPool(k poolKey) *pool {
	d := &net.Dialer{Timeout: k.connect, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: nil, // never an environment proxy between sluice and pods
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, &connectError{err: err}
			}
			return c, nil
		},
		MaxIdleConns:          0, // no global limit; per endpoint below
		MaxIdleConnsPerHost:   p.opts.MaxIdleConnsPerEndpoint,
		IdleConnTimeout:       p.opts.IdleConnTimeout,
		ResponseHeaderTimeout: k.response,
		ExpectContinueTimeout: time.Second,
		// Pass bodies through untouched: no transparent gzip.
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
	}
	return &pool{tr: tr}
}
