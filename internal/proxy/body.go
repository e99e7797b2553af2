package proxy

// The response body path of the synchronous HTTP/1.1 upstream (h1.go).
//
// A body of known length (Content-Length, not chunked) is copied by
// copyLength rather than through the generic loop of copyBody:
//   - what came with the header is sent together with what the upstream
//     socket already holds: one write to the client for a body of a few
//     KiB instead of one per read (each write to a loopback or LAN peer
//     costs a wake-up of the reader);
//   - the client's request context is watched only if the body stalls
//     (bodyReader): a body that flows needs neither a context callback
//     nor the server's background read of the client connection.

import (
	"io"
	"net"
	"time"

	"sluice.dev/sluice/internal/http1"
)

// bodyReader is what an upstream connection's bufio.Reader reads from,
// below the header limit. While a body is read under the header's short
// deadline (h1conn.lazy set), a read that times out means the body
// stalled: the client is watched from then on, the deadline goes, and the
// read is tried again. Below the bufio.Reader, a retried timeout is
// invisible to the body's framing (a chunked reader keeps its errors).
type bodyReader h1conn

func (r *bodyReader) Read(p []byte) (int, error) {
	hc := (*h1conn)(r)
	n, err := hc.read(p)
	if n == 0 && err != nil && hc.lazy != nil && http1.IsTimeout(err) {
		hc.slowBody()
		n, err = hc.read(p)
	}
	return n, err
}

// read reads from the connection: with recv(2) when it gives its
// descriptor (http1.SockIO).
func (hc *h1conn) read(p []byte) (int, error) {
	if hc.raw != nil {
		return hc.sock.Read(p)
	}
	return hc.c.Read(p)
}

// slowBody ends the lazy watch: the body may take any time from now on,
// and the client going away closes the upstream connection.
func (hc *h1conn) slowBody() {
	ctx := hc.lazy
	hc.lazy = nil
	hc.c.SetReadDeadline(time.Time{})
	hc.rdl = time.Time{}
	hc.watch(ctx)
}

// copyLength copies the left bytes of hc's body (Content-Length framing)
// to w, with buf. rerr is a failure reading the upstream (io.ErrUnexpectedEOF
// for a body cut short), werr one writing to w.
func (p *Proxy) copyLength(w io.Writer, hc *h1conn, left int64, buf []byte) (n int64, rerr, werr error) {
	// First what the header's read brought along, topped up with what
	// the socket holds now, without waiting.
	gather := hc.br.Buffered() > 0
	var rf io.ReaderFrom
	if p.opts.SpliceBodies {
		rf, _ = w.(io.ReaderFrom)
	}
	for left > 0 {
		if rf != nil && left >= spliceMin && !gather && hc.br.Buffered() == 0 {
			k, rerr, werr := hc.spliceTo(rf, left)
			return n + k, rerr, werr
		}
		b := buf[:min(int64(len(buf)), left)]
		m, err := hc.br.Read(b)
		if gather && err == nil && m < len(b) {
			// hc.br is empty now: read the connection itself.
			m += hc.readNow(b[m:])
		}
		gather = false
		if m > 0 {
			left -= int64(m)
			nw, ew := w.Write(b[:m])
			n += int64(nw)
			if ew != nil {
				return n, nil, ew
			}
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && left > 0 {
			return n, err, nil
		}
	}
	hc.body.eof = true
	return n, nil, nil
}

// spliceMin is the least body left for which copyLength hands the copy to
// the client connection (spliceTo): below it, a pipe's two system calls
// per piece cost more than the copy through user space.
const spliceMin = 64 << 10

// spliceTo copies the left bytes of hc's body with rf (the client's
// response, whose ReadFrom takes them straight from the upstream's
// *net.TCPConn with splice(2) when the client's connection is plain TCP).
// hc's bufio.Reader must be empty. With splice, a failure does not say
// which side failed: the upstream's socket is asked (broken).
func (hc *h1conn) spliceTo(rf io.ReaderFrom, left int64) (n int64, rerr, werr error) {
	tc, ok := hc.c.(*net.TCPConn)
	if !ok {
		return 0, nil, nil // not reached: the synchronous path dials TCP
	}
	lr := &io.LimitedReader{R: tc, N: left}
	for {
		k, err := rf.ReadFrom(lr)
		n += k
		if err != nil && hc.lazy != nil && http1.IsTimeout(err) {
			hc.slowBody() // the body stalled: see bodyReader
			continue
		}
		switch {
		case lr.N == 0:
			hc.body.eof = true
			return n, nil, nil
		case err == nil:
			return n, io.ErrUnexpectedEOF, nil // the upstream closed early
		case hc.broken():
			return n, err, nil
		default:
			return n, nil, err
		}
	}
}
