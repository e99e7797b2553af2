package http1

// What the server loop and the upstream client share of the wire: byte
// literals, case folding, body framing and the timeout test.

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
)

var (
	crlfcrlf = []byte("\r\n\r\n")
	lfcrlf   = []byte("\n\r\n")
	lflf     = []byte("\n\n")
	http11   = []byte(" HTTP/1.1") // ends a request line
	http11sp = []byte("HTTP/1.1 ") // starts a status line
	colon    = []byte(":")
	space    = []byte(" ")
)

// asciiEqualFold reports whether a equals b, ASCII letters compared
// without regard to case: how HTTP compares field names and tokens
// (net/textproto and net/http fold ASCII only; a Unicode fold would make
// "ſ" an "s").
func asciiEqualFold[T ~string | ~[]byte](a T, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c, d := a[i], b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// writeChunk writes p as one chunk of a chunked body. It reports a failed
// write of p; a failure after it sticks to bw and shows on its next write
// or flush.
func writeChunk(bw *bufio.Writer, p []byte) error {
	bw.Write(strconv.AppendUint(bw.AvailableBuffer(), uint64(len(p)), 16))
	bw.WriteString("\r\n")
	if _, err := bw.Write(p); err != nil {
		return err
	}
	bw.WriteString("\r\n")
	return nil
}

// writeContentLength writes the Content-Length field line for n.
func writeContentLength(bw *bufio.Writer, n int64) {
	bw.WriteString("Content-Length: ")
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), n, 10))
	bw.WriteString("\r\n")
}

const (
	chunkedField = "Transfer-Encoding: chunked\r\n"
	lastChunk    = "0\r\n" // trailers and an empty line follow
)

// IsTimeout reports whether err is a timeout: a deadline of the
// connection (os.ErrDeadlineExceeded, or any net.Error that says so) or of
// a context, anywhere in err's chain. (The server loop's own copy once
// asked only the first net.Error in the chain, which misses a context
// deadline wrapped by an error that is no timeout itself.)
func IsTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
