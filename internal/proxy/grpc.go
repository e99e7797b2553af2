package proxy

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// gRPC status codes the proxy answers with
// (https://grpc.github.io/grpc/core/md_doc_statuscodes.html).
const (
	grpcDeadlineExceeded = 4
	grpcUnimplemented    = 12
	grpcInternal         = 13
	grpcUnavailable      = 14
)

// isGRPC reports a gRPC request: HTTP/2 with a Content-Type of
// application/grpc (or application/grpc+proto, ...).
func isGRPC(r *http.Request) bool {
	if r.ProtoMajor != 2 {
		return false
	}
	ct := r.Header["Content-Type"]
	return len(ct) > 0 && strings.HasPrefix(ct[0], "application/grpc")
}

// grpcCode maps a status the proxy would answer with to the gRPC code a
// client library expects in its place.
func grpcCode(status int) int {
	switch status {
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return grpcUnimplemented
	case http.StatusGatewayTimeout:
		return grpcDeadlineExceeded
	case http.StatusBadRequest:
		return grpcInternal
	}
	return grpcUnavailable
}

// writeAnswer writes one of the proxy's own answers: to a gRPC request a
// trailers-only response (HTTP 200, grpc-status and grpc-message in the
// header, no body), which gRPC libraries turn into a status such as
// UNAVAILABLE; to any other request the plain-text body with status. It
// returns the body bytes written.
func (p *Proxy) writeAnswer(w http.ResponseWriter, r *http.Request, status int, body []byte) int {
	if !isGRPC(r) {
		return writePlain(w, status, body)
	}
	h := w.Header()
	h["Content-Type"] = valGRPC
	h["Grpc-Status"] = []string{strconv.Itoa(grpcCode(status))}
	h["Grpc-Message"] = []string{grpcMessage(body)}
	w.WriteHeader(http.StatusOK)
	return 0
}

var valGRPC = []string{"application/grpc"}

// grpcMessage percent-encodes msg as grpc-message requires (the proxy's
// messages are ASCII; the trailing newline goes).
func grpcMessage(msg []byte) string {
	s := strings.TrimSpace(string(msg))
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c > '~' || c == '%' {
			b.WriteString("%" + strconv.FormatUint(uint64(c)>>4, 16) + strconv.FormatUint(uint64(c)&15, 16))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// trailersOnly reports an upstream gRPC response that carries its status
// in the header and has no body: it must reach the client as one HEADERS
// frame ending the stream, so it is not flushed early.
func trailersOnly(res *http.Response) bool {
	return res.ProtoMajor == 2 && res.Header["Grpc-Status"] != nil
}

// grpcTimeout parses a grpc-timeout header value: 1 to 8 digits and a unit
// (H, M, S, m, u, n). ok is false for anything else.
func grpcTimeout(v string) (d time.Duration, ok bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseUint(v[:len(v)-1], 10, 32)
	if err != nil || v[0] == '+' {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	if n > uint64(math.MaxInt64/unit) {
		return math.MaxInt64, true // 99999999H is longer than a Duration holds
	}
	return time.Duration(n) * unit, true
}

// grpcDeadlinePassed reports a gRPC request whose grpc-timeout, counted
// from start, has run out: an upstream that reset its stream then did so
// because of the deadline, and the client is owed DEADLINE_EXCEEDED.
func grpcDeadlinePassed(r *http.Request, start time.Time) bool {
	v := r.Header["Grpc-Timeout"]
	if len(v) == 0 {
		return false
	}
	d, ok := grpcTimeout(v[0])
	return ok && time.Since(start) >= d
}
