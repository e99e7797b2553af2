package http1

// The upstream client's request writer. The connection pool, deadlines
// and retries of the client stay with the proxy (internal/proxy/h1.go);
// the bytes on the wire are written and read here (and in
// client_parse.go).

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
)

var (
	// ErrInvalidHeader: a field or the Host of a request to send is not
	// valid on the wire; nothing was sent.
	ErrInvalidHeader = errors.New("invalid request header field")
	errBodyLength    = errors.New("request body shorter than its Content-Length")
)

// BodyReadError is a failure reading the body of a request being sent:
// the client's fault, not the upstream's.
type BodyReadError struct{ Err error }

func (e *BodyReadError) Error() string { return "reading request body: " + e.Err.Error() }
func (e *BodyReadError) Unwrap() error { return e.Err }

// HopHeader reports whether the canonical header key k is hop-by-hop
// (RFC 9110 section 7.6.1, plus the non-standard ones proxies drop).
func HopHeader(k string) bool {
	switch k {
	case "Connection", "Keep-Alive", "Proxy", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return strings.HasPrefix(k, "Proxy-")
}

// WriteRequest writes r's request line, header and body to bw and flushes
// it. host is the Host to send when r.Host is empty. Hop-by-hop fields are
// left out (but Te), and the body (nil for none) is framed by
// r.ContentLength when it is above 0 and chunked otherwise; buf is the
// copy buffer. A failure to read body is a *BodyReadError; a field not
// valid on the wire is ErrInvalidHeader, before anything is written.
func WriteRequest(bw *bufio.Writer, r *http.Request, host string, body io.Reader, buf []byte) error {
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	writeRequestURI(bw, r)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	if r.Host != "" {
		host = r.Host
	}
	if !httpguts.ValidHostHeader(host) {
		return ErrInvalidHeader
	}
	bw.WriteString(host)
	bw.WriteString("\r\n")
	for k, vv := range r.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		case "User-Agent":
			// As net/http: one value, none if empty.
			if len(vv) > 0 && vv[0] != "" {
				vv = vv[:1]
			} else {
				continue
			}
		case "Te":
		default:
			if HopHeader(k) {
				continue
			}
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return ErrInvalidHeader
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return ErrInvalidHeader
			}
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	switch {
	case body == nil:
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
			bw.WriteString("Content-Length: 0\r\n")
		}
	case r.ContentLength > 0:
		writeContentLength(bw, r.ContentLength)
	default:
		bw.WriteString(chunkedField)
	}
	bw.WriteString("\r\n")
	if body != nil {
		if err := writeBody(bw, body, r.ContentLength, buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// writeRequestURI writes the origin-form target as net/http.Transport
// would (URL.RequestURI), without allocating in the common case.
func writeRequestURI(bw *bufio.Writer, r *http.Request) {
	u := r.URL
	if u.Opaque != "" || u.Scheme != "" && u.Host == "" {
		bw.WriteString(u.RequestURI())
		return
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	bw.WriteString(path)
	if u.ForceQuery || u.RawQuery != "" {
		bw.WriteByte('?')
		bw.WriteString(u.RawQuery)
	}
}

// writeBody copies a request body: exactly n bytes if n > 0, chunked
// otherwise.
func writeBody(bw *bufio.Writer, body io.Reader, n int64, buf []byte) error {
	chunked := n <= 0
	var sent int64
	for {
		if !chunked && int64(len(buf)) > n-sent {
			buf = buf[:n-sent]
		}
		nr, rerr := 0, error(nil)
		if len(buf) > 0 {
			nr, rerr = body.Read(buf)
		} else {
			rerr = io.EOF
		}
		if nr > 0 {
			sent += int64(nr)
			if chunked {
				if err := writeChunk(bw, buf[:nr]); err != nil {
					return err
				}
				// A body of unknown length may be a stream: send each
				// piece now, as net/http.Transport does.
				if err := bw.Flush(); err != nil {
					return err
				}
			} else if _, err := bw.Write(buf[:nr]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return &BodyReadError{Err: rerr}
		}
	}
	if chunked {
		bw.WriteString(lastChunk)
		_, err := bw.WriteString("\r\n")
		return err
	}
	if sent < n {
		return &BodyReadError{Err: errBodyLength}
	}
	return nil
}
