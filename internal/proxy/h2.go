package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"sync"

	"sluice.dev/sluice/internal/route"
)

// h2pool holds the HTTP/2 connections of one upstream (h2c, gRPC, gRPCs):
// requests are multiplexed over them, at most maxStreams at a time on each
// (and fewer if the pod says so); a request that finds every connection
// full opens a new one. net/http does the HTTP/2 (Transport.NewClientConn);
// the pool only chooses the connection.
type h2pool struct {
	tr         *http.Transport
	scheme     string // "http" (h2c) or "https"
	addr       string
	maxStreams int

	mu      sync.Mutex
	conns   []*http.ClientConn
	retired bool
}

var _ http.RoundTripper = (*h2pool)(nil)

// newH2Pool returns the pool for addr; tr must have DialContext set, and
// TLSClientConfig for "https".
func newH2Pool(tr *http.Transport, scheme, addr string, maxStreams int) *h2pool {
	tr.Protocols = new(http.Protocols)
	if scheme == "https" {
		tr.Protocols.SetHTTP2(true)
	} else {
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	return &h2pool{tr: tr, scheme: scheme, addr: addr, maxStreams: maxStreams}
}

// RoundTrip sends req on a connection with a free stream. A failure to
// open a connection (dial or TLS handshake) is a connectError: the
// request was not sent.
func (h *h2pool) RoundTrip(req *http.Request) (*http.Response, error) {
	cc, err := h.get(req.Context())
	if err != nil {
		return nil, err
	}
	return cc.RoundTrip(req)
}

// get returns a connection with a stream reserved for the caller.
func (h *h2pool) get(ctx context.Context) (*http.ClientConn, error) {
	h.mu.Lock()
	live := h.conns[:0]
	var found *http.ClientConn
	for _, cc := range h.conns {
		if cc.Err() != nil {
			cc.Close()
			continue
		}
		live = append(live, cc)
		// Under mu, the check and the reservation are one step for
		// every caller of get.
		if found == nil && cc.InFlight() < h.maxStreams && cc.Reserve() == nil {
			found = cc
		}
	}
	clear(h.conns[len(live):])
	h.conns = live
	h.mu.Unlock()
	if found != nil {
		return found, nil
	}

	cc, err := h.tr.NewClientConn(ctx, h.scheme, h.addr)
	if err != nil {
		var ce *connectError
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, &connectError{err: err} // the TLS handshake
	}
	if err := cc.Reserve(); err != nil {
		cc.Close()
		return nil, &connectError{err: err}
	}
	h.mu.Lock()
	if h.retired {
		h.mu.Unlock()
		closeWhenIdle(cc)
		return cc, nil // serves this request, then closes
	}
	h.conns = append(h.conns, cc)
	h.mu.Unlock()
	return cc, nil
}

// retire closes the pool's connections as their streams end; running
// streams (a gRPC stream may run for hours) are not cut.
func (h *h2pool) retire() {
	h.mu.Lock()
	h.retired = true
	conns := h.conns
	h.conns = nil
	h.mu.Unlock()
	for _, cc := range conns {
		closeWhenIdle(cc)
	}
}

// closeWhenIdle closes cc now if it has no request in flight, else once the
// last one ends.
func closeWhenIdle(cc *http.ClientConn) {
	cc.SetStateHook(func(cc *http.ClientConn) {
		if cc.InFlight() == 0 {
			cc.Close()
		}
	})
	if cc.InFlight() == 0 {
		cc.Close()
	}
}

// upstreamTLSConfig builds the client TLS configuration of an HTTPS or
// GRPCS backend.
func upstreamTLSConfig(t *route.UpstreamTLS, alpn string) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{alpn}}
	if t == nil {
		return c
	}
	c.ServerName = t.ServerName
	c.InsecureSkipVerify = t.InsecureSkipVerify
	if len(t.CA) > 0 {
		c.RootCAs = x509.NewCertPool()
		c.RootCAs.AppendCertsFromPEM(t.CA)
	}
	if len(t.SubjectAltNames) > 0 && !t.InsecureSkipVerify {
		// ServerName is the SNI only: the chain and the names are
		// verified by t.VerifyConnection.
		c.InsecureSkipVerify = true
		c.VerifyConnection = t.VerifyConnection(c.RootCAs)
	}
	return c
}
