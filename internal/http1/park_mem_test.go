//go:build linux

package http1

import (
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"
)

// BenchmarkParkedConnMemory reports what a parked keep-alive connection
// keeps of the Go heap (live bytes after a collection, server side only:
// the clients are raw sockets, outside the Go heap) and of goroutine
// stacks. b.N is ignored: it holds 2,000 connections once.
//
//	go test -run - -bench ParkedConnMemory -benchtime 1x ./internal/http1/
func BenchmarkParkedConnMemory(b *testing.B) {
	const n = 2000
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	s := New(Options{
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }),
		HandOff:  NewListener(ln.Addr()),
		parkTick: 10 * time.Millisecond,
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.ServeConn(c)
		}
	}()
	addr := ln.Addr().(*net.TCPAddr)
	before := memSample()
	fds := make([]int, 0, n)
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		s.Shutdown()
	}()
	req := []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	buf := make([]byte, 4096)
	for range n {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err != nil {
			b.Fatal(err)
		}
		fds = append(fds, fd)
		sa := &syscall.SockaddrInet4{Port: addr.Port, Addr: [4]byte{127, 0, 0, 1}}
		if err := syscall.Connect(fd, sa); err != nil {
			b.Fatal(err)
		}
		if _, err := syscall.Write(fd, req); err != nil {
			b.Fatal(err)
		}
		if _, err := syscall.Read(fd, buf); err != nil { // the response fits one read
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(hangTimeout)
	for {
		s.mu.Lock()
		parked := len(s.park.conns)
		s.mu.Unlock()
		if parked == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d parked", parked, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := memSample()
	b.ReportMetric(float64(after.heap-before.heap)/n, "heap-B/conn")
	b.ReportMetric(float64(after.stacks-before.stacks)/n, "stack-B/conn")
	b.ReportMetric(float64(after.goroutines-before.goroutines), "goroutines")
}

type mem struct{ heap, stacks, goroutines int64 }

func memSample() mem {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/sched/goroutines:goroutines"}}
	metrics.Read(s)
	return mem{int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64()), int64(s[2].Value.Uint64())}
}
