package h2server

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// pipeServer serves h with the fork over net.Pipe; it returns x/net's
// client connection to it and a function that runs f on the serve loop.
// wrap, if given, wraps the server's end of the pipe.
func pipeServer(t *testing.T, maxStreams uint32, h http.HandlerFunc, wrap ...func(net.Conn) net.Conn) (*http2.ClientConn, func(f func(*serverConn))) {
	t.Helper()
	hs := &http.Server{ErrorLog: log.New(io.Discard, "", 0)}
	s := &Server{MaxConcurrentStreams: maxStreams}
	if err := ConfigureServer(hs, s); err != nil {
		t.Fatal(err)
	}
	conns := make(chan *serverConn, 1)
	s.state.testNewConn = func(sc *serverConn) { conns <- sc }
	cc, c := net.Pipe()
	for _, w := range wrap {
		c = w(c)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ServeConn(c, &ServeConnOpts{Handler: h, BaseConfig: hs})
	}()
	client, err := (&http2.Transport{AllowHTTP: true}).NewClientConn(cc)
	if err != nil {
		t.Fatal(err)
	}
	sc := <-conns
	t.Cleanup(func() {
		client.Close()
		cc.Close()
		<-done
	})
	onLoop := func(f func(*serverConn)) {
		ran := make(chan struct{})
		sc.sendServeMsg(func(sc *serverConn) { f(sc); close(ran) })
		<-ran
	}
	return client, onLoop
}

// goid is the calling goroutine's id.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	return strings.Fields(string(b))[1]
}

func get(t *testing.T, c *http2.ClientConn, method, path string) (*http.Response, []byte, error) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://test"+path, nil)
	res, err := c.RoundTrip(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res, body, err
}

// TestHandlerWorkersReused: streams served one after the other run on
// few goroutines, also when every handler panics (runHandler recovers,
// the worker lives on); upstream starts one per stream.
func TestHandlerWorkersReused(t *testing.T) {
	for _, panics := range []bool{false, true} {
		var mu sync.Mutex
		seen := map[string]bool{}
		c, _ := pipeServer(t, 0, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[goid()] = true
			mu.Unlock()
			if panics {
				panic(http.ErrAbortHandler)
			}
			io.WriteString(w, "hello")
		})
		const n = 50
		for range n {
			_, body, err := get(t, c, "GET", "/")
			switch {
			case panics && err == nil:
				t.Fatalf("a handler that panics: got %q, want a reset", body)
			case !panics && (err != nil || string(body) != "hello"):
				t.Fatalf("got %q, %v", body, err)
			}
		}
		mu.Lock()
		if len(seen) > n/5 {
			t.Errorf("panics %v: %d streams ran on %d goroutines, want at most %d", panics, n, len(seen), n/5)
		}
		mu.Unlock()
	}
}

