package http1

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
)

// tcpSource returns the reading end of a TCP connection whose other end
// writes b and closes.
func tcpSource(t *testing.T, b []byte) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		close(accepted) // the listener closes after the accept, not before
		if err != nil {
			return
		}
		c.Write(b)
		c.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	<-accepted
	t.Cleanup(func() { c.Close() })
	return c
}

// TestReadFrom: a body copied with io.Copy from a TCP connection (the
// connection-to-connection path, splice(2)) arrives byte for byte after
// what was written before, with a Content-Length or chunked, and the
// connection carries the next request; HEAD gets no body.
func TestReadFrom(t *testing.T) {
	body := make([]byte, 300<<10)
	for i := range body {
		body[i] = byte(i * 13)
	}
	for _, length := range []bool{true, false} {
		tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if length {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			}
			w.Write(body[:10])
			src := tcpSource(t, body[10:])
			n, err := io.Copy(w, &io.LimitedReader{R: src, N: int64(len(body) - 10)})
			if r.Method != http.MethodHead && (n != int64(len(body)-10) || err != nil) {
				t.Errorf("copied %d, %v", n, err)
			}
		}), Options{})
		cl := dial(t, tg)
		for _, method := range []string{"GET", "HEAD", "GET"} {
			cl.send(method + " / HTTP/1.1\nHost: a\n\n")
			res := cl.response(method)
			got := cl.body(res)
			if method == "HEAD" {
				if got != "" {
					t.Errorf("length %v: HEAD body of %d bytes", length, len(got))
				}
				continue
			}
			if !bytes.Equal([]byte(got), body) {
				t.Errorf("length %v: body of %d bytes, want the %d bytes sent", length, len(got), len(body))
			}
		}
	}
}
