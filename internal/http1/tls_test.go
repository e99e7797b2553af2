package http1

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// testTLSConfig is a server config with a fresh self-signed ECDSA
// certificate for a.test, offering h2 and http/1.1 as sluice does.
func testTLSConfig(t testing.TB) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "a.test"},
		DNSNames:     []string{"a.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		NextProtos:   []string{"h2", "http/1.1"},
		MinVersion:   tls.VersionTLS12,
	}
}

// tlsSeen answers with what a handler sees of a request's transport.
var tlsSeen = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil {
		fmt.Fprintf(w, "%s no TLS", r.Proto)
		return
	}
	s := r.TLS
	fmt.Fprintf(w, "%s complete=%v version=%x suite=%x sni=%s alpn=%q resumed=%v",
		r.Proto, s.HandshakeComplete, s.Version, s.CipherSuite, s.ServerName, s.NegotiatedProtocol, s.DidResume)
})

// tlsTarget is a TLS listener served either by net/http (std) or by
// ServeTLS with net/http behind its hand-offs (fast).
type tlsTarget struct {
	addr     string
	mu       sync.Mutex
	handoffs []string
}

func startTLSTarget(t *testing.T, fast bool, o Options) *tlsTarget {
	t.Helper()
	cfg := testTLSConfig(t)
	ln := listen(t)
	tg := &tlsTarget{addr: ln.Addr().String()}
	hsrv := newHTTPServer(tlsSeen)
	hsrv.TLSConfig = cfg
	var wg sync.WaitGroup
	if !fast {
		wg.Go(func() { hsrv.Serve(tls.NewListener(ln, cfg)) })
		t.Cleanup(func() {
			hsrv.Close()
			wg.Wait()
		})
		return tg
	}
	hl := NewListener(ln.Addr())
	o.Handler = tlsSeen
	o.HandOff = hl
	o.OnHandOff = func(reason string) {
		tg.mu.Lock()
		tg.handoffs = append(tg.handoffs, reason)
		tg.mu.Unlock()
	}
	s := New(o)
	var conns connTracker
	wg.Go(func() { hsrv.Serve(hl) })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.ServeTLS(tls.Server(conns.track(c), cfg)) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.Shutdown()
		hsrv.Close()
		conns.closeAll()
		wg.Wait()
	})
	return tg
}

func (tg *tlsTarget) handedOff() []string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]string(nil), tg.handoffs...)
}

// tlsExchange sends reqs, one at a time, on one TLS connection offering
// alpn, and returns the responses' status lines and bodies.
func tlsExchange(t *testing.T, addr string, alpn []string, reqs ...string) []string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "a.test", InsecureSkipVerify: true, NextProtos: alpn})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	var out []string
	for _, req := range reqs {
		io.WriteString(c, req)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("reading response: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		out = append(out, resp.Status+" "+string(b))
	}
	return out
}

// Over TLS, the fast loop and net/http give handlers the same request
// and TLS state, on the loop's own path and on its hand-offs.
func TestServeTLSMatchesNetHTTP(t *testing.T) {
	std := startTLSTarget(t, false, Options{})
	fast := startTLSTarget(t, true, Options{})
	get := "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
	for _, tc := range []struct {
		name     string
		alpn     []string
		reqs     []string
		handoffs []string
	}{
		{"alpn http/1.1, kept alive", []string{"http/1.1"}, []string{get, get}, nil},
		{"no alpn", nil, []string{get}, nil},
		{"HTTP/1.0", []string{"http/1.1"}, []string{"GET / HTTP/1.0\r\nHost: a.test\r\n\r\n"}, []string{reasonVersion}},
		{"chunked", []string{"http/1.1"}, []string{"POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", get}, []string{reasonTransferEncoding}},
		{"bad request", []string{"http/1.1"}, []string{"GET / HTTP/1.1\r\n\r\n"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(fast.handedOff())
			want := tlsExchange(t, std.addr, tc.alpn, tc.reqs...)
			got := tlsExchange(t, fast.addr, tc.alpn, tc.reqs...)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("fast:\n%s\nnet/http:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if h := fast.handedOff()[before:]; fmt.Sprint(h) != fmt.Sprint(tc.handoffs) {
				t.Errorf("hand-offs %v, want %v", h, tc.handoffs)
			}
		})
	}
}

// A connection that negotiated h2 goes to the hand-off listener as the
// *tls.Conn itself, so that net/http serves it as HTTP/2.
func TestServeTLSHandsOffH2(t *testing.T) {
	cfg := testTLSConfig(t)
	hl := NewListener(&net.TCPAddr{})
	s := New(Options{Handler: tlsSeen, HandOff: hl})
	ln := listen(t)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	go s.ServeTLS(tls.Server(server, cfg))
	go tls.Client(client, &tls.Config{ServerName: "a.test", InsecureSkipVerify: true, NextProtos: []string{"h2"}}).Handshake()
	c, err := hl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc, ok := c.(*tls.Conn)
	if !ok {
		t.Fatalf("handed off a %T, want *tls.Conn", c)
	}
	if st := tc.ConnectionState(); !st.HandshakeComplete || st.NegotiatedProtocol != "h2" {
		t.Errorf("handed-off connection: complete %v, ALPN %q", st.HandshakeComplete, st.NegotiatedProtocol)
	}
}

