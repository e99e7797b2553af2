package http1

import (
	"io"
	"net/http"
)

var _ io.ReaderFrom = (*response)(nil)

// ReadFrom copies src to the response body. A body of known length
// (Content-Length) on a connection that can take it directly (a plain
// TCP connection: io.ReaderFrom) goes there once the header is out, with
// nothing buffered in between: from a TCP connection, net.TCPConn.ReadFrom
// moves it with splice(2), without copying it through user space (as
// net/http's response does). Everything else is written as Write writes it.
func (w *response) ReadFrom(src io.Reader) (int64, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	rf, ok := w.x.c.nc.(io.ReaderFrom)
	if !ok || w.cl < 0 || w.head || w.chunked || !bodyAllowedForStatus(w.status) || w.err != nil {
		return io.Copy(writerOnly{w}, src)
	}
	if !w.sentHeader {
		w.endHeader(false)
	}
	w.flush()
	if w.err != nil {
		return 0, w.err
	}
	// Never more than announced: the rest would be the next response.
	lr := &io.LimitedReader{R: src, N: w.cl - w.written}
	if lr.N == 0 {
		return 0, nil
	}
	if l, ok := src.(*io.LimitedReader); ok && l.N <= lr.N {
		lr = l // keeps the splice: net.TCPConn.ReadFrom takes one LimitedReader
	}
	// An error is not kept in w.err: it may be the source's (a read
	// deadline the caller deals with, then calls again); a body cut short
	// closes the connection anyway (finish).
	n, err := rf.ReadFrom(lr)
	w.written += n
	return n, err
}

// writerOnly hides a writer's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }
