package http1

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// The loop's own parser of the common request header. http.ReadRequest
// costs about ten allocations per request (the Request, the request line,
// the URL, the header map, a string per field); parseHead builds the same
// Request from one copy of the header, in the exchange's own Request, URL
// and room for field values, and hands everything it is not sure of to
// http.ReadRequest. A fuzz test (FuzzParseHead) holds it to
// http.ReadRequest and the server's checks on every input it accepts.

// maxInlineFields is how many field values the exchange holds without an
// allocation of their own.
const maxInlineFields = 8

// extraFields is the room the header map is made with beyond the
// request's own fields: a proxy adds its X-Forwarded-* fields, and a map
// that has to grow costs more than one made big enough.
const extraFields = 4

// parseHead parses head, a request header as scanHead delimited it (an
// HTTP/1.1 request for a path, nothing to hand off), into x.req when it
// is the common kind: a request line "METHOD /target HTTP/1.1", lines
// ending in CRLF, no folded lines, valid field names and values, exactly
// one valid Host field, at most one valid Content-Length field, no
// Pragma, not CONNECT. The body, if any, is read from br. It reports
// false for anything else, and then leaves x.req to the caller:
// http.ReadRequest reads the request, with net/http's errors.
func parseHead(head []byte, x *exchange, br *bufio.Reader) bool {
	lines := bytes.Count(head, lineEnd) // request line, fields, empty line
	if lines < 3 || !bytes.HasSuffix(head, lineEnd) {
		return false
	}
	// One string for the whole header: every part of the request is a
	// substring of it.
	hs := string(head)
	nl := strings.IndexByte(hs, '\n')
	if nl < 1 || hs[nl-1] != '\r' {
		return false
	}
	method, target, ok := requestLine(hs[:nl-1])
	if !ok || !x.parseTarget(target) {
		return false
	}

	n := lines - 2
	vals := x.vals[:]
	if n > len(vals) {
		vals = make([]string, n)
	}
	h := x.header(n + extraFields)
	var host, cl string
	hosts, cls := 0, 0
	pos := nl + 1
	for {
		i := strings.IndexByte(hs[pos:], '\n')
		if i < 1 || hs[pos+i-1] != '\r' {
			return false // a bare LF
		}
		l := hs[pos : pos+i-1]
		pos += i + 1
		if l == "" {
			break
		}
		key, val, ok := field(l)
		if !ok {
			return false
		}
		switch key {
		case "Host":
			hosts++
			host = val
			continue // http.ReadRequest takes it out of the header
		case "Content-Length":
			cls++
			cl = val
		case "Pragma", "Transfer-Encoding", "Upgrade", "Expect":
			// Pragma: no-cache adds a Cache-Control field; the others
			// scanHead hands off.
			return false
		}
		if vv, ok := h[key]; ok {
			h[key] = append(vv, val)
		} else {
			vals[0] = val
			h[key] = vals[:1:1]
			vals = vals[1:]
		}
	}
	if pos != len(hs) || hosts != 1 || cls > 1 || !httpguts.ValidHostHeader(host) {
		return false
	}
	length := int64(0)
	if cls == 1 {
		if length, ok = decimal(cl); !ok {
			return false
		}
	}

	r := &x.req
	*r = *r.WithContext(&x.ctx)
	r.Method = method
	r.URL = &x.url
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	r.Header = h
	r.Host = host
	r.RequestURI = target
	r.ContentLength = length
	r.Close = httpguts.HeaderValuesContainsToken(h["Connection"], "close")
	if length > 0 {
		x.lim = limitedBody{r: br, n: length}
		r.Body = &x.lim
	} else {
		r.Body = http.NoBody
	}
	return true
}

var lineEnd = []byte("\r\n")

// decimal parses a Content-Length value as net/http accepts it (decimal
// digits only); longer values than any real length are left to net/http.
func decimal(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// requestLine splits a request line (without its CRLF) as net/http does,
// and reports whether it is one parseHead takes: a valid method other
// than CONNECT, a target without control bytes that starts with "/", and
// HTTP/1.1.
func requestLine(l string) (method, target string, ok bool) {
	method, rest, ok1 := strings.Cut(l, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || proto != "HTTP/1.1" || method == http.MethodConnect ||
		!httpguts.ValidHeaderFieldName(method) || target == "" || target[0] != '/' {
		return "", "", false
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c < ' ' || c == 0x7f {
			return "", "", false
		}
	}
	return method, target, true
}

// parseTarget sets x.url to the target as url.ParseRequestURI parses it:
// by hand for a path that needs no escaping, by url.ParseRequestURI
// otherwise. It reports false if the target does not parse.
func (x *exchange) parseTarget(target string) bool {
	u := &x.url
	*u = url.URL{}
	path := target
	if strings.HasSuffix(target, "?") && strings.Count(target, "?") == 1 {
		u.ForceQuery = true
		path = target[:len(target)-1]
	} else {
		path, u.RawQuery, _ = strings.Cut(target, "?")
	}
	for i := 0; i < len(path); i++ {
		if !plainPathByte[path[i]] {
			p, err := url.ParseRequestURI(target)
			if err != nil {
				return false
			}
			*u = *p
			return true
		}
	}
	u.Path = path
	return true
}

// plainPathByte: the bytes url.URL's path escaping leaves as they are
// (letters, digits, "-._~" and "$&+,/:;=@"). A path of these alone is its
// own unescaped form, with no RawPath.
var plainPathByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("-._~$&+,/:;=@", byte(c)) >= 0
	}
	return t
}()

// field splits a field line (without its CRLF) into its canonical name
// and its value without the blanks around it, as net/textproto does, and
// reports whether the line is one parseHead takes: a token before the
// colon, and only visible characters, blanks and obs-text after it.
func field(l string) (key, val string, ok bool) {
	k, v, ok := strings.Cut(l, ":")
	if !ok || k == "" {
		return "", "", false
	}
	for i := 0; i < len(k); i++ {
		if !httpguts.IsTokenRune(rune(k[i])) {
			return "", "", false
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return "", "", false
		}
	}
	// A canonical name comes back as it is, without an allocation.
	return textproto.CanonicalMIMEHeaderKey(k), strings.Trim(v, " \t"), true
}
