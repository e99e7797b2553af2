package proxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/test/grpcecho"
)

// testCert returns a self-signed certificate for host and its PEM.
func testCert(t *testing.T, host string) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// grpcBackend starts a grpcecho server on loopback, over TLS when cert is
// given.
func grpcBackend(t *testing.T, name string, cert *tls.Certificate) (*grpcecho.Server, string) {
	t.Helper()
	var opts []grpc.ServerOption
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewServerTLSFromCert(cert)))
	}
	gs := grpc.NewServer(opts...)
	s := &grpcecho.Server{Name: name}
	s.Register(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return s, ln.Addr().String()
}

// grpcFront serves p with HTTP/2 over TLS (tls) or h2c and returns a
// client connection to it.
func grpcFront(t *testing.T, p *Proxy, useTLS bool) *grpc.ClientConn {
	t.Helper()
	srv := httptest.NewUnstartedServer(p)
	var creds credentials.TransportCredentials
	if useTLS {
		srv.EnableHTTP2 = true
		srv.StartTLS()
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		creds = credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "example.com"})
	} else {
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetHTTP1(true)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Start()
		creds = insecure.NewCredentials()
	}
	t.Cleanup(srv.Close)
	cc, err := grpc.NewClient(srv.Listener.Addr().String(), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func grpcTable(proto route.Protocol, ut *route.UpstreamTLS, addrs ...string) *route.Table {
	b := backendOf("ns/grpc", defaults(), addrs...)
	b.Protocol, b.TLS = proto, ut
	return tableOf(b)
}

// TestGRPC runs every kind of call through the proxy, from clients over
// TLS and h2c, to h2c and TLS (gRPCs) upstreams.
func TestGRPC(t *testing.T) {
	cert, caPEM := testCert(t, "pods.example.com")
	for _, tc := range []struct {
		name     string
		frontTLS bool
		proto    route.Protocol
	}{
		{"tls to h2c", true, route.ProtocolGRPC},
		{"h2c to h2c", false, route.ProtocolGRPC},
		{"h2c to tls", false, route.ProtocolGRPCS},
		{"tls to tls", true, route.ProtocolGRPCS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s *grpcecho.Server
			var addr string
			var ut *route.UpstreamTLS
			if tc.proto.TLS() {
				s, addr = grpcBackend(t, "a", &cert)
				ut = &route.UpstreamTLS{ServerName: "pods.example.com", CA: caPEM}
			} else {
				s, addr = grpcBackend(t, "a", nil)
			}
			p := New(Options{})
			p.Update(grpcTable(tc.proto, ut, addr))
			cc := grpcFront(t, p, tc.frontTLS)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			checkGRPCCalls(t, ctx, cc, s)
		})
	}
}

func checkGRPCCalls(t *testing.T, ctx context.Context, cc *grpc.ClientConn, s *grpcecho.Server) {
	t.Helper()
	if got, err := grpcecho.Unary(ctx, cc, "hi"); err != nil || got != "a:hi" {
		t.Fatalf("unary: %q, %v", got, err)
	}
	_, err := grpcecho.Unary(ctx, cc, "fail:5")
	if status.Code(err) != codes.NotFound {
		t.Errorf("unary failing with NOT_FOUND: %v", err)
	}

	st, err := grpcecho.Stream(ctx, cc, "ServerStream")
	if err != nil {
		t.Fatal(err)
	}
	grpcecho.Send(st, "3")
	st.CloseSend()
	var got []string
	for {
		m, err := grpcecho.Recv(st)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("server stream: %v", err)
		}
		got = append(got, m)
	}
	if strings.Join(got, ",") != "a:0,a:1,a:2" || st.Trailer().Get("served-by")[0] != "a" {
		t.Errorf("server stream: %v, trailer %v", got, st.Trailer())
	}

	st, err = grpcecho.Stream(ctx, cc, "ClientStream")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"x", "y", "z"} {
		grpcecho.Send(st, v)
	}
	st.CloseSend()
	if m, err := grpcecho.Recv(st); err != nil || m != "a:3:xyz" {
		t.Errorf("client stream: %q, %v", m, err)
	}

	st, err = grpcecho.Stream(ctx, cc, "Bidi")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "2"} {
		grpcecho.Send(st, v)
		if m, err := grpcecho.Recv(st); err != nil || m != "a:"+v {
			t.Errorf("bidi %s: %q, %v", v, m, err)
		}
	}
	st.CloseSend()
	if _, err := grpcecho.Recv(st); err != io.EOF {
		t.Errorf("bidi end: %v", err)
	}

	// A deadline reaches the pod (grpc-timeout) and ends the call there.
	before := s.Canceled.Load()
	dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = grpcecho.Unary(dctx, cc, "sleep:1m")
	dcancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("deadline: %v", err)
	}
	// The client canceling a stream cancels the pod's side.
	cctx, ccancel := context.WithCancel(ctx)
	st, err = grpcecho.Stream(cctx, cc, "ServerStream")
	if err != nil {
		t.Fatal(err)
	}
	grpcecho.Send(st, "1000/50ms")
	st.CloseSend()
	if _, err := grpcecho.Recv(st); err != nil {
		t.Fatal(err)
	}
	ccancel()
	eventually(t, "the pod to see both cancellations", func() bool { return s.Canceled.Load() >= before+2 })
}

