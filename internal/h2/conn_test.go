package h2

import (
	"bytes"
	"errors"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// recConn records the writes that reach it; a write blocks while gate is
// held.
type recConn struct {
	net.Conn // nil: only the methods below are called
	gate     sync.Mutex
	mu       sync.Mutex
	writes   [][]byte
	closed   bool
	err      error
	wrote    chan struct{}
}

func newRecConn() *recConn { return &recConn{wrote: make(chan struct{}, 1000)} }

func (c *recConn) Write(p []byte) (int, error) {
	c.gate.Lock()
	defer c.gate.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	c.writes = append(c.writes, bytes.Clone(p))
	c.wrote <- struct{}{}
	return len(p), c.err
}

func (c *recConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func (c *recConn) SetWriteDeadline(time.Time) error { return nil }

func (c *recConn) state() (writes [][]byte, closed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.closed
}

// waitFlushed waits until c's flusher is gone.
func waitFlushed(t *testing.T, c *Conn) {
	t.Helper()
	for i := 0; ; i++ {
		c.mu.Lock()
		w := c.writing
		c.mu.Unlock()
		if !w {
			return
		}
		if i > 1e6 {
			t.Fatal("flusher still running")
		}
		runtime.Gosched()
	}
}

// TestConnBatches: writes made while a write below is in progress leave
// in one write below after it, in order (the flusher may have taken the
// first ones before the others came: two writes in all), and no flusher
// or buffer stays behind.
func TestConnBatches(t *testing.T) {
	rc := newRecConn()
	rc.gate.Lock() // hold the first write below until all are queued
	c := NewConn(rc, true, Limits{}).(*Conn)
	var want []byte
	for i := range 50 {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, 100)
		want = append(want, p...)
		if n, err := c.Write(p); n != len(p) || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	rc.gate.Unlock()
	waitFlushed(t, c)
	writes, _ := rc.state()
	if len(writes) > 2 {
		t.Errorf("%d writes below, want at most 2", len(writes))
	}
	if got := bytes.Join(writes, nil); !bytes.Equal(got, want) {
		t.Errorf("bytes below differ from those written (%d vs %d)", len(got), len(want))
	}
	if c.pending != nil {
		t.Error("an idle connection keeps a buffer")
	}
}

// TestConnBackpressure: a connection whose writes below do not finish
// accepts maxPending bytes (plus the write in progress) and then blocks
// the writer.
func TestConnBackpressure(t *testing.T) {
	rc := newRecConn()
	rc.gate.Lock()
	c := NewConn(rc, true, Limits{}).(*Conn)
	chunk := make([]byte, 4096)
	accepted := make(chan int, 1000)
	go func() {
		for i := 0; ; i++ {
			if _, err := c.Write(chunk); err != nil {
				close(accepted)
				return
			}
			accepted <- i
		}
	}()
	// The writer stops once maxPending bytes wait behind the blocked
	// write: wait for that, give it many chances to go on, then count
	// what it got through.
	for {
		c.mu.Lock()
		full := c.pending != nil && len(*c.pending) >= maxPending
		c.mu.Unlock()
		if full {
			break
		}
		runtime.Gosched()
	}
	for range 1000 {
		runtime.Gosched()
	}
	n := len(accepted)
	if limit := 2*maxPending/len(chunk) + 1; n > limit {
		t.Errorf("%d writes of %d bytes accepted while nothing drained, want at most %d", n, len(chunk), limit)
	}
	if n == 0 {
		t.Error("no write accepted")
	}
	rc.gate.Unlock()
	<-accepted // it moves again
	c.Close()
	for range accepted {
	}
}

// TestConnCloseFlushes: Close writes what was accepted, then closes; a
// write error closes the connection and fails later writes.
func TestConnCloseFlushes(t *testing.T) {
	rc := newRecConn()
	rc.gate.Lock()
	c := NewConn(rc, true, Limits{}).(*Conn)
	c.Write([]byte("goaway"))
	c.Close()
	if _, closed := rc.state(); closed {
		t.Fatal("closed before the pending bytes were written")
	}
	rc.gate.Unlock()
	waitFlushed(t, c)
	writes, closed := rc.state()
	if len(writes) != 1 || string(writes[0]) != "goaway" || !closed {
		t.Errorf("writes %q, closed %v; want [goaway], closed", writes, closed)
	}

	rc = newRecConn()
	rc.err = errors.New("broken pipe")
	c = NewConn(rc, true, Limits{}).(*Conn)
	c.Write([]byte("a"))
	waitFlushed(t, c)
	if _, err := c.Write([]byte("b")); err == nil {
		t.Error("write after a failed write below succeeded")
	}
	if _, closed := rc.state(); !closed {
		t.Error("connection not closed after a failed write below")
	}
}

// TestConnRoom: Room counts the bytes pending behind the write in
// progress against maxPending, and Writes of the room it reported
// return while nothing drains.
func TestConnRoom(t *testing.T) {
	rc := newRecConn()
	c := NewConn(rc, true, Limits{}).(*Conn)
	if !c.Room(maxPending) || c.Room(maxPending+1) {
		t.Fatalf("empty connection: Room(%d) %v, Room(%d) %v; want true, false", maxPending, c.Room(maxPending), maxPending+1, c.Room(maxPending+1))
	}
	rc.gate.Lock()
	c.Write(make([]byte, 10)) // the flusher takes it and blocks below
	for {
		c.mu.Lock()
		taken := c.writing && c.pending == nil
		c.mu.Unlock()
		if taken {
			break
		}
		runtime.Gosched()
	}
	c.Write(make([]byte, 1000))
	if !c.Room(maxPending-1000) || c.Room(maxPending-999) {
		t.Errorf("1000 bytes pending: Room(%d) %v, Room(%d) %v; want true, false", maxPending-1000, c.Room(maxPending-1000), maxPending-999, c.Room(maxPending-999))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for left := maxPending - 1000; left > 0; left -= 4000 {
			c.Write(make([]byte, min(left, 4000)))
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("writes within the room reported blocked (failsafe)")
	}
	if c.Room(1) {
		t.Error("full connection: Room(1) true")
	}
	rc.gate.Unlock()
	c.Close()
	waitFlushed(t, c)
	if !c.Room(1 << 30) {
		t.Error("closed connection: Room false (its writes fail at once)")
	}
}
