package http1

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"
)

// HTTPS on the loop. net/http serves a *tls.Conn by doing the handshake
// in the connection's goroutine, bounded by its ReadHeaderTimeout, then
// dispatching on the protocol ALPN negotiated: "h2" to its HTTP/2 server,
// anything else to its HTTP/1.x loop. ServeTLS does the same, with this
// loop in the place of net/http's HTTP/1.x one: HTTP/1.1 over TLS, the
// bulk of HTTPS traffic on an ingress, then costs what plain HTTP costs
// plus the record layer.

// reasonH2 is the hand-off reason of a connection that negotiated HTTP/2.
const reasonH2 = "h2"

// ServeTLS does the server side of tc's handshake, bounded by
// ReadHeaderTimeout for reading and writing, then serves the connection:
// one that negotiated "h2" by ALPN goes to Options.HandOff as the
// *tls.Conn itself (so net/http sees TLS, sets Request.TLS and serves
// HTTP/2 through TLSNextProto; OnHandOff is told "h2"), any other (ALPN
// "http/1.1", or none) is served by the loop as ServeConn serves it, each
// request carrying the connection's state in Request.TLS. A failed
// handshake closes the connection; a client that spoke plain HTTP to the
// TLS port gets net/http's 400 first. ServeTLS returns when the
// connection is closed or handed off.
func (s *Server) ServeTLS(tc *tls.Conn) {
	if err := s.handshake(tc); err != nil {
		// A handshake that did not end in ReadHeaderTimeout counts as a
		// header that did not (net/http's ConnState shows the same).
		s.timedOut(err, TimeoutReadHeader)
		s.log.Debug("http1: TLS handshake error", "remote", tc.RemoteAddr().String(), "error", err)
		tc.Close()
		return
	}
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		if s.o.OnHandOff != nil {
			s.o.OnHandOff(reasonH2)
		}
		if !s.o.HandOff.handOff(tc) {
			tc.Close()
		}
		return
	}
	s.ServeConn(tc)
}

// handshake runs tc's handshake with net/http's bound: ReadHeaderTimeout
// for the whole of it, read and write, the deadlines cleared after.
func (s *Server) handshake(tc *tls.Conn) error {
	dl := time.Now().Add(s.o.ReadHeaderTimeout)
	tc.SetReadDeadline(dl)
	tc.SetWriteDeadline(dl)
	if err := tc.Handshake(); err != nil {
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			// As net/http: the client spoke HTTP to the TLS port.
			io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
			return errPlainHTTP
		}
		return err
	}
	tc.SetReadDeadline(time.Time{})
	tc.SetWriteDeadline(time.Time{})
	return nil
}

var errPlainHTTP = errors.New("client sent an HTTP request to an HTTPS server")

// looksLikeHTTP reports whether a TLS record header is the start of an
// HTTP request (net/http's tlsRecordHeaderLooksLikeHTTP).
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

// connTLS returns the TLS state of a connection the loop serves (computed
// once per connection, as net/http does), nil if it is not TLS.
func connTLS(nc net.Conn) *tls.ConnectionState {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return nil
	}
	st := tc.ConnectionState()
	return &st
}

// tlsState is a connection's TLS state (an alias, so conn.go needs no
// crypto/tls import).
type tlsState = tls.ConnectionState

// replay wraps a connection handed to net/http with the bytes the loop
// had read. net/http sees the wrapper, not a *tls.Conn: over TLS the
// wrapper reports the connection's state, from which net/http sets
// Request.TLS (it asks any connection for ConnectionState).
func replay(nc net.Conn, buf []byte, on431 func()) net.Conn {
	rc := &replayConn{Conn: nc, buf: buf, on431: on431}
	if tc, ok := nc.(*tls.Conn); ok {
		return &tlsReplayConn{replayConn: rc, tc: tc}
	}
	return rc
}

// tlsReplayConn is a replayConn over TLS.
type tlsReplayConn struct {
	*replayConn
	tc *tls.Conn
}

// ConnectionState is the handshake's outcome, as tls.Conn reports it.
func (c *tlsReplayConn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }
