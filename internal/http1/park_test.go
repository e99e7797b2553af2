package http1

import (
	"io"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// parkTarget starts the loop with parking after a millisecond's sweep,
// counting the connections it parks.
func parkTarget(t *testing.T, o Options) (*target, *atomic.Int64) {
	t.Helper()
	var parks atomic.Int64
	before := o.beforePark
	o.beforePark = func() {
		parks.Add(1)
		if before != nil {
			before()
		}
	}
	if o.parkTick == 0 {
		o.parkTick = time.Millisecond
	}
	tg := startFast(t, handlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok "+r.URL.Path)
	}), o)
	return tg, &parks
}

// waitUntil polls cond with s.mu held until it holds, failing the test
// after hangTimeout.
func waitUntil(t *testing.T, s *Server, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangTimeout)
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func waitParked(t *testing.T, s *Server, n int) {
	t.Helper()
	waitUntil(t, s, "parked connections", func() bool { return len(s.park.conns) == n })
}

func (cl *client) get(path string) {
	cl.t.Helper()
	cl.send("GET " + path + " HTTP/1.1\nHost: a\n\n")
	if got, want := cl.body(cl.response("GET")), "ok "+path; got != want {
		cl.t.Fatalf("body %q, want %q", got, want)
	}
}

// TestParkResume: an idle keep-alive connection is parked, and served
// again when its client sends, as often as it goes idle; one that never
// sent a request is not parked.
func TestParkResume(t *testing.T) {
	tg, parks := parkTarget(t, Options{})
	fresh := dial(t, tg)
	c := dial(t, tg)
	for i := range 3 {
		c.get("/a")
		waitParked(t, tg.fast, 1)
		if n := parks.Load(); n != int64(i+1) {
			t.Fatalf("parked %d times, want %d", n, i+1)
		}
	}
	// Several requests at once on a parked connection.
	c.send("GET /b HTTP/1.1\nHost: a\n\nGET /c HTTP/1.1\nHost: a\n\n")
	for _, want := range []string{"ok /b", "ok /c"} {
		if got := c.body(c.response("GET")); got != want {
			t.Fatalf("body %q, want %q", got, want)
		}
	}
	waitParked(t, tg.fast, 1)
	fresh.get("/fresh") // it waited all along, unparked
}

// TestParkIdleTimeout: a parked connection is closed once its idle
// timeout is over, and leaves the server's connections.
func TestParkIdleTimeout(t *testing.T) {
	var timeouts atomic.Int64
	tg, _ := parkTarget(t, Options{IdleTimeout: time.Hour, OnTimeout: func(kind string) {
		if kind == TimeoutKeepAlive {
			timeouts.Add(1)
		}
	}})
	c := dial(t, tg)
	c.get("/a")
	waitParked(t, tg.fast, 1)
	s := tg.fast
	s.mu.Lock()
	s.sweep(time.Now().Add(2 * time.Hour)) // the sweep an hour on
	n := len(s.conns)
	s.mu.Unlock()
	if n != 0 {
		t.Errorf("%d connections tracked after the idle timeout, want 0", n)
	}
	waitParked(t, s, 0)
	c.closed()
	if n := timeouts.Load(); n != 1 {
		t.Errorf("%d keep-alive timeouts told, want 1", n)
	}
}

// TestParkShutdown: Shutdown closes parked connections at once, and a
// connection does not park once the server shuts down.
func TestParkShutdown(t *testing.T) {
	tg, _ := parkTarget(t, Options{})
	c := dial(t, tg)
	c.get("/a")
	waitParked(t, tg.fast, 1)
	tg.fast.Shutdown()
	c.closed()
	s := tg.fast
	waitUntil(t, s, "no connection", func() bool { return len(s.conns) == 0 && len(s.park.conns) == 0 })
}

// TestParkPeerClose: a client that closes a parked connection wakes it;
// the server closes it too and forgets it.
func TestParkPeerClose(t *testing.T) {
	tg, _ := parkTarget(t, Options{})
	c := dial(t, tg)
	c.get("/a")
	waitParked(t, tg.fast, 1)
	remote := c.c.LocalAddr().String()
	c.c.Close()
	tg.conns.waitClosed(t, remote)
	s := tg.fast
	waitUntil(t, s, "no connection", func() bool { return len(s.conns) == 0 && len(s.park.conns) == 0 })
}

// TestParkBytesBeforeRegistration: a request that arrives after the wait
// ended but before the connection is registered with the poller wakes
// it (level-triggered readiness).
func TestParkBytesBeforeRegistration(t *testing.T) {
	var c *client
	var sent atomic.Bool
	tg, _ := parkTarget(t, Options{beforePark: func() {
		if sent.CompareAndSwap(false, true) {
			// On loopback the bytes are in the server's socket when
			// Write returns.
			if _, err := c.c.Write([]byte("GET /late HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
				panic(err)
			}
		}
	}})
	c = dial(t, tg)
	c.get("/a")
	if got := c.body(c.response("GET")); got != "ok /late" {
		t.Fatalf("body %q, want %q", got, "ok /late")
	}
	c.get("/b")
}

// TestParkFreesGoroutines: parked connections hold no goroutine.
func TestParkFreesGoroutines(t *testing.T) {
	tg, _ := parkTarget(t, Options{})
	const n = 20
	before := runtime.NumGoroutine()
	conns := make([]*client, n)
	for i := range conns {
		conns[i] = dial(t, tg)
		conns[i].get("/a")
	}
	waitParked(t, tg.fast, n)
	// The serving goroutines return as they park; give them the time.
	deadline := time.Now().Add(hangTimeout)
	for runtime.NumGoroutine() > before+n/2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines with %d parked connections, %d before", runtime.NumGoroutine(), n, before)
		}
		time.Sleep(time.Millisecond)
	}
	for _, c := range conns {
		c.get("/b")
	}
}

// TestParkRequestDuringWake: a request that ends the wait the poller was
// waking to park it is served, with the connection's read deadline put
// back (the poller's is in the past).
func TestParkRequestDuringWake(t *testing.T) {
	tg, _ := parkTarget(t, Options{parkTick: time.Hour}) // no sweep but the test's
	s := tg.fast
	c := dial(t, tg)
	c.get("/a")
	var sc *conn
	waitUntil(t, s, "a waiting connection", func() bool {
		for k := range s.conns {
			sc = k
		}
		return sc != nil && sc.wait.Load()&waitingBit != 0
	})
	// The sweep's steps, with the request ending the wait in between.
	s.mu.Lock()
	v := sc.wait.Load()
	if !sc.wait.CompareAndSwap(v, v|parkBit) {
		s.mu.Unlock()
		t.Fatal("the connection stopped waiting")
	}
	c.send("GET /b HTTP/1.1\nHost: a\n\n")
	for deadline := time.Now().Add(hangTimeout); sc.wait.Load()&waitingBit != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			s.mu.Unlock()
			t.Fatal("the request did not end the wait")
		}
	}
	sc.nc.SetReadDeadline(aLongTimeAgo)
	s.mu.Unlock()
	if got := c.body(c.response("GET")); got != "ok /b" {
		t.Fatalf("body %q", got)
	}
	c.get("/c") // the deadline is a real one again
	if n := len(s.park.conns); n != 0 {
		t.Errorf("%d parked", n)
	}
}

// TestDifferentialParked runs the differential cases with parking after
// a millisecond: connections that wait for a silence park and resume.
func TestDifferentialParked(t *testing.T) {
	if testing.Short() {
		t.Skip("the differential cases once more")
	}
	var parks atomic.Int64
	std := startStd(t, diffHandler)
	fast := startFast(t, diffHandler, Options{parkTick: time.Millisecond, beforePark: func() { parks.Add(1) }})
	runConcurrently(t, diffCases, func(t *testing.T, tc diffCase) { runDiffCase(t, std, fast, tc) })
	if parks.Load() == 0 {
		t.Error("no connection parked")
	}
	t.Logf("%d parks", parks.Load())
}