// TestGRPCUnavailable: with no endpoint reachable (and none at all), a gRPC
// client gets UNAVAILABLE, not an HTTP error.
func TestGRPCUnavailable(t *testing.T) {
	p := New(Options{})
	p.Update(grpcTable(route.ProtocolGRPC, nil, deadAddr(t)))
	cc := grpcFront(t, p, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := grpcecho.Unary(ctx, cc, "hi")
	if s, _ := status.FromError(err); s.Code() != codes.Unavailable || !strings.Contains(s.Message(), "upstream connection failed") {
		t.Errorf("dead endpoint: %v", err)
	}
	p.Update(grpcTable(route.ProtocolGRPC, nil))
	if _, err := grpcecho.Unary(ctx, cc, "hi"); status.Code(err) != codes.Unavailable {
		t.Errorf("no endpoints: %v", err)
	}
}

// TestGRPCRetryAndStreamsCap: a dead endpoint is retried on a live one
// before the call's body is sent; concurrent calls beyond the per
// connection cap open more connections.
func TestGRPCRetryAndStreamsCap(t *testing.T) {
	s, addr := grpcBackend(t, "a", nil)
	p := New(Options{MaxStreamsPerConnection: 2})
	p.Update(grpcTable(route.ProtocolGRPC, nil, addr, deadAddr(t)))
	cc := grpcFront(t, p, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 6 {
		if _, err := grpcecho.Unary(ctx, cc, "hi"); err != nil {
			t.Fatalf("with one dead endpoint: %v", err)
		}
	}
	// Five streams held open at once on a cap of 2 per connection.
	var streams []grpc.ClientStream
	for range 5 {
		st, err := grpcecho.Stream(ctx, cc, "Bidi")
		if err != nil {
			t.Fatal(err)
		}
		grpcecho.Send(st, "x")
		if _, err := grpcecho.Recv(st); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	p.mu.Lock()
	var h2 *h2pool
	for _, pl := range p.ups[addr].pools {
		h2 = pl.h2
	}
	p.mu.Unlock()
	h2.mu.Lock()
	n := len(h2.conns)
	h2.mu.Unlock()
	if n != 3 {
		t.Errorf("connections for 5 streams at 2 per connection = %d, want 3", n)
	}
	for _, st := range streams {
		st.CloseSend()
		if _, err := grpcecho.Recv(st); !errors.Is(err, io.EOF) {
			t.Errorf("closing stream: %v", err)
		}
	}
	_ = s
}

// TestHTTPSAndH2CUpstreams: HTTPS endpoints are verified against the
// backend CA with the backend's SNI (and skipped only when asked); h2c
// endpoints get HTTP/2.
func TestHTTPSAndH2CUpstreams(t *testing.T) {
	cert, caPEM := testCert(t, "web.ns.svc")
	_, otherCA := testCert(t, "web.ns.svc")
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Proto + " " + r.TLS.ServerName))
	}))
	tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	h2cSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Proto))
	}))
	h2cSrv.Config.Protocols = new(http.Protocols)
	h2cSrv.Config.Protocols.SetUnencryptedHTTP2(true)
	h2cSrv.Start()
	t.Cleanup(h2cSrv.Close)

	for _, tc := range []struct {
		name   string
		proto  route.Protocol
		ut     *route.UpstreamTLS
		addr   string
		status int
		body   string
	}{
		{"https verified", route.ProtocolHTTPS, &route.UpstreamTLS{ServerName: "web.ns.svc", CA: caPEM}, tlsSrv.Listener.Addr().String(), 200, "HTTP/1.1 web.ns.svc"},
		{"https wrong ca", route.ProtocolHTTPS, &route.UpstreamTLS{ServerName: "web.ns.svc", CA: otherCA}, tlsSrv.Listener.Addr().String(), 502, ""},
		{"https wrong name", route.ProtocolHTTPS, &route.UpstreamTLS{ServerName: "other.ns.svc", CA: caPEM}, tlsSrv.Listener.Addr().String(), 502, ""},
		{"https skip verify", route.ProtocolHTTPS, &route.UpstreamTLS{ServerName: "other.ns.svc", InsecureSkipVerify: true}, tlsSrv.Listener.Addr().String(), 200, "HTTP/1.1 other.ns.svc"},
		{"h2c", route.ProtocolH2C, nil, h2cSrv.Listener.Addr().String(), 200, "HTTP/2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, srv, c := front(t, Options{})
			b := backendOf("ns/web", route.Policy{Retries: 0}, tc.addr)
			b.Protocol, b.TLS = tc.proto, tc.ut
			p.Update(tableOf(b))
			r := get(t, c, srv.URL+"/")
			if r.status != tc.status || (tc.body != "" && r.body != tc.body) {
				t.Errorf("got %d %q, want %d %q", r.status, r.body, tc.status, tc.body)
			}
		})
	}
}

func TestGRPCTimeout(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"1S": time.Second, "200m": 200 * time.Millisecond, "99999999H": math.MaxInt64, "99999999M": 99999999 * time.Minute, "5n": 5,
		"": -1, "S": -1, "100": -1, "1s": -1, "123456789S": -1, "-1S": -1, "+1S": -1, "1 S": -1,
	} {
		d, ok := grpcTimeout(v)
		if ok != (want >= 0) || ok && d != want {
			t.Errorf("grpcTimeout(%q) = %v, %v; want %v", v, d, ok, want)
		}
	}
}

// FuzzGRPCTimeout: any header value parses to a non-negative duration or
// is refused, without panicking.
func FuzzGRPCTimeout(f *testing.F) {
	for _, s := range []string{"1S", "99999999H", "0n", "", "1x", "-5m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if d, ok := grpcTimeout(v); ok && d < 0 {
			t.Fatalf("grpcTimeout(%q) = %v", v, d)
		}
	})
}
