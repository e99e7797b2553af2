package http1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Tests of the fast loop's own behaviour: hand-offs, streaming, the
// request context, timeouts and shutdown.

// client is a raw connection with a reader for responses.
type client struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, tg *target) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", tg.addr, hangTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(hangTimeout))
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

func (cl *client) send(s string) {
	cl.t.Helper()
	if _, err := cl.c.Write(crlf(s)); err != nil {
		cl.t.Fatal(err)
	}
}

// response reads a response to a request with method.
func (cl *client) response(method string) *http.Response {
	cl.t.Helper()
	res, err := http.ReadResponse(cl.br, &http.Request{Method: method})
	if err != nil {
		cl.t.Fatal(err)
	}
	return res
}

// body reads a response body to its end, failing the test on an error.
func (cl *client) body(res *http.Response) string {
	cl.t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		cl.t.Fatalf("reading body: %v (read %q)", err, b)
	}
	return string(b)
}

// closed waits for the server to close the connection, failing the test
// if it sends anything more first.
func (cl *client) closed() {
	cl.t.Helper()
	b, err := io.ReadAll(cl.br)
	if err != nil && !isReset(err) {
		cl.t.Fatalf("waiting for close: %v", err)
	}
	if len(b) > 0 {
		cl.t.Fatalf("got %q before the close", b)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// handlerFunc makes a target's handler of f (the request log is unused).
func handlerFunc(f http.HandlerFunc) func(*reqLog) http.Handler {
	return func(*reqLog) http.Handler { return f }
}

func TestBodyReadAfterContextDone(t *testing.T) {
	// The handler waits on the context before it reads the body: the
	// background read starts when the body ends.
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stop := context.AfterFunc(r.Context(), func() {})
		defer stop()
		_ = r.Context().Done()
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "got "+string(b))
	}), Options{})
	cl := dial(t, tg)
	cl.send(post("/", "hello"))
	if got := cl.body(cl.response("POST")); got != "got hello" {
		t.Fatalf("body %q", got)
	}
	cl.send("GET / HTTP/1.1\nHost: a\n\n")
	if got := cl.body(cl.response("GET")); got != "got " {
		t.Fatalf("second body %q", got)
	}
}

func TestUnreadBodyClosesWithoutReset(t *testing.T) {
	// The handler leaves a body larger than the loop reads to keep the
	// connection: the response says "Connection: close", and the close
	// is orderly (a reset could destroy the response in the client's
	// receive buffer).
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}), Options{})
	for range 3 {
		cl := dial(t, tg)
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			cl.c.Write(crlf("POST / HTTP/1.1\nHost: a\nContent-Length: 1000000\n\n"))
			cl.c.Write(make([]byte, 1000000))
		}()
		res := cl.response("POST")
		if got := cl.body(res); got != "ok" || !res.Close {
			t.Fatalf("body %q, close %v", got, res.Close)
		}
		if b, err := io.ReadAll(cl.br); err != nil || len(b) > 0 {
			t.Fatalf("after the response: %q, %v", b, err)
		}
		cl.c.Close()
		<-wrote
	}
}
