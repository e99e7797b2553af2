package proxy

import (
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleBody: a read that waits longer than d aborts the exchange;
// reads that return sooner, however many, do not; Close runs done once.
func TestIdleBody(t *testing.T) {
	pr, pw := io.Pipe()
	var aborted, done atomic.Int32
	b := newIdleBody(pr, 200*time.Millisecond, func() { aborted.Add(1); pw.CloseWithError(io.ErrClosedPipe) }, func() { done.Add(1) })
	go func() {
		for i := 0; i < 3; i++ {
			pw.Write([]byte("x")) // each read gets its byte at once
		}
		// then nothing: the next read waits until the timer fires
	}()
	buf := make([]byte, 1)
	for i := 0; i < 3; i++ {
		if n, err := b.Read(buf); n != 1 || err != nil {
			t.Fatalf("read %d: %d %v", i, n, err)
		}
	}
	if b.expired() || aborted.Load() != 0 {
		t.Fatal("aborted while the upstream was sending")
	}
	if _, err := b.Read(buf); err == nil || !b.expired() || aborted.Load() != 1 {
		t.Fatalf("a stalled read: err %v, expired %v, aborts %d", err, b.expired(), aborted.Load())
	}
	b.Close()
	if done.Load() != 1 {
		t.Errorf("done ran %d times", done.Load())
	}
}