// A handshake that fails, or never finishes within ReadHeaderTimeout,
// closes the connection; plain HTTP gets net/http's 400 first.
func TestServeTLSHandshakeFails(t *testing.T) {
	tg := startTLSTarget(t, true, Options{ReadHeaderTimeout: 50 * time.Millisecond})
	for _, tc := range []struct{ name, send, want string }{
		{"silent", "", ""},
		{"partial hello", "\x16\x03\x01\x02\x00\x01", ""},
		{"not TLS", "\x00\x01\x02\x03\x04\x05\x06", ""},
		{"plain HTTP", "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", tg.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tc.send)
			c.SetReadDeadline(time.Now().Add(hangTimeout))
			got, err := io.ReadAll(c)
			if err != nil && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("connection not closed: %v", err)
			}
			// A TLS alert may precede the close; only plain HTTP gets text.
			if tc.want != "" && string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLooksLikeHTTP(t *testing.T) {
	for in, want := range map[string]bool{
		"GET /": true, "HEAD ": true, "POST ": true, "PUT /": true, "OPTIO": true,
		"\x16\x03\x01\x02\x00": false, "PATCH": false, "get /": false,
	} {
		var h [5]byte
		copy(h[:], in)
		if got := looksLikeHTTP(h); got != want {
			t.Errorf("looksLikeHTTP(%q) = %v", in, got)
		}
	}
}

// writeCounter counts the writes to the connection below TLS.
type writeCounter struct {
	net.Conn
	mu     sync.Mutex
	writes int
}

func (c *writeCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *writeCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// A response that fits the write buffer goes out in one flush: over TLS,
// one record and one write(2) per request.
func TestServeTLSOneWritePerResponse(t *testing.T) {
	cfg := testTLSConfig(t)
	s := New(Options{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, strings.Repeat("x", 100))
	}), HandOff: NewListener(&net.TCPAddr{})})
	ln := listen(t)
	defer ln.Close()
	wc := make(chan *writeCounter, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(wc)
			return
		}
		w := &writeCounter{Conn: c}
		wc <- w
		s.ServeTLS(tls.Server(w, cfg))
	}()
	const n = 10
	req := "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "a.test", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := <-wc
	br := bufio.NewReader(c)
	do := func() {
		io.WriteString(c, req)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	do() // after the handshake's writes (and TLS 1.3's session tickets)
	before := w.count()
	for range n {
		do()
	}
	if got := w.count() - before; got != n {
		t.Errorf("%d writes for %d responses, want one each", got, n)
	}
}

// tlsDialer returns a target's dial over TLS, offering http/1.1 only.
func tlsDialer(addr string) func() (net.Conn, error) {
	return func() (net.Conn, error) {
		d := &net.Dialer{Timeout: hangTimeout}
		return tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: "a.test", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	}
}

// startStdTLS is startStd behind net/http's TLS listener.
func startStdTLS(t testing.TB, mk func(*reqLog) http.Handler) *target {
	tg := &target{name: "std", log: &reqLog{}, conns: &connTracker{}}
	ln := listen(t)
	tg.addr = ln.Addr().String()
	tg.dial = tlsDialer(tg.addr)
	srv := newHTTPServer(mk(tg.log))
	cfg := testTLSConfig(t)
	srv.TLSConfig = cfg
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(tls.NewListener(trackingListener{ln, tg.conns}, cfg))
	}()
	t.Cleanup(func() {
		srv.Close()
		tg.conns.closeAll()
		<-done
	})
	return tg
}

// startFastTLS is startFast with ServeTLS in the place of ServeConn.
func startFastTLS(t testing.TB, mk func(*reqLog) http.Handler) *target {
	tg := &target{name: "fast", log: &reqLog{}, conns: &connTracker{}, handoffs: map[string]int{}}
	ln := listen(t)
	tg.addr = ln.Addr().String()
	tg.dial = tlsDialer(tg.addr)
	h := mk(tg.log)
	hl := NewListener(ln.Addr())
	tg.fast = New(Options{Handler: h, HandOff: hl, OnHandOff: func(reason string) {
		tg.mu.Lock()
		tg.handoffs[reason]++
		tg.mu.Unlock()
	}})
	cfg := testTLSConfig(t)
	hsrv := newHTTPServer(h)
	hsrv.TLSConfig = cfg
	var wg sync.WaitGroup
	wg.Go(func() { hsrv.Serve(hl) })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { tg.fast.ServeTLS(tls.Server(tg.conns.track(c), cfg)) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		tg.fast.Shutdown()
		hsrv.Close()
		tg.conns.closeAll()
		wg.Wait()
	})
	return tg
}

// The differential cases, over TLS: the loop behind ServeTLS answers as
// net/http's server over TLS does, and every request on either path
// carries Request.TLS.
func TestDifferentialTLS(t *testing.T) {
	var noTLS sync.Map // handler target name → a request without TLS state
	mk := func(name string) func(*reqLog) http.Handler {
		return func(l *reqLog) http.Handler {
			h := diffHandler(l)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.TLS == nil || !r.TLS.HandshakeComplete {
					noTLS.Store(name, r.Method+" "+r.RequestURI)
				}
				h.ServeHTTP(w, r)
			})
		}
	}
	std, fast := startStdTLS(t, mk("std")), startFastTLS(t, mk("fast"))
	runConcurrently(t, diffCases, func(t *testing.T, tc diffCase) { runDiffCase(t, std, fast, tc) })
	noTLS.Range(func(k, v any) bool {
		t.Errorf("%s: request %v without Request.TLS", k, v)
		return true
	})
}
