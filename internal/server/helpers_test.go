package server

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fastHTTP1 is Options.FastHTTP1 for the tests' servers: on, as sluice
// runs by default; scripts/test.sh runs the package once more with it off
// (-fast-http1=false) so that net/http's HTTP/1.1 path is covered too.
var fastHTTP1 = flag.Bool("fast-http1", true, "serve plain HTTP with the fast HTTP/1.1 loop")

// testServer is a running Server with handles to drive its lifecycle.
type testServer struct {
	*Server
	t       *testing.T
	reg     *prometheus.Registry
	signals chan os.Signal
	drained chan struct{}
	cancel  context.CancelFunc
	done    chan error

	httpAddr, httpsAddr, adminAddr string
}

// echoRemote answers with the client address the handler sees.
var echoRemote = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, r.RemoteAddr)
})

// start runs a server on 127.0.0.1:0 listeners; change adjusts the options.
func start(t *testing.T, change func(*Options)) *testServer {
	t.Helper()
	ts := &testServer{
		t:       t,
		reg:     prometheus.NewRegistry(),
		signals: make(chan os.Signal, 3),
		drained: make(chan struct{}),
		done:    make(chan error, 1),
	}
	o := Options{
		HTTPAddress:  "127.0.0.1:0",
		AdminAddress: "127.0.0.1:0",
		FastHTTP1:    *fastHTTP1,
		Handler:      echoRemote,
		DrainMaxWait: time.Hour,
		Drained:      ts.drained,
		Gatherer:     ts.reg,
		Registerer:   ts.reg,
		Logger:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if change != nil {
		change(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts.Server = s
	h, hs, a := s.Addrs()
	for _, p := range []struct {
		dst  *string
		addr net.Addr
	}{{&ts.httpAddr, h}, {&ts.httpsAddr, hs}, {&ts.adminAddr, a}} {
		if p.addr != nil {
			*p.dst = p.addr.String()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	go func() { ts.done <- s.Run(ctx, ts.signals) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ts.done:
			return
		default:
		}
		ts.signals <- syscall.SIGTERM // forces a stop stuck on a connection
		select {
		case <-ts.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel and signal")
		}
	})
	return ts
}

func (ts *testServer) signal() { ts.signals <- syscall.SIGTERM }

// wait returns Run's result; a generous failsafe turns a hang into a
// failure instead of a test timeout.
func (ts *testServer) wait() error {
	ts.t.Helper()
	select {
	case err := <-ts.done:
		ts.done <- err // for Cleanup
		return err
	case <-time.After(20 * time.Second):
		ts.t.Fatalf("Run did not return; state %v", ts.State())
		return nil
	}
}

// waitState polls until the server reaches st (or a failsafe expires).
func (ts *testServer) waitState(st State) {
	ts.t.Helper()
	for range 2000 {
		if ts.State() == st {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	ts.t.Fatalf("state %v, want %v", ts.State(), st)
}

func (ts *testServer) states() []State {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []State
	for _, tr := range ts.history {
		out = append(out, tr.state)
	}
	return out
}

func (ts *testServer) lastReason() string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for i := len(ts.history) - 1; i >= 0; i-- {
		if ts.history[i].state == StateStopping {
			return ts.history[i].reason
		}
	}
	return ""
}

func (ts *testServer) wantStates(want ...State) {
	ts.t.Helper()
	if got := ts.states(); fmt.Sprint(got) != fmt.Sprint(want) {
		ts.t.Errorf("states %v, want %v", got, want)
	}
}

// metric returns the value of a sample of name whose labels include the
// given name=value pair ("" matches an unlabelled metric).
func (ts *testServer) metric(name, label, value string) float64 {
	ts.t.Helper()
	mfs, err := ts.reg.Gather()
	if err != nil {
		ts.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					match = true
				}
			}
			if !match {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// get fetches url with a fresh client (no connection reuse) and returns
// the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// rawConn is a client connection speaking HTTP/1.1 by hand, to see
// exactly what the server does with the connection.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

func (c *rawConn) do(t *testing.T, req string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatalf("writing request: %v", err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(strings.NewReader(string(b)))
	return resp
}

// closedByServer reports whether the server closed the connection.
func (c *rawConn) closedByServer() bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.r.ReadByte()
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// certs hands out self-signed certificates by SNI; set replaces one.
type certs struct {
	mu sync.Mutex
	m  map[string]*tls.Certificate
}

func newCert(t *testing.T, name, cn string) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (c *certs) set(name string, cert *tls.Certificate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*tls.Certificate{}
	}
	c.m[name] = cert
}

func (c *certs) get(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cert, ok := c.m[hello.ServerName]; ok {
		return cert, nil
	}
	return nil, fmt.Errorf("no certificate for %q", hello.ServerName)
}

// tlsClient returns an HTTPS client for server name sni that keeps
// connections alive. HTTP/2 unless h1.
func tlsClient(sni string, h1 bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{ServerName: sni, InsecureSkipVerify: true},
		ForceAttemptHTTP2: !h1,
	}
	if h1 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr}
}

// peerCN returns the common name of the certificate the server showed.
func peerCN(resp *http.Response) string {
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		return ""
	}
	return resp.TLS.PeerCertificates[0].Subject.CommonName
}

// tcpPair is a connected pair of TCP connections on loopback, the client's
// end and the server's, both closed when the test ends.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}
