package server

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTrackedConnDescriptor: a tracked TCP connection passes on its
// descriptor (the fast HTTP/1.1 loop's idle wait needs it); any other
// connection says it has none.
func TestTrackedConnDescriptor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var tc net.Conn = &trackedConn{Conn: c}
	sc, ok := tc.(syscall.Conn)
	if !ok {
		t.Fatal("trackedConn is not a syscall.Conn")
	}
	raw, err := sc.SyscallConn()
	if err != nil || raw == nil {
		t.Fatalf("SyscallConn of a TCP connection: %v, %v", raw, err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := (&trackedConn{Conn: a}).SyscallConn(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("SyscallConn of a pipe: %v, want ErrUnsupported", err)
	}
}

// TestTrackedConnReadFrom: a tracked connection's ReadFrom (the splice
// path of response bodies) writes what it reads, over TCP and over a
// connection without a ReadFrom of its own.
func TestTrackedConnReadFrom(t *testing.T) {
	c, s := tcpPair(t)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	for _, pair := range [][2]net.Conn{{c, s}, {a, b}} {
		w := &trackedConn{Conn: pair[0]}
		go func() {
			w.ReadFrom(strings.NewReader("body bytes"))
		}()
		got := make([]byte, len("body bytes"))
		if _, err := io.ReadFull(pair[1], got); err != nil || string(got) != "body bytes" {
			t.Errorf("%T: read %q, %v", pair[0], got, err)
		}
	}
}

// TestWriteDeadlineFromAboveStands: a write deadline set from above (the
// fast loop's one second for a 400, a TLS handshake's) is not replaced by
// the write idle timeout until it is cleared.
func TestWriteDeadlineFromAboveStands(t *testing.T) {
	c, _ := tcpPair(t)
	m, _ := newMetrics(nil)
	tr := newTracker(m, func() string { return reasonServing })
	tr.writeIdle = time.Hour
	tc := &trackedConn{Conn: c, t: tr}
	tc.wdl.Store(noDeadline)
	tc.SetWriteDeadline(time.Unix(1, 0))
	if _, err := tc.Write([]byte("x")); !isTimeout(err) {
		t.Fatalf("write past a deadline set from above: %v, want a timeout", err)
	}
	tc.SetWriteDeadline(time.Time{})
	if _, err := tc.Write([]byte("x")); err != nil {
		t.Fatalf("write once it was cleared: %v", err)
	}
}

// TestTrackedConnSockIO: an accepted TCP connection reads and writes its
// socket with recv(2) and send(2) (http1.SockIO); the deadlines, the
// write idle timeout and closing work as through net.Conn. A connection
// without a descriptor keeps net.Conn's Read and Write.
func TestTrackedConnSockIO(t *testing.T) {
	for _, sock := range []bool{true, false} {
		c, peer := tcpPair(t)
		m, _ := newMetrics(nil)
		tr := newTracker(m, func() string { return reasonServing })
		tr.writeIdle = time.Hour
		tc := &trackedConn{Conn: c, t: tr}
		tc.wdl.Store(noDeadline)
		if sock {
			tc.initSock()
			if !tc.hasSock {
				t.Fatal("a TCP connection has no SockIO")
			}
		}
		if _, err := tc.Write([]byte("ping")); err != nil {
			t.Fatalf("sock %v: write: %v", sock, err)
		}
		got := make([]byte, 4)
		if _, err := io.ReadFull(peer, got); err != nil || string(got) != "ping" {
			t.Fatalf("sock %v: peer read %q, %v", sock, got, err)
		}
		peer.Write([]byte("pong"))
		if _, err := io.ReadFull(tc, got); err != nil || string(got) != "pong" {
			t.Fatalf("sock %v: read %q, %v", sock, got, err)
		}
		tc.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := tc.Read(got); !isTimeout(err) || !tc.readTimedOut.Load() {
			t.Fatalf("sock %v: read past the deadline: %v", sock, err)
		}
		tc.SetReadDeadline(time.Time{})
		peer.Close()
		if _, err := tc.Read(got); err != io.EOF {
			t.Fatalf("sock %v: read after the peer closed: %v, want io.EOF", sock, err)
		}
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	tc := &trackedConn{Conn: a}
	if tc.initSock(); tc.hasSock {
		t.Fatal("a pipe has a SockIO")
	}
}