// TestHandlerDoneOnce: the serve loop counts every handler done exactly
// once, whether it learnt it from the response's last DATA frame or
// from runHandler's message (empty bodies, HEAD, trailers, a flush
// before the end, panics, runtime.Goexit): with one handler at a time,
// a handler never counted done would hold up every later stream, one
// counted twice would leave curHandlers below zero.
func TestHandlerDoneOnce(t *testing.T) {
	c, onLoop := pipeServer(t, 1, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/body":
			io.WriteString(w, "hello")
		case "/empty":
		case "/trailers":
			w.Header().Set("Trailer", "X-T")
			io.WriteString(w, "hello")
			w.Header().Set("X-T", "1")
		case "/flush":
			io.WriteString(w, "hel")
			w.(http.Flusher).Flush()
			io.WriteString(w, "lo")
		case "/big":
			w.Write(make([]byte, 100<<10))
		case "/panic":
			panic(http.ErrAbortHandler)
		case "/goexit":
			runtime.Goexit()
		}
	})
	paths := []string{"/body", "/empty", "/trailers", "/flush", "/big", "/panic", "/goexit"}
	for range 5 {
		for _, p := range paths {
			for _, m := range []string{"GET", "HEAD"} {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				req, _ := http.NewRequestWithContext(ctx, m, "http://test"+p, nil)
				res, err := c.RoundTrip(req)
				if err == nil {
					_, err = io.ReadAll(res.Body)
					res.Body.Close()
				}
				cancel()
				fails := p == "/panic" || p == "/goexit"
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%s %s: not served: %v", m, p, err)
				}
				if (err != nil) != fails {
					t.Fatalf("%s %s: error %v, want one: %v", m, p, err, fails)
				}
			}
		}
	}
	// Handlers that failed the stream send their message after the
	// reset: wait for the count to settle.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n uint32
		onLoop(func(sc *serverConn) { n = sc.curHandlers })
		if n == 0 {
			break
		}
		if int32(n) < 0 || time.Now().After(deadline) {
			t.Fatalf("curHandlers = %d once every stream ended, want 0", int32(n))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWorkerPoolIdleBound: the pool keeps at most maxIdleWorkers idle,
// however many handlers ran at once (here on 4 connections, fewer
// streams each than x/net's client opens before it knows the limit).
func TestWorkerPoolIdleBound(t *testing.T) {
	const conns, perConn = 4, 80 // more than maxIdleWorkers in all
	const n = conns * perConn
	release := make(chan struct{})
	started := make(chan struct{}, n)
	h := func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
	}
	failed := make(chan error, n)
	var wg sync.WaitGroup
	for range conns {
		c, _ := pipeServer(t, perConn, h)
		for range perConn {
			wg.Go(func() {
				if _, _, err := get(t, c, "GET", "/"); err != nil {
					failed <- err
				}
			})
		}
	}
	for range n {
		select {
		case <-started:
		case err := <-failed:
			close(release)
			t.Fatal(err)
		}
	}
	close(release)
	wg.Wait()
	close(failed)
	for err := range failed {
		t.Error(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for handlerWorkers.idleWorkers() < maxIdleWorkers && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := handlerWorkers.idleWorkers(); got != maxIdleWorkers {
		t.Errorf("%d idle workers after %d handlers at once, want %d", got, n, maxIdleWorkers)
	}
}

// TestReaderWaits: the frame reader reads on at once after frames that
// keep nothing of the framer's read buffer, and makes the framer forget
// them; after the others and after errors it waits for the serve loop.
func TestReaderWaits(t *testing.T) {
	for _, tc := range []struct {
		f    Frame
		err  error
		wait bool
	}{
		{&MetaHeadersFrame{HeadersFrame: &HeadersFrame{}}, nil, false},
		{&WindowUpdateFrame{}, nil, false},
		{&RSTStreamFrame{}, nil, false},
		{&PingFrame{}, nil, false},
		{&PriorityFrame{}, nil, false},
		{&PriorityUpdateFrame{}, nil, false},
		{&DataFrame{}, nil, true},
		{&SettingsFrame{}, nil, true},
		{&GoAwayFrame{}, nil, true},
		{&UnknownFrame{}, nil, true},
		{nil, ErrFrameTooLarge, true},
		{nil, streamError(1, ErrCodeProtocol), true},
	} {
		sc := &serverConn{framer: NewFramer(io.Discard, nil)}
		sc.framer.lastFrame = tc.f
		if tc.f == nil {
			sc.framer.lastFrame = &DataFrame{} // the frame read before the error
		}
		if got := sc.readerWaits(tc.f, tc.err); got != tc.wait {
			t.Errorf("%T, %v: waits %v, want %v", tc.f, tc.err, got, tc.wait)
		}
		if forgot := sc.framer.lastFrame == nil; forgot == tc.wait {
			t.Errorf("%T, %v: framer forgot the frame: %v, want %v", tc.f, tc.err, forgot, !tc.wait)
		}
	}
}

// countConn counts the server's writes (flushes); like internal/h2's
// Conn, it says it has room and a write only queues (net.Pipe would
// block the serve loop's first write until the client reads).
type countConn struct {
	net.Conn
	writes atomic.Int32
	q      chan []byte
	done   chan struct{}
	once   sync.Once
}

func newCountConn(c net.Conn) *countConn {
	cc := &countConn{Conn: c, q: make(chan []byte, 1024), done: make(chan struct{})}
	go func() {
		for {
			select {
			case p := <-cc.q:
				if _, err := c.Write(p); err != nil {
					return
				}
			case <-cc.done:
				return
			}
		}
	}()
	return cc
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	c.q <- append([]byte(nil), p...)
	return len(p), nil
}

func (c *countConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

func (c *countConn) Room(int) bool { return true }

// TestLastDataWithHeader: a handler that returns with its whole body
// buffered sends the header frame with the last DATA frame, and the
// loop writes both with one flush (upstream: two messages, two
// flushes); a response whose header went earlier (a flush), an empty one
// and one with trailers come out right.
func TestLastDataWithHeader(t *testing.T) {
	var cc *countConn
	c, _ := pipeServer(t, 0, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flush":
			io.WriteString(w, "hel")
			w.(http.Flusher).Flush()
			io.WriteString(w, "lo")
		case "/trailers":
			w.Header().Set("Trailer", "X-T")
			io.WriteString(w, "hello")
			w.Header().Set("X-T", "1")
		case "/empty":
		default:
			w.Header().Set("X-A", "b")
			io.WriteString(w, "hello")
		}
	}, func(c net.Conn) net.Conn { cc = newCountConn(c); return cc })
	paths := []string{"/", "/flush", "/trailers", "/empty", "/"}
	for i, p := range paths {
		before := cc.writes.Load()
		res, body, err := get(t, c, "GET", p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		want := "hello"
		if p == "/empty" {
			want = ""
		}
		if string(body) != want || res.StatusCode != 200 {
			t.Errorf("%s: %d %q, want 200 %q", p, res.StatusCode, body, want)
		}
		if p == "/trailers" && res.Trailer.Get("X-T") != "1" {
			t.Errorf("%s: trailer %q", p, res.Trailer.Get("X-T"))
		}
		if p == "/" && res.Header.Get("X-A") != "b" {
			t.Errorf("%s: header %v", p, res.Header)
		}
		// The last one: the connection's own frames are written.
		if n := cc.writes.Load() - before; i == len(paths)-1 && n != 1 {
			t.Errorf("%s: %d writes for the response, want 1", p, n)
		}
	}
}
