package http1

import (
	"bufio"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// bufferBeforeChunking is how much of a body of unknown length is held
// back in the hope the handler ends and the response can carry a
// Content-Length instead of chunks; net/http's size.
const bufferBeforeChunking = 2048

// response is the http.ResponseWriter of the loop. It frames a response
// as net/http does: a handler's Content-Length is used and enforced; a
// body of unknown length is sent with Content-Length if the handler ends
// within the first 2 KiB without flushing (for HEAD too, with the length
// of what it wrote), chunked otherwise, and always chunked with trailers;
// HEAD responses and statuses without a body carry none. Unlike net/http
// it does not sniff a missing Content-Type (a proxy passes the
// upstream's answer on as it is), and it frames the body itself whatever
// Transfer-Encoding field the handler sets.
type response struct {
	x      *exchange
	req    *http.Request
	bw     *bufio.Writer // lent while the response is written
	header http.Header

	status      int
	wroteHeader bool  // WriteHeader done (logically)
	sentHeader  bool  // header written to bw
	cl          int64 // Content-Length, -1 if unknown
	written     int64 // body bytes the handler wrote (refused ones too, as net/http counts)
	chunked     bool
	// noLength: the handler set a Content-Length field that is not a
	// length; net/http then never computes one, and chunks.
	noLength bool
	// trailers: the header declares trailers or has prefixed ones.
	trailers bool
	// connection is the handler's Connection field, written last.
	connection []string
	head       bool
	closeAfter bool
	// tooBig: the handler left more of the request body than is read to
	// keep the connection.
	tooBig  bool
	pending []byte // body held back before the header is sent
	err     error  // a write to the connection failed
}

var (
	_ http.ResponseWriter = (*response)(nil)
	_ http.Flusher        = (*response)(nil)
)

func (w *response) Header() http.Header {
	if w.header == nil {
		w.header = make(http.Header, 8)
	}
	return w.header
}

func (w *response) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if w.wroteHeader {
		return
	}
	h := w.Header()
	if code < 200 && code != http.StatusSwitchingProtocols {
		// Informational: sent at once, the final response follows.
		bw := w.writer()
		writeStatusLine(bw, code)
		w.writeFields(bw, h, false)
		bw.WriteString("\r\n")
		w.flush()
		return
	}
	w.wroteHeader = true
	w.status = code
	if v, ok := h["Content-Length"]; ok {
		if n, err := strconv.ParseInt(get(v), 10, 64); err == nil && n >= 0 {
			w.cl = n
		} else {
			delete(h, "Content-Length")
			w.noLength = true
		}
	}
	w.connection = h["Connection"]
	if httpguts.HeaderValuesContainsToken(w.connection, "close") {
		w.closeAfter = true
	}
	// The fields go out as they are now: later changes to the header
	// map are for trailers only. The framing follows once known.
	bw := w.writer()
	writeStatusLine(bw, code)
	w.trailers = w.writeFields(bw, h, true)
	if _, ok := h["Date"]; !ok {
		bw.Write(w.x.c.s.dateHeader(time.Now()))
	}
}

// get is the first of a field's values, as http.Header.Get.
func get(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func bodyAllowedForStatus(code int) bool {
	return code >= 200 && code != http.StatusNoContent && code != http.StatusNotModified
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.cl >= 0 && w.written > w.cl {
		return 0, http.ErrContentLength
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.head {
		// Dropped, as net/http does; their length may become the
		// Content-Length.
		if !w.sentHeader && w.written > bufferBeforeChunking {
			w.endHeader(false)
		}
		return len(p), nil
	}
	if !w.sentHeader {
		if w.cl < 0 && len(w.pending)+len(p) <= bufferBeforeChunking {
			if w.pending == nil {
				w.pending = make([]byte, 0, bufferBeforeChunking)
			}
			w.pending = append(w.pending, p...)
			return len(p), nil
		}
		w.endHeader(false)
	}
	w.writeBody(p)
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// writeBody writes p to the connection, as a chunk if chunked.
func (w *response) writeBody(p []byte) {
	if len(p) == 0 {
		return
	}
	var err error
	if w.chunked {
		err = writeChunk(w.bw, p)
	} else {
		_, err = w.bw.Write(p)
	}
	if err != nil {
		w.err = err
	}
}

// Flush sends the header and what is buffered.
func (w *response) Flush() { w.FlushError() }

// FlushError is Flush reporting a failed write (http.ResponseController
// uses it).
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sentHeader {
		w.endHeader(false)
	}
	w.flush()
	return w.err
}

func (w *response) writer() *bufio.Writer {
	if w.bw == nil {
		c := w.x.c
		w.bw = c.s.bws.Get().(*bufio.Writer)
		w.bw.Reset(c.nc)
	}
	return w.bw
}

func (w *response) flush() {
	if w.bw != nil && w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.err = err
		}
	}
}

