package http1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// ResponseReader is the upstream client's parser of response headers. It
// keeps the Response, header map, the value slices and body of the last
// response it parsed for the next one: a response lives only until the
// caller is done with its body, and the header's value slices too (copy
// them to keep them; the strings stay valid). The zero value is ready
// for use.
type ResponseReader struct {
	res http.Response
	hdr http.Header
	// vals holds the header's values, as the map's value slices do.
	vals []string
	lim  limitedBody
}

// Parse reads the common upstream response (HTTP/1.1, a final status with
// a body, exactly one Content-Length, no Transfer-Encoding, Trailer or
// Pragma field, CRLF line ends, no folded lines) from the header already
// buffered in br, into rr's reused Response, header map and values: one
// allocation (the header's text) instead of http.ReadResponse's dozen.
// It reports false, having consumed nothing, for every other response,
// which http.ReadResponse then reads; a differential fuzz test
// (FuzzParseResponse) holds the two to the same result.
func (rr *ResponseReader) Parse(br *bufio.Reader, req *http.Request) (*http.Response, bool) {
	if req.Method == http.MethodHead {
		return nil, false
	}
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		return nil, false
	}
	head := buf[:end+2] // every line with its CRLF
	// Status line: "HTTP/1.1 ddd[ reason]".
	nl := bytes.IndexByte(head, '\n')
	line := head[:nl]
	if len(line) < len("HTTP/1.1 200\r") || !bytes.HasPrefix(line, http11sp) || line[len(line)-1] != '\r' {
		return nil, false
	}
	line = line[:len(line)-1]
	code, ok := statusCode(line[len(http11sp):])
	if !ok || code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil, false
	}
	if len(line) > len(http11sp)+3 && line[len(http11sp)+3] != ' ' {
		return nil, false
	}
	for _, c := range line {
		if c < ' ' && c != '\t' || c == 0x7f {
			return nil, false
		}
	}
	fields := head[nl+1:]

	// Check every field before allocating.
	n, cls := 0, 0
	for rest := fields; len(rest) > 0; n++ {
		i := bytes.IndexByte(rest, '\n')
		l := rest[:i]
		rest = rest[i+1:]
		if len(l) < 2 || l[len(l)-1] != '\r' {
			return nil, false
		}
		l = l[:len(l)-1]
		k, v, ok := bytes.Cut(l, colon)
		if !ok || len(k) == 0 {
			return nil, false
		}
		for _, c := range k {
			if !httpguts.IsTokenRune(rune(c)) {
				return nil, false
			}
		}
		for _, c := range v {
			if c < ' ' && c != '\t' || c == 0x7f || c == '\r' {
				return nil, false
			}
		}
		switch {
		case asciiEqualFold(k, "Content-Length"):
			cls++
			if _, ok := contentLength(textproto.TrimBytes(v)); !ok {
				return nil, false
			}
		case asciiEqualFold(k, "Transfer-Encoding"), asciiEqualFold(k, "Trailer"), asciiEqualFold(k, "Pragma"):
			// Chunked bodies and trailers; Pragma: no-cache, which
			// http.ReadResponse turns into a Cache-Control field.
			return nil, false
		}
	}
	if cls != 1 {
		return nil, false
	}

	// One string for the whole header: keys and values are substrings.
	hs := string(head)
	if rr.hdr == nil {
		rr.hdr = make(http.Header, n)
	} else {
		clear(rr.hdr)
	}
	h := rr.hdr
	if cap(rr.vals) < n {
		rr.vals = make([]string, n)
	}
	vals := rr.vals[:n]
	clear(vals)
	var cl int64
	pos := nl + 1
	for i := 0; i < n; i++ {
		j := pos + strings.IndexByte(hs[pos:], '\n')
		l := hs[pos : j-1] // without CRLF
		pos = j + 1
		c := strings.IndexByte(l, ':')
		// Returns a canonical key as it is, without allocating.
		key := textproto.CanonicalMIMEHeaderKey(l[:c])
		val := textproto.TrimString(l[c+1:]) // no CR or LF left to trim

		if key == "Content-Length" {
			cl, _ = contentLength([]byte(val))
		}
		if vv, ok := h[key]; ok {
			h[key] = append(vv, val)
		} else {
			vals[i] = val
			h[key] = vals[i : i+1 : i+1]
		}
	}
	br.Discard(end + 4)

	res := &rr.res
	*res = http.Response{
		Status:        hs[len(http11sp) : nl-1],
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: cl,
		Request:       req,
	}
	if conn := h["Connection"]; conn != nil && httpguts.HeaderValuesContainsToken(conn, "close") {
		res.Close = true
		delete(h, "Connection") // as http.ReadResponse does
	}
	if cl == 0 {
		res.Body = http.NoBody
	} else {
		rr.lim = limitedBody{r: br, n: cl}
		res.Body = &rr.lim
	}
	return res, true
}

// statusCode parses the three digits that start b.
func statusCode(b []byte) (int, bool) {
	if len(b) < 3 {
		return 0, false
	}
	code := 0
	for _, c := range b[:3] {
		if c < '0' || c > '9' {
			return 0, false
		}
		code = code*10 + int(c-'0')
	}
	return code, code >= 100
}

// contentLength parses a Content-Length value as net/http accepts it:
// decimal digits only.
func contentLength(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// limitedBody is a response body of a known length read from the
// connection's buffer. Ending early is io.ErrUnexpectedEOF, as for
// net/http's bodies.
type limitedBody struct {
	r *bufio.Reader
	n int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if b.n == 0 {
		return n, io.EOF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *limitedBody) Close() error { return nil }

// ErrHeaderTooLarge: a response header went on past the bound of its
// HeaderLimitReader.
var ErrHeaderTooLarge = errors.New("upstream response header too large")

// HeaderLimitReader sits between an upstream connection and its
// bufio.Reader: it bounds a response header (Left, set before each header
// is read and lifted once it is) and counts the bytes read (N, reset by the
// caller for each request: none read means the upstream said nothing).
type HeaderLimitReader struct {
	R    io.Reader
	Left int64 // bytes allowed before reads fail with ErrHeaderTooLarge
	N    int64 // bytes read since the caller last reset it
}

func (r *HeaderLimitReader) Read(b []byte) (int, error) {
	if r.Left <= 0 {
		return 0, ErrHeaderTooLarge
	}
	if int64(len(b)) > r.Left {
		b = b[:r.Left]
	}
	n, err := r.R.Read(b)
	r.Left -= int64(n)
	r.N += int64(n)
	return n, err
}

// HeaderBuffered reports whether br holds a whole response header (up to
// the empty line), so that parsing it reads nothing from the connection.
func HeaderBuffered(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	return bytes.Contains(b, lfcrlf) || bytes.Contains(b, lflf)
}
