package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/sluice/internal/http1"
	"sluice.dev/sluice/internal/route"
)

// cannedUpstream answers every request (without body) with the same
// 100-byte keep-alive response, allocating nothing per request, so a
// benchmark's allocations are the proxy's (and net/http's).
func cannedUpstream(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n" + strings.Repeat("x", 99) + "\n")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						return
					}
					if len(line) <= 2 { // end of the request header
						if _, err := c.Write(resp); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	tb.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(s int)           { d.status = s }
func (d *discardWriter) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }

// benchHandler drives h like net/http would, without a client or server:
// the request and response header maps are reset, not reallocated.
func benchHandler(b *testing.B, h http.Handler) {
	req := httptest.NewRequest("GET", "http://app.example/api/items?page=2", nil)
	req.RemoteAddr = "192.0.2.10:40000"
	req = req.WithContext(context.Background())
	accept, ua := []string{"*/*"}, []string{"bench/1.0"}
	w := &discardWriter{h: make(http.Header)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		clear(req.Header)
		req.Header["Accept"] = accept
		req.Header["User-Agent"] = ua
		clear(w.h)
		w.n = 0
		h.ServeHTTP(w, req)
		if w.status != 200 || w.n != 100 {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
}

// BenchmarkProxy measures the handler alone: route match, balancing,
// header rewrite, the upstream round trip over a keep-alive connection and
// a 100-byte body copy.
func BenchmarkProxy(b *testing.B) {
	addr := cannedUpstream(b)
	p := New(Options{StdTransport: *benchStd})
	p.Update(tableOf(backendOf("ns/s", defaults(), addr)))
	benchHandler(b, p)
}

// BenchmarkProxyRequestID is BenchmarkProxy with request IDs generated
// (Options.RequestID), the cost of --request-id.
func BenchmarkProxyRequestID(b *testing.B) {
	addr := cannedUpstream(b)
	p := New(Options{StdTransport: *benchStd, RequestID: true})
	p.Update(tableOf(backendOf("ns/s", defaults(), addr)))
	benchHandler(b, p)
}

// BenchmarkReverseProxy is httputil.ReverseProxy on the same setup, for
// comparison.
func BenchmarkReverseProxy(b *testing.B) {
	addr := cannedUpstream(b)
	target := &url.URL{Scheme: "http", Host: addr}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true},
	}
	benchHandler(b, rp)
}

// BenchmarkProxyHTTP goes through a real client and server over loopback,
// in parallel: allocations include the client's and the server's.
func BenchmarkProxyHTTP(b *testing.B) {
	addr := cannedUpstream(b)
	p := New(Options{StdTransport: *benchStd})
	p.Update(tableOf(backendOf("ns/s", defaults(), addr)))
	srv := httptest.NewServer(p)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := c.Get(srv.URL + "/api/items")
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	})
}

// BenchmarkProxyCPU runs requests from 16 keep-alive clients through a real
// listener and reports the process CPU time (user+system, from getrusage)
// per request and context switches per request. Client, proxy and upstream
// share the process: subtract BenchmarkDirectCPU (the same client and
// upstream without the proxy) for the proxy's share; scripts/bench.sh
// measures the proxy process alone.
func BenchmarkProxyCPU(b *testing.B) {
	addr := cannedUpstream(b)
	p := New(Options{StdTransport: *benchStd})
	p.Update(tableOf(backendOf("ns/s", defaults(), addr)))
	srv := httptest.NewServer(p)
	defer srv.Close()
	cpuPerRequest(b, srv.URL+"/api/items")
}

// BenchmarkDirectCPU is BenchmarkProxyCPU's client and upstream without
// the proxy.
func BenchmarkDirectCPU(b *testing.B) {
	cpuPerRequest(b, "http://"+cannedUpstream(b)+"/api/items")
}

func cpuPerRequest(b *testing.B, url string) {
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	var before, after syscall.Rusage
	rb, wb := ioSyscalls()
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ReportAllocs()
	b.ResetTimer()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := c.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	})
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	ra, wa := ioSyscalls()
	if ra > 0 {
		b.ReportMetric(float64(ra-rb)/float64(b.N), "reads/op")
		b.ReportMetric(float64(wa-wb)/float64(b.N), "writes/op")
	}
	cpu := time.Duration(after.Utime.Nano()-before.Utime.Nano()) + time.Duration(after.Stime.Nano()-before.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(after.Nvcsw+after.Nivcsw-before.Nvcsw-before.Nivcsw)/float64(b.N), "ctxsw/op")
}

// benchStd selects the net/http.Transport path in BenchmarkProxyCPU and
// BenchmarkProxyHTTP: go test -bench . -args -proxy.std-bench
var benchStd = flag.Bool("proxy.std-bench", false, "benchmark the net/http.Transport path")

// ioSyscalls returns the process's read and write system calls so far
// (syscr, syscw of /proc/self/io), zeros where that is unavailable.
func ioSyscalls() (reads, writes int64) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}

// BenchmarkProxyFastHTTP1 serves the proxy with the fast HTTP/1.1 loop
// (internal/http1, sluice's default for plain HTTP) to raw keep-alive
// clients that allocate nothing, so allocs/op is the server's and the
// proxy's.
func BenchmarkProxyFastHTTP1(b *testing.B) {
	addr := cannedUpstream(b)
	p := New(Options{StdTransport: *benchStd})
	p.Update(tableOf(backendOf("ns/s", defaults(), addr)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	handoff := http1.NewListener(ln.Addr())
	s := http1.New(http1.Options{Handler: p, HandOff: handoff, RecycleRequests: true})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.ServeConn(c)
		}
	}()
	b.Cleanup(func() { ln.Close(); handoff.Close(); s.Shutdown() })
	req := []byte("GET /api/items HTTP/1.1\r\nHost: bench.example\r\nUser-Agent: bench\r\n\r\n")
	b.ReportAllocs()
	b.ResetTimer()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for pb.Next() {
			if _, err := c.Write(req); err != nil {
				b.Error(err)
				return
			}
			if err := readCanned(br); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// readCanned reads one response with a Content-Length body from br.
func readCanned(br *bufio.Reader) error {
	n := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if n < 0 {
		return errors.New("response without Content-Length")
	}
	_, err := br.Discard(n)
	return err
}

// BenchmarkUpdate10k installs tables of 10,000 Ingresses (one host and
// route each, 100 Services of one endpoint) with a metrics registry, as
// the proxy's rebuild loop does on every change.
func BenchmarkUpdate10k(b *testing.B) {
	p := New(Options{Registerer: prometheus.NewRegistry()})
	table := func() *route.Table {
		cfg := route.Config{}
		for i := range 10000 {
			svc := fmt.Sprintf("ns/svc-%03d", i%100)
			cfg.VirtualHosts = append(cfg.VirtualHosts, route.VirtualHost{
				Host: fmt.Sprintf("h%05d.example", i),
				Routes: []route.Route{{PathType: route.PathPrefix, Path: "/",
					Backend: backendOf(svc, defaults(), fmt.Sprintf("127.0.0.1:%d", 20000+i%100)),
					Ingress: fmt.Sprintf("ns/ing-%05d", i)}},
			})
		}
		return route.New(cfg)
	}
	tables := [2]*route.Table{table(), table()}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p.Update(tables[i%2])
	}
}