// endHeader completes the header WriteHeader began in the write buffer,
// deciding the framing as net/http does: the handler's Content-Length if
// it set one; once the handler is done (done), the length of its body
// unless it has trailers; chunked otherwise. Held-back body bytes follow.
func (w *response) endHeader(done bool) {
	w.sentHeader = true
	// As net/http: a server shutting down closes after the response, and
	// says so whatever the handler's Connection field.
	shutdown := w.x.c.s.shutdown.Load()
	w.closeAfter = w.closeAfter || shutdown
	if !w.closeAfter {
		w.closeAfter, w.tooBig = w.x.body.settle()
	}
	bw := w.bw
	switch {
	case !bodyAllowedForStatus(w.status):
	case w.cl < 0 && done && !w.trailers && !w.noLength && (!w.head || w.written > 0):
		w.cl = w.written
		fallthrough
	case w.cl >= 0:
		writeContentLength(bw, w.cl)
	case !w.head:
		w.chunked = true
		bw.WriteString(chunkedField)
	}
	// Closing: the handler's Connection field gives way to "close",
	// except on a protocol switch.
	if w.closeAfter && (w.tooBig || shutdown || !httpguts.HeaderValuesContainsToken(w.connection, "close")) &&
		!(w.status == http.StatusSwitchingProtocols && w.header.Get("Upgrade") != "" &&
			httpguts.HeaderValuesContainsToken(w.connection, "Upgrade")) {
		bw.WriteString("Connection: close\r\n")
	} else {
		for _, v := range w.connection {
			bw.WriteString("Connection: ")
			writeValue(bw, v)
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("\r\n")
	if len(w.pending) > 0 {
		w.writeBody(w.pending)
		w.pending = w.pending[:0]
	}
}

// writeFields writes h's fields but the ones the framing decides, as
// net/http does: invalid field names are dropped, and line breaks in
// values become spaces. Of a final header (final), it also leaves out
// Content-Type on a 304 and Connection (written with the framing); it
// reports whether the response has trailers (declared or prefixed).
func (w *response) writeFields(bw *bufio.Writer, h http.Header, final bool) (trailers bool) {
	for k, vv := range h {
		switch k {
		case "Content-Length", "Transfer-Encoding":
			continue
		case "Trailer":
			trailers = trailers || len(vv) > 0
		case "Content-Type":
			if final && w.status == http.StatusNotModified {
				continue
			}
		case "Connection":
			if final {
				continue
			}
		}
		if strings.HasPrefix(k, http.TrailerPrefix) {
			trailers = true
			continue
		}
		writeField(bw, k, vv)
	}
	return trailers && final
}

// writeField writes the lines of field k, unless k is not a valid field
// name (net/http drops those).
func writeField(bw *bufio.Writer, k string, vv []string) {
	if !httpguts.ValidHeaderFieldName(k) {
		return
	}
	for _, v := range vv {
		bw.WriteString(k)
		bw.WriteString(": ")
		writeValue(bw, v)
		bw.WriteString("\r\n")
	}
}

var lineBreaks = strings.NewReplacer("\r", " ", "\n", " ")

// writeValue writes v with CR and LF replaced by spaces and surrounding
// ASCII spaces and tabs trimmed, as net/http writes a field value.
func writeValue(bw *bufio.Writer, v string) {
	if strings.ContainsAny(v, "\r\n") {
		v = lineBreaks.Replace(v)
	}
	bw.WriteString(textproto.TrimString(v))
}

// finish completes the response once the handler has returned: the
// header if not yet sent (with a Content-Length for a short body), the
// last chunk and trailers, then a flush. It gives the write buffer back.
func (w *response) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sentHeader {
		w.endHeader(true)
	}
	if w.chunked && w.err == nil {
		w.bw.WriteString(lastChunk)
		w.writeTrailers()
		w.bw.WriteString("\r\n")
	}
	if !w.head && bodyAllowedForStatus(w.status) && w.cl >= 0 && w.written != w.cl {
		// The body is not the length announced: the client can only
		// tell by the connection closing.
		w.closeAfter = true
	}
	w.flush()
	w.release()
}

// abort ends a response the handler gave up on (panic, including
// http.ErrAbortHandler): what is buffered of a sent header and body goes
// out, without the end of a chunked body, and the connection closes. A
// header not complete yet is dropped.
func (w *response) abort() {
	if w.sentHeader {
		w.flush()
	}
	w.release()
}

func (w *response) release() {
	if w.bw != nil {
		w.bw.Reset(nil)
		w.x.c.s.bws.Put(w.bw)
		w.bw = nil
	}
}

// writeTrailers writes the trailer fields as net/http does: those set
// with http.TrailerPrefix, and those declared in the Trailer field (if
// allowed in a trailer) with their values in the header map.
func (w *response) writeTrailers() {
	h := w.header
	for k, vv := range h {
		if k, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			writeField(w.bw, k, vv)
		}
	}
	for _, decl := range h["Trailer"] {
		for k := range strings.SplitSeq(decl, ",") {
			k = http.CanonicalHeaderKey(textproto.TrimString(k))
			if k != "" && httpguts.ValidTrailerHeader(k) {
				writeField(w.bw, k, h[k])
			}
		}
	}
}

// statusLines are the status lines of the codes with a text.
var statusLines = func() map[int]string {
	m := map[int]string{}
	for code := 100; code < 600; code++ {
		if t := http.StatusText(code); t != "" {
			m[code] = "HTTP/1.1 " + strconv.Itoa(code) + " " + t + "\r\n"
		}
	}
	return m
}()

func writeStatusLine(bw *bufio.Writer, code int) {
	if code == http.StatusOK {
		bw.WriteString("HTTP/1.1 200 OK\r\n")
	} else if l, ok := statusLines[code]; ok {
		bw.WriteString(l)
	} else {
		fmt.Fprintf(bw, "HTTP/1.1 %03d status code %d\r\n", code, code)
	}
}
