// sluice's changes to the forked server (see NOTICE).

package h2server

// Roomy is implemented by a connection below the server whose Write only
// copies until a bound (sluice's h2.Conn): Room reports whether n more
// bytes would be taken without waiting. The server writes a frame it
// cannot size in advance (response headers) and its flushes on its own
// goroutine when the connection has room for them, where the original
// starts a goroutine per such write so that a client that reads nothing
// cannot block the server's loop.
type Roomy interface {
	Room(n int) bool
}

// writesWithoutBlocking reports whether w can be written on the serve
// goroutine: the connection has room for what is buffered and all that
// w can add.
func (sc *serverConn) writesWithoutBlocking(w writeFramer) bool {
	r, ok := sc.conn.(Roomy)
	if !ok {
		return false
	}
	var n int
	switch w := w.(type) {
	case flushFrameWriter:
	case *writeResHeaders:
		n = w.sizeBound()
	default:
		return false
	}
	buffered := bufWriterPoolBufferSize - sc.bw.Available()
	return r.Room(buffered + n)
}

// sizeBound is at least the bytes writeFrame writes: an HPACK field
// takes at most its name and value and 16 bytes (a representation byte
// and two length prefixes of at most 5 bytes each, Huffman coding only
// where shorter), a frame header comes with every 16 KiB (the least
// SETTINGS_MAX_FRAME_SIZE) of the block.
func (w *writeResHeaders) sizeBound() int {
	const field = 16
	n := len(":status") + 3 + field
	n += len("content-type") + len(w.contentType) + field
	n += len("content-length") + len(w.contentLength) + field
	n += len("date") + len(w.date) + field
	for k, vv := range w.h {
		for _, v := range vv {
			n += len(k) + len(v) + field
		}
	}
	return n + (n/minMaxFrameSize+1)*frameHeaderLen
}

// allowDuplicateSettings: RFC 9113, section 6.5.3, has a SETTINGS frame's
// values processed in the order they appear, repeated identifiers
// included; upstream hangs up on a frame that repeats one (h2spec 6.5.3/1
// fails). The fork keeps upstream's bound of 100 values a frame, and
// internal/h2's frame guard bounds how many SETTINGS frames a client
// sends, so a repeated value costs no more than another.
const allowDuplicateSettings = true

// malformedRequest answers a request with a connection-specific header
// field or a TE field other than "trailers": RFC 9113, section 8.2.2,
// makes it malformed, and section 8.1.1 a stream error of type
// PROTOCOL_ERROR (h2spec 8.1.2.2); upstream runs a handler that answers
// 400. The stream is reset as for the other malformed requests, before
// a handler runs.
func (sc *serverConn) malformedRequest(st *stream) error {
	return sc.countError("bad_conn_header", streamError(st.id, ErrCodeProtocol))
}
