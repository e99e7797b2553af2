package http1

import (
	"io"
	"net"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleWait: on a TCP connection the loop waits for every request
// without a buffer (the hook runs after the buffer went back to the pool),
// pipelined requests are served from what is buffered, and a request that
// arrives in pieces after the wait began is served whole.
func TestIdleWait(t *testing.T) {
	var waits atomic.Int64
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok "+r.URL.Path)
	}), Options{idleWait: func() { waits.Add(1) }})
	waitFor := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(hangTimeout)
		for waits.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d idle waits, want %d", waits.Load(), n)
			}
			runtime.Gosched()
		}
	}

	c := dial(t, tg)
	for i := range 3 {
		c.send("GET /a HTTP/1.1\nHost: a\n\n")
		if got := c.body(c.response("GET")); got != "ok /a" {
			t.Fatalf("request %d: body %q", i, got)
		}
	}
	waitFor(4) // before each of the 3 requests, and now for the fourth
	c.send("GET /b HTTP/1.1\nHo")
	time.Sleep(10 * time.Millisecond) // most likely read by the wait alone; served either way
	c.send("st: a\n\n")
	if got := c.body(c.response("GET")); got != "ok /b" {
		t.Fatalf("request in pieces: body %q", got)
	}
	waitFor(5)
	c.send("GET /c HTTP/1.1\nHost: a\n\nGET /d HTTP/1.1\nHost: a\n\n")
	for _, want := range []string{"ok /c", "ok /d"} {
		if got := c.body(c.response("GET")); got != want {
			t.Fatalf("pipelined: body %q, want %q", got, want)
		}
	}
	waitFor(6) // /c waited, /d was buffered, then the next wait
	if n := waits.Load(); n != 6 {
		t.Errorf("%d idle waits, want 6 (none for the buffered pipelined request)", n)
	}
	// The client's close ends the wait: the loop closes too.
	if err := c.c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.closed()
}
