package proxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingContext counts the callbacks registered with context.AfterFunc
// (the proxy's watch of the client, a dial's timeout) and keeps those not
// stopped yet; it is done only when cancel is called. (Done is not nil,
// or AfterFunc would not register anything.)
type countingContext struct {
	context.Context
	done       chan struct{}
	afterFuncs atomic.Int64
	mu         sync.Mutex
	active     map[int]func()
	next       int
	canceled   bool
}

func newCountingContext() *countingContext {
	return &countingContext{Context: context.Background(), done: make(chan struct{}), active: map[int]func(){}}
}

func (c *countingContext) Done() <-chan struct{} { return c.done }

func (c *countingContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.canceled {
		return context.Canceled
	}
	return nil
}

func (c *countingContext) AfterFunc(f func()) func() bool {
	c.afterFuncs.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next++
	c.active[id] = f
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.active[id]
		delete(c.active, id)
		return ok
	}
}

// watching is the number of callbacks registered and not stopped.
func (c *countingContext) watching() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.active)
}

// cancel runs the registered callbacks, as a client going away would.
func (c *countingContext) cancel() {
	c.mu.Lock()
	c.canceled = true
	close(c.done)
	fs := c.active
	c.active = nil
	c.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// writeCounter is a ResponseWriter counting body writes.
type writeCounter struct {
	*httptest.ResponseRecorder
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.ResponseRecorder.Write(p)
}

// serveDirect runs one request through p's handler on the calling
// goroutine, with ctx as the request's context.
func serveDirect(p *Proxy, ctx context.Context, method string) *writeCounter {
	req := httptest.NewRequest(method, "http://app.example/", nil).WithContext(ctx)
	w := &writeCounter{ResponseRecorder: httptest.NewRecorder()}
	p.ServeHTTP(w, req)
	return w
}

// TestKnownLengthBodyOneWrite: a body of a few KiB that comes in one
// piece with its header goes to the client in one write, and the client
// is not watched (no context callback) for a body that does not stall.
func TestKnownLengthBodyOneWrite(t *testing.T) {
	if stdMode {
		t.Skip("synchronous path only")
	}
	body := bytes.Repeat([]byte("0123456789abcdef"), 10<<10/16)
	resp := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)
	u := newRawUpstream(t, canned(resp))
	p := New(Options{})
	p.Update(tableOf(backendOf("ns/s", defaults(), u.addr())))
	serveDirect(p, context.Background(), http.MethodGet) // dials
	for i := range 3 {
		ctx := newCountingContext()
		w := serveDirect(p, ctx, http.MethodGet)
		if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), body) {
			t.Fatalf("request %d: %d, %d bytes, want 200 and the %d bytes sent", i, w.Code, w.Body.Len(), len(body))
		}
		if w.writes != 1 {
			t.Errorf("request %d: %d writes to the client, want 1", i, w.writes)
		}
		if n := ctx.afterFuncs.Load(); n != 0 {
			t.Errorf("request %d: client watched (%d callbacks) for a body that came at once", i, n)
		}
	}
	if n := u.conns.Load(); n != 1 {
		t.Errorf("upstream connections = %d, want 1 (reused)", n)
	}
}

// TestStalledBodyWatchesClient: a body that stops coming for longer than
// the first-byte wait gets the client watched, and the client going away
// then closes the upstream connection.
func TestStalledBodyWatchesClient(t *testing.T) {
	if stdMode {
		t.Skip("synchronous path only")
	}
	u := newRawUpstream(t, func(c net.Conn, _ *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nfirst")
		io.Copy(io.Discard, c) // never more: wait for the proxy to close
		return false
	})
	p := New(Options{})
	p.Update(tableOf(backendOf("ns/s", defaults(), u.addr())))
	ctx := newCountingContext()
	done := make(chan *writeCounter)
	go func() { done <- serveDirect(p, ctx, http.MethodGet) }()
	eventually(t, "client watched", func() bool { return ctx.watching() == 1 })
	ctx.cancel()
	select {
	case w := <-done:
		if w.Body.String() != "first" {
			t.Errorf("client got %q, want %q", w.Body.String(), "first")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler still copying after the client went away")
	}
	eventually(t, "upstream connection closed", func() bool { return u.closed.Load() == 1 })
}

// TestBodiesInPieces: bodies whose bytes come in pieces, with pauses
// longer than the first-byte wait, with or without bytes buffered after
// the header, Content-Length or chunked, arrive byte for byte, and the
// connection is reused after each.
func TestBodiesInPieces(t *testing.T) {
	body := make([]byte, 200<<10)
	for i := range body {
		body[i] = byte(i * 7)
	}
	chunk := func(b []byte) string { return strconv.FormatInt(int64(len(b)), 16) + "\r\n" + string(b) + "\r\n" }
	cl := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	te := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	for _, tc := range []struct {
		name  string
		parts []string
	}{
		{"length, header alone", []string{cl, string(body)}},
		{"length, some body with the header", []string{cl + string(body[:3000]), string(body[3000:100000]), string(body[100000:])}},
		{"length, header and one byte", []string{cl + string(body[:1]), string(body[1:])}},
		{"chunked", []string{te + chunk(body[:5000]), chunk(body[5000:]), "0\r\n\r\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newRawUpstream(t, func(c net.Conn, _ *http.Request) bool {
				for i, part := range tc.parts {
					if i > 0 {
						time.Sleep(watchAfter + watchAfter/2)
					}
					if _, err := io.WriteString(c, part); err != nil {
						return false
					}
				}
				return true
			})
			for _, splice := range []bool{false, true} {
				_, url, c := fastProxy(t, Options{SpliceBodies: splice}, u.addr())
				for i := range 2 {
					if r := get(t, c, url); r.status != 200 || r.body != string(body) {
						t.Fatalf("splice %v, request %d: %d, %d bytes, want 200 and the %d bytes sent", splice, i, r.status, len(r.body), len(body))
					}
				}
			}
			if !stdMode && u.conns.Load() != 2 {
				t.Errorf("upstream connections = %d, want 2 (one per proxy, reused)", u.conns.Load())
			}
		})
	}
}

// TestKnownLengthBodyCutShort: an upstream that closes before the
// Content-Length is reached aborts the client's response; one that sends
// more than it announced is not reused.
func TestKnownLengthBodyCutShort(t *testing.T) {
	short := newRawUpstream(t, func(c net.Conn, _ *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 300000\r\n\r\n"+strings.Repeat("x", 50000))
		time.Sleep(10 * time.Millisecond)
		io.WriteString(c, strings.Repeat("x", 150000))
		return false
	})
	for _, splice := range []bool{false, true} {
		_, url, c := fastProxy(t, Options{SpliceBodies: splice}, short.addr())
		res, err := c.Get(url)
		if err == nil {
			_, err = io.ReadAll(res.Body)
			res.Body.Close()
		}
		if err == nil {
			t.Errorf("splice %v: client read a whole body from an upstream that cut it short", splice)
		}
	}

	long := newRawUpstream(t, canned("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA"))
	_, url, c := fastProxy(t, Options{}, long.addr())
	for i := range 2 {
		if r := get(t, c, url); r.status != 200 || r.body != "ok" {
			t.Fatalf("request %d: %d %q, want 200 ok", i, r.status, r.body)
		}
	}
	if !stdMode && long.conns.Load() != 2 {
		t.Errorf("upstream connections = %d, want 2 (no reuse after extra bytes)", long.conns.Load())
	}
}
