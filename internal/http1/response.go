package http1

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// bufferBeforeChunking is how much of a body of unknown length is held
// back in the hope the handler ends and the response can carry a
// Content-Length instead of chunks; net/http's size.
const bufferBeforeChunking = 2048

// response is the http.ResponseWriter of the loop. It follows net/http's
// framing: a handler's Content-Length is used and enforced; a body of
// unknown length is sent with Content-Length if the handler ends within
// the first 2 KiB without flushing, chunked otherwise; HEAD responses and
// statuses without a body carry none. Unlike net/http it does not sniff a
// missing Content-Type (a proxy passes the upstream's answer on as it is).
type response struct {
	x      *exchange
	req    *http.Request
	bw     *bufio.Writer // lent while the response is written
	header http.Header

	status      int
	wroteHeader bool  // WriteHeader done (logically)
	sentHeader  bool  // header written to bw
	cl          int64 // Content-Length, -1 if unknown
	written     int64 // body bytes accepted
	chunked     bool
	head        bool
	closeAfter  bool
	pending     []byte // body held back before the header is sent
	err         error  // a write to the connection failed
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
	if v := h["Content-Length"]; len(v) > 0 {
		if n, err := strconv.ParseInt(v[0], 10, 64); err == nil && n >= 0 {
			w.cl = n
		} else {
			delete(h, "Content-Length")
		}
	}
	if httpguts.HeaderValuesContainsToken(h["Connection"], "close") {
		w.closeAfter = true
	}
	if !w.bodyAllowed() || w.cl >= 0 || len(h["Trailer"]) > 0 {
		w.sendHeader()
	}
}

// bodyAllowed reports whether the response has a body on the wire.
func (w *response) bodyAllowed() bool {
	return !w.head && bodyAllowedForStatus(w.status)
}

func bodyAllowedForStatus(code int) bool {
	return code >= 200 && code != http.StatusNoContent && code != http.StatusNotModified
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.head {
		return len(p), nil // as net/http: HEAD bodies are dropped
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.cl >= 0 && w.written+int64(len(p)) > w.cl {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.sentHeader {
		if len(w.pending)+len(p) <= bufferBeforeChunking {
			if w.pending == nil {
				w.pending = make([]byte, 0, bufferBeforeChunking)
			}
			w.pending = append(w.pending, p...)
			return len(p), nil
		}
		w.sendHeader()
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
	bw := w.bw
	if w.chunked {
		bw.Write(strconv.AppendUint(bw.AvailableBuffer(), uint64(len(p)), 16))
		bw.WriteString("\r\n")
	}
	if _, err := bw.Write(p); err != nil {
		w.err = err
		return
	}
	if w.chunked {
		bw.WriteString("\r\n")
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
		w.sendHeader()
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

// sendHeader writes the status line and header to the write buffer,
// deciding the framing: Content-Length when known, chunked otherwise.
// Held-back body bytes follow.
func (w *response) sendHeader() {
	w.sentHeader = true
	bw := w.writer()
	h := w.header
	writeStatusLine(bw, w.status)
	w.writeFields(bw, h, true)
	if _, ok := h["Date"]; !ok {
		bw.Write(w.x.c.s.dateHeader(time.Now()))
	}
	switch {
	case w.cl >= 0:
		if w.status != http.StatusNoContent && w.status >= 200 {
			bw.WriteString("Content-Length: ")
			bw.Write(strconv.AppendInt(bw.AvailableBuffer(), w.cl, 10))
			bw.WriteString("\r\n")
		}
	case w.bodyAllowed():
		w.chunked = true
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if w.closeAfter && !httpguts.HeaderValuesContainsToken(h["Connection"], "close") {
		bw.WriteString("Connection: close\r\n")
	}
	bw.WriteString("\r\n")
	if len(w.pending) > 0 {
		w.writeBody(w.pending)
		w.pending = w.pending[:0]
	}
}

// writeFields writes h's fields, without the ones the framing decides
// (final is false for a 1xx response, which never has a Trailer field). Invalid field names
// are dropped and line breaks in values become spaces, as net/http does.
func (w *response) writeFields(bw *bufio.Writer, h http.Header, final bool) {
	for k, vv := range h {
		switch k {
		case "Content-Length", "Transfer-Encoding":
			continue
		case "Trailer":
			if !final || !w.bodyAllowed() || w.cl >= 0 {
				continue
			}
		}
		if strings.HasPrefix(k, http.TrailerPrefix) || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vv {
			bw.WriteString(k)
			bw.WriteString(": ")
			writeValue(bw, v)
			bw.WriteString("\r\n")
		}
	}
}

// writeValue writes v with CR and LF replaced by spaces and surrounding
// spaces trimmed.
func writeValue(bw *bufio.Writer, v string) {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	bw.WriteString(strings.TrimSpace(v))
}

// finish completes the response once the handler has returned: the
// header if not yet sent (with a Content-Length for a short body), the
// last chunk and trailers, then a flush. It gives the write buffer back.
func (w *response) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sentHeader {
		if w.bodyAllowed() {
			w.cl = int64(len(w.pending))
		}
		w.sendHeader()
	}
	if w.chunked && w.err == nil {
		w.bw.WriteString("0\r\n")
		w.writeTrailers()
		w.bw.WriteString("\r\n")
	}
	if w.bodyAllowed() && w.cl >= 0 && w.written != w.cl {
		// The body is shorter than announced: the client can only tell
		// by the connection closing.
		w.closeAfter = true
	}
	w.flush()
	w.release()
}

// abort ends a response the handler gave up on (panic, including
// http.ErrAbortHandler): what is buffered is sent, without the end of a
// chunked body, and the connection closes.
func (w *response) abort() {
	w.flush()
	w.release()
}

func (w *response) release() {
	if w.bw != nil {
		w.bw.Reset(nil)
		w.x.c.s.bws.Put(w.bw)
		w.bw = nil
	}
}

// writeTrailers writes the trailer fields: those declared in the Trailer
// header and set in the header map after the body, and those set with
// http.TrailerPrefix.
func (w *response) writeTrailers() {
	h := w.header
	for _, decl := range h["Trailer"] {
		for _, k := range strings.Split(decl, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			if !httpguts.ValidHeaderFieldName(k) {
				continue
			}
			switch k {
			case "Content-Length", "Transfer-Encoding", "Trailer":
				continue
			}
			for _, v := range h[k] {
				w.bw.WriteString(k)
				w.bw.WriteString(": ")
				writeValue(w.bw, v)
				w.bw.WriteString("\r\n")
			}
		}
	}
	for k, vv := range h {
		if !strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		k = k[len(http.TrailerPrefix):]
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vv {
			w.bw.WriteString(k)
			w.bw.WriteString(": ")
			writeValue(w.bw, v)
			w.bw.WriteString("\r\n")
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
