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

// lastDataOfHandler reports whether wr, sent by a handler, is its
// response's last DATA frame. writeChunk sends a DATA frame with
// END_STREAM only once the handler returned, and runHandler then sends
// no handlerDoneMsg: the serve loop counts the handler done when it
// takes this frame, one message per response fewer. Call it before wr
// is written: once it is, the handler reuses wr.write.
func lastDataOfHandler(wr FrameWriteRequest) bool {
	wd, ok := wr.write.(*writeData)
	return ok && wd.endStream
}

// readAhead is how many frames the frame reader may read ahead of the
// serve loop, of those that keep nothing of the framer's read buffer
// (retainsReadBuffer). Upstream reads one frame, hands it over and waits
// until the loop processed it (the framer reuses its buffer), two
// goroutine switches per frame: a client's burst of HEADERS frames in one
// TLS record now reaches the loop in one switch.
const readAhead = 8

// noGate is readMore for a frame the reader did not wait for.
func noGate() {}

// readerWaits reports whether the frame reader waits for the serve loop
// to be done with what it read (f, or the error) before it reads on.
// When it does not, the framer forgets f: its next ReadFrame would mark
// f invalid, a write to f's header while the loop reads it.
func (sc *serverConn) readerWaits(f Frame, err error) bool {
	if err != nil || retainsReadBuffer(f) {
		return true
	}
	sc.framer.lastFrame = nil
	return false
}

// retainsReadBuffer reports whether f refers to the framer's read
// buffer, which the next ReadFrame overwrites: DATA, SETTINGS, GOAWAY
// and unknown frames do, and so the reader waits for the loop to be done
// with them, as upstream does for every frame. The others hold values
// (a decoded header block's fields are strings of their own; a PING's
// data is an array).
func retainsReadBuffer(f Frame) bool {
	switch f.(type) {
	case *MetaHeadersFrame, *WindowUpdateFrame, *RSTStreamFrame, *PingFrame, *PriorityFrame, *PriorityUpdateFrame:
		return false
	}
	return true
}

// withLastData reports whether the response's header frame goes to the
// serve loop in one message with its last DATA frame: when the handler
// returned with a body of n bytes still buffered and no trailers, the
// DATA frame that follows is the last (it ends the stream), and upstream's
// two messages to the loop (the header frame, the DATA frame) become
// one. The header frame is the writer's snapshot, which nothing changes.
func (rws *responseWriterState) withLastData(n int, endStream bool) bool {
	return rws.handlerDone && n > 0 && !endStream && !rws.hasTrailers()
}

// writeHeaderFirst queues the header frame that came with wr (a
// handler's last DATA frame; see withLastData) before wr. It is written
// when wr is queued: the two frames go out with one flush.
func (sc *serverConn) writeHeaderFirst(wr FrameWriteRequest) {
	wd, ok := wr.write.(*writeData)
	if !ok || wd.hdr == nil {
		return
	}
	hdr := wd.hdr
	wd.hdr = nil
	sc.inFrameScheduleLoop = true // writeFrame only queues
	sc.writeFrame(FrameWriteRequest{write: hdr, stream: wr.stream})
	sc.inFrameScheduleLoop = false
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
