package http1

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fuzzSeeds are byte sequences to start the fuzzers from: the
// differential cases, and a few more.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	for _, tc := range diffCases {
		seeds = append(seeds, bytes.Join(tc.parts, nil))
	}
	return append(seeds,
		[]byte("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n"),
		[]byte("GET / HTTP/1.1\r\nHost: a\r\nUpgrade\r\n : x\r\n\r\n"),
		[]byte("GET / HTTP/1.1\r\nHost: a\r\nExpect : 100-continue\r\n\r\n"),
		[]byte("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding\t: chunked\r\n\r\n"),
		[]byte("GET / HTTP/1.1\r\n\r\n"),
		[]byte("GET / HTTP/1.1\n\n"),
		[]byte("GET / HTTP/1.1\r\r\n\r\n"),
		[]byte("GET / HTTP/1.1\r\nHost: a\r\n\rX: y\r\n\r\n"),
		[]byte("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"),
	)
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzScanHead holds scanHead to http.ReadRequest: a header it lets
// through without a reason is one the loop may serve, so whenever
// ReadRequest accepts it, it must be an HTTP/1.1 request for a path
// without Upgrade, Expect or Transfer-Encoding, of the length the scan
// found; a header it finds incomplete must not parse.
func FuzzScanHead(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, reason := scanHead(data)
		if n < 0 || n > len(data) {
			t.Fatalf("length %d of %d bytes", n, len(data))
		}
		cr := &countingReader{r: bytes.NewReader(data)}
		br := bufio.NewReaderSize(cr, bufSize)
		req, err := http.ReadRequest(br)
		if n == 0 {
			if err == nil {
				t.Fatalf("incomplete for the scan, parsed by ReadRequest: %+v", req)
			}
			return
		}
		if reason != "" || err != nil {
			return
		}
		if consumed := cr.n - br.Buffered(); consumed != n {
			t.Fatalf("scan found %d bytes of header, ReadRequest read %d", n, consumed)
		}
		if req.ProtoMajor != 1 || req.ProtoMinor != 1 {
			t.Fatalf("version %s passed the scan", req.Proto)
		}
		if !strings.HasPrefix(req.RequestURI, "/") {
			t.Fatalf("target %q passed the scan", req.RequestURI)
		}
		for _, k := range []string{"Upgrade", "Expect", "Transfer-Encoding"} {
			if _, ok := req.Header[k]; ok {
				t.Fatalf("%s field passed the scan", k)
			}
		}
		if req.TransferEncoding != nil {
			t.Fatalf("transfer encoding %v passed the scan", req.TransferEncoding)
		}
	})
}

// memConn is a connection whose client sent data and then ended its
// side; what the server writes is kept.
type memConn struct {
	remote, local net.Addr
	mu            sync.Mutex
	in            *bytes.Reader
	out           bytes.Buffer
	once          sync.Once
	done          chan struct{}
}

func newMemConn(data []byte, remote net.Addr) *memConn {
	return &memConn{
		remote: remote, local: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80},
		in: bytes.NewReader(data), done: make(chan struct{}),
	}
}

func (c *memConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return 0, net.ErrClosed
	default:
	}
	return c.in.Read(p)
}

func (c *memConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return 0, net.ErrClosed
	default:
	}
	return c.out.Write(p)
}

func (c *memConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}

func (c *memConn) output() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes())
}

func (c *memConn) LocalAddr() net.Addr              { return c.local }
func (c *memConn) RemoteAddr() net.Addr             { return c.remote }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// memServers are the two servers of FuzzServe, on memConns.
type memServers struct {
	stdLog, fastLog *reqLog
	stdLn           *Listener // the fast loop's hand-off listener, here for net/http alone
	fast            *Server
	port            atomic.Int64
}

func startMemServers(tb testing.TB) *memServers {
	m := &memServers{stdLog: &reqLog{}, fastLog: &reqLog{}, stdLn: NewListener(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80})}
	std := newHTTPServer(diffHandler(m.stdLog))
	std.ReadHeaderTimeout, std.IdleTimeout = 0, 0
	hl := NewListener(m.stdLn.Addr())
	fastH := diffHandler(m.fastLog)
	m.fast = New(Options{Handler: fastH, HandOff: hl, RecycleRequests: true})
	hsrv := newHTTPServer(fastH)
	hsrv.ReadHeaderTimeout, hsrv.IdleTimeout = 0, 0
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		std.Serve(m.stdLn)
	}()
	go func() {
		defer wg.Done()
		hsrv.Serve(hl)
	}()
	tb.Cleanup(func() {
		std.Close()
		hsrv.Close()
		wg.Wait()
	})
	return m
}

// serve has both servers serve a connection that sends data, and
// returns what each wrote and what its handler saw.
func (m *memServers) serve(tb testing.TB, data []byte) (std, fast result) {
	run := func(log *reqLog, start func(*memConn)) result {
		remote := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: int(m.port.Add(1))}
		c := newMemConn(data, remote)
		start(c)
		select {
		case <-c.done:
		case <-time.After(hangTimeout):
			tb.Fatalf("connection not closed; wrote %q", c.output())
		}
		return result{raw: c.output(), closed: true, seen: log.get(remote.String())}
	}
	std = run(m.stdLog, func(c *memConn) { m.stdLn.handOff(c) })
	fast = run(m.fastLog, func(c *memConn) { m.fast.ServeConn(c) })
	return std, fast
}

// FuzzServe sends the same bytes to net/http and to the fast loop (with
// net/http behind it): the handler must see the same requests, and the
// client get the same responses (but for the differences
// compareResults allows).
func FuzzServe(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	m := startMemServers(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return // header limits differ in how much net/http read ahead
		}
		std, fast := m.serve(t, data)
		if diffs := compareResults(std, fast); len(diffs) > 0 {
			t.Fatalf("%q:\n%s\nstd raw:  %q\nfast raw: %q", data, strings.Join(diffs, "\n"), trunc(std.raw), trunc(fast.raw))
		}
	})
}
