// Package h2 serves HTTP/2 for the proxy's traffic listeners: h2server,
// a fork of golang.org/x/net/http2's server (the one net/http bundles,
// kept by the Go team; see h2server/NOTICE), on a connection of ours
// (Conn) that batches the server's writes, the frames of many streams in one TLS record and one write(2),
// and ends a connection that floods the server with frames that are not
// requests (SETTINGS, PING, empty DATA and CONTINUATION, ...: guard.go).
// net/http does the TLS handshake and ALPN, then hands "h2" connections
// (and h2c ones, with prior knowledge) to the functions Configure puts in
// http.Server.TLSNextProto.
package h2

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	"sluice.dev/sluice/internal/h2/h2server"
)

// nextProtoH2C is net/http's TLSNextProto key for HTTP/2 without TLS: the
// *tls.Conn it passes only carries the TCP connection, whose preface was
// read.
const nextProtoH2C = "unencrypted_http2"

// Configure makes srv serve HTTP/2 with h2server, over a Conn
// with limits. It takes its settings from srv (HTTP2, MaxHeaderBytes,
// IdleTimeout) as net/http's own HTTP/2 server does, registers its
// graceful shutdown (GOAWAY) with srv.Shutdown, and serves h2c only if
// srv.Protocols allows unencrypted HTTP/2. Call it before srv serves.
func Configure(srv *http.Server, limits Limits) error {
	h2s := &h2server.Server{}
	if err := h2server.ConfigureServer(srv, h2s); err != nil {
		return fmt.Errorf("configuring HTTP/2: %w", err)
	}
	serve := func(hs *http.Server, c net.Conn, h http.Handler, sawPreface bool) {
		// net/http hands its per-connection context (ConnContext's
		// values) down on the handler.
		var ctx context.Context
		if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
			ctx = bc.BaseContext()
		}
		h2s.ServeConn(NewConn(c, sawPreface, limits), &h2server.ServeConnOpts{
			Context:          ctx,
			Handler:          withStack(h),
			BaseConfig:       hs,
			SawClientPreface: sawPreface,
		})
	}
	srv.TLSNextProto[h2server.NextProtoTLS] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
		serve(hs, c, h, false)
	}
	if srv.Protocols == nil || !srv.Protocols.UnencryptedHTTP2() {
		delete(srv.TLSNextProto, nextProtoH2C)
		return nil
	}
	srv.TLSNextProto[nextProtoH2C] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
		nc, ok := c.NetConn().(interface{ UnencryptedNetConn() net.Conn })
		if !ok {
			go c.Close()
			return
		}
		serve(hs, nc.UnencryptedNetConn(), h, true)
	}
	return nil
}
