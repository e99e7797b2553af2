package http1

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// sockPair returns a loopback TCP connection wrapped in a SockIO, and
// its peer.
func sockPair(t *testing.T) (*SockIO, *net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	tc := c.(*net.TCPConn)
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	s := new(SockIO)
	s.Init(tc, raw)
	return s, tc, peer.(*net.TCPConn)
}

func TestSockIOReadWrite(t *testing.T) {
	s, _, peer := sockPair(t)
	if n, err := s.Write([]byte("hello")); n != 5 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(peer, got); err != nil || string(got) != "hello" {
		t.Fatalf("peer read %q, %v", got, err)
	}
	if n, err := s.Read(nil); n != 0 || err != nil {
		t.Fatalf("zero-byte Read = %d, %v", n, err)
	}
	go peer.Write([]byte("world"))
	buf := make([]byte, 16)
	n, err := s.Read(buf) // waits for the poller
	if err != nil || string(buf[:n]) != "world"[:n] || n == 0 {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	peer.CloseWrite()
	rest, err := io.ReadAll(readerOf(s))
	if err != nil || string(buf[:n])+string(rest) != "world" {
		t.Fatalf("after close: %q %q, %v", buf[:n], rest, err)
	}
	if n, err := s.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read at the end = %d, %v; want io.EOF", n, err)
	}
}

type readerFuncOf func([]byte) (int, error)

func (f readerFuncOf) Read(p []byte) (int, error) { return f(p) }

func readerOf(s *SockIO) io.Reader { return readerFuncOf(s.Read) }

// A large write to a peer that reads slowly waits for room and writes
// everything.
func TestSockIOWriteWaits(t *testing.T) {
	s, tc, peer := sockPair(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB: more than the socket buffers hold
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	if n, err := s.Write(data); n != len(data) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	tc.CloseWrite()
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("peer got %d bytes, want %d", len(b), len(data))
	}
}

// Deadlines and closing behave as with net.Conn: a timeout is a net.Error
// with Timeout, a closed connection net.ErrClosed, a reset ECONNRESET;
// every one a *net.OpError of the operation.
func TestSockIOErrors(t *testing.T) {
	s, tc, peer := sockPair(t)
	tc.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, err := s.Read(make([]byte, 8))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) || !IsTimeout(err) {
		t.Fatalf("Read past the deadline: %v", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("Read error %#v, want a *net.OpError of read", err)
	}
	tc.SetReadDeadline(time.Time{})

	// A write to a peer that reads nothing times out.
	tc.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	_, err = s.Write(make([]byte, 64<<20))
	if !IsTimeout(err) || !errors.As(err, &oe) || oe.Op != "write" {
		t.Fatalf("Write past the deadline: %v", err)
	}
	tc.SetWriteDeadline(time.Time{})

	// A reset (the peer closes with unread data and SO_LINGER 0).
	peer.SetLinger(0)
	peer.Close()
	buf := make([]byte, 1<<16)
	for {
		if _, err = s.Read(buf); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ECONNRESET) || !errors.As(err, &oe) || oe.Op != "read" || oe.Addr == nil {
		t.Fatalf("Read after a reset: %v", err)
	}
	if _, err = s.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Write after a reset: %v", err)
	}

	// A read waiting when the connection is closed.
	s2, tc2, _ := sockPair(t)
	done := make(chan error)
	go func() {
		_, err := s2.Read(buf)
		done <- err
	}()
	tc2.Close() // the read fails whether it waits already or starts after

	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read on a closed connection: %v", err)
	}
}

// A descriptor that is not a socket is read and written with read(2) and
// write(2).
func TestSockIONotSocket(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	rraw, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	wraw, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var sr, sw SockIO
	sr.Init(nil, rraw)
	sw.Init(nil, wraw)
	if n, err := sw.Write([]byte("pipe")); n != 4 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	buf := make([]byte, 8)
	if n, err := sr.Read(buf); string(buf[:n]) != "pipe" || err != nil {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	w.Close()
	if _, err := sr.Read(buf); err != io.EOF {
		t.Fatalf("Read at the end: %v", err)
	}
}

// BenchmarkSockIO compares a loopback ping-pong of 100 bytes through
// SockIO (recv/send) with net.Conn (read/write).
func BenchmarkSockIO(b *testing.B) {
	for _, name := range []string{"sock", "conn"} {
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				buf := make([]byte, 100)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var rw io.ReadWriter = c
			if name == "sock" {
				raw, _ := c.(*net.TCPConn).SyscallConn()
				s := new(SockIO)
				s.Init(c, raw)
				rw = s
			}
			buf := make([]byte, 100)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := rw.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(rw, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
