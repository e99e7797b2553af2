//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"sluice.dev/sluice/internal/testcert"
	"sluice.dev/sluice/test/grpcecho"
	"sluice.dev/sluice/test/testenv"
)

// indent prefixes every line of s with n spaces (PEM in YAML block scalars).
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

// appServiceYAML is serviceYAML with an appProtocol on its port.
func appServiceYAML(name, appProtocol string) string {
	return strings.Replace(serviceYAML(name), "    targetPort: http\n", "    targetPort: http\n    appProtocol: "+appProtocol+"\n", 1)
}

// listenOn listens on addr or fails the test.
func listenOn(t *testing.T, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestDataPlaneProtocols runs a real sluice proxy (with --h2c) in front of
// gRPC, h2c and HTTPS backends in this process and an echo backend: gRPC
// through TLS and h2c (every kind of call, deadline, cancel, a stream that
// outlives its endpoint's removal, UNAVAILABLE), h2c and verified HTTPS
// upstreams, the HTTPS redirect, HSTS and request IDs.
func TestDataPlaneProtocols(t *testing.T) {
	e := newEnv(t)
	certPEM, keyPEM := testcert.SelfSigned(t, "grpc.example.com", "secure.example.com", "tlsweb.default.svc")
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)

	// gRPC backends: two endpoints of Service grpc.
	gips := e.loopbacks(2)
	gport := testenv.FreePortOnAll(t, gips)
	servers := make([]*grpcecho.Server, 2)
	for i, ip := range gips {
		gs := grpc.NewServer()
		servers[i] = &grpcecho.Server{Name: fmt.Sprintf("grpc-%d", i)}
		servers[i].Register(gs)
		go gs.Serve(listenOn(t, fmt.Sprintf("%s:%d", ip, gport)))
		t.Cleanup(gs.Stop)
	}
	// An h2c backend and an HTTPS backend answering what they saw.
	seen := func(w http.ResponseWriter, r *http.Request) {
		sni := ""
		if r.TLS != nil {
			sni = r.TLS.ServerName
		}
		fmt.Fprintf(w, "%s %s %s", r.Proto, sni, r.Header.Get("X-Request-Id"))
	}
	hip := e.loopbacks(1)
	hport := testenv.FreePortOnAll(t, hip)
	h2c := &http.Server{Handler: http.HandlerFunc(seen), Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	go h2c.Serve(listenOn(t, fmt.Sprintf("%s:%d", hip[0], hport)))
	t.Cleanup(func() { h2c.Close() })
	tip := e.loopbacks(1)
	tport := testenv.FreePortOnAll(t, tip)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	tlsSrv := &http.Server{Handler: http.HandlerFunc(seen), TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}}}
	go tlsSrv.ServeTLS(listenOn(t, fmt.Sprintf("%s:%d", tip[0], tport)), "", "")
	t.Cleanup(func() { tlsSrv.Close() })
	echo := e.pool("echo", 1)
	echo.start(0)

	secret := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: certs
  namespace: default
type: kubernetes.io/tls
stringData:
  tls.crt: |
%s
  tls.key: |
%s
  ca.crt: |
%s
`, indent(string(certPEM), 4), indent(string(keyPEM), 4), indent(string(certPEM), 4))
	grpcIngress := `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: grpc
  namespace: default
  annotations:
    sluice.dev/ssl-redirect: "false"
spec:
  ingressClassName: sluice
  tls:
  - hosts: [grpc.example.com]
    secretName: certs
  rules:
  - host: grpc.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: grpc, port: {name: http}}}}
`
	webIngress := `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: default
  annotations:
    sluice.dev/ssl-redirect: "true"
    sluice.dev/hsts-max-age: "600"
    sluice.dev/hsts-include-subdomains: "true"
    sluice.dev/backend-ca-secret: certs
spec:
  ingressClassName: sluice
  tls:
  - hosts: [secure.example.com]
    secretName: certs
  rules:
  - host: secure.example.com
    http:
      paths:
      - {path: /h2c, pathType: Prefix, backend: {service: {name: h2web, port: {name: http}}}}
      - {path: /tls, pathType: Prefix, backend: {service: {name: tlsweb, port: {name: http}}}}
      - {path: /, pathType: Prefix, backend: {service: {name: echo, port: {name: http}}}}
`
	// Another tenant's host: never reachable over secure.example.com's
	// TLS connection (421), whatever its routes.
	otherIngress := `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: other
  namespace: other
spec:
  ingressClassName: sluice
  rules:
  - host: other.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: echo, port: {name: http}}}}
`
	grpcSlice := func(addrs ...string) string { return sliceYAML("grpc", "grpc-slice", gport, addrs) }
	e.write("objects.yaml", docs(ingressClassYAML, secret, grpcIngress, webIngress, otherIngress,
		appServiceYAML("grpc", "grpc"), appServiceYAML("h2web", "kubernetes.io/h2c"), appServiceYAML("tlsweb", "https"),
		serviceYAML("echo"), sliceYAML("h2web", "h2web-slice", hport, hip), sliceYAML("tlsweb", "tlsweb-slice", tport, tip),
		echo.slice([]int{0})))
	e.write("grpc-slice.yaml", grpcSlice(gips...))
	sp := e.startProxy("proxy", "--h2c", "--request-id")
	plainURL := fmt.Sprintf("http://127.0.0.1:%d", sp.http)
	httpsURL := fmt.Sprintf("https://127.0.0.1:%d", sp.https)
	// Ready means the manifests written above are loaded.

	tlsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "secure.example.com"}}}
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(c *http.Client, url, host string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = host
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s (host %s): %v", url, host, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}

	t.Run("redirect and hsts", func(t *testing.T) {
		res, _ := send(noRedirect, plainURL+"/a?b=c", "secure.example.com")
		if res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != "https://secure.example.com/a?b=c" {
			t.Errorf("plain HTTP to a TLS host: %d Location %q", res.StatusCode, res.Header.Get("Location"))
		}
		res, _ = send(tlsClient, httpsURL+"/", "secure.example.com")
		if res.StatusCode != 200 || res.Header.Get("Strict-Transport-Security") != "max-age=600; includeSubDomains" {
			t.Errorf("HTTPS: %d HSTS %q", res.StatusCode, res.Header.Get("Strict-Transport-Security"))
		}
		// Untrusted peer: X-Forwarded-Proto does not count.
		res, _ = send(noRedirect, plainURL+"/", "secure.example.com", "X-Forwarded-Proto", "https")
		if res.StatusCode != http.StatusPermanentRedirect {
			t.Errorf("untrusted X-Forwarded-Proto: %d", res.StatusCode)
		}
	})

	t.Run("misdirected", func(t *testing.T) {
		res, _ := send(tlsClient, httpsURL+"/", "other.example.com")
		if res.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("another namespace's host over secure.example.com's connection: %d, want 421", res.StatusCode)
		}
		res, _ = send(noRedirect, plainURL+"/", "other.example.com")
		if res.StatusCode == http.StatusMisdirectedRequest {
			t.Errorf("plain HTTP: %d, want it routed", res.StatusCode)
		}
	})

	t.Run("request id", func(t *testing.T) {
		res, body := send(tlsClient, httpsURL+"/?json=1", "secure.example.com", "X-Request-Id", "forged-by-client")
		id := res.Header.Get("X-Request-Id")
		var echoed struct{ Headers http.Header }
		if err := json.Unmarshal([]byte(body), &echoed); err != nil {
			t.Fatalf("echo answer %q: %v", body, err)
		}
		if len(id) != 32 || echoed.Headers.Get("X-Request-Id") != id {
			t.Errorf("response id %q, the pod saw %q", id, echoed.Headers.Get("X-Request-Id"))
		}
	})

	t.Run("h2c and https upstreams", func(t *testing.T) {
		res, body := send(tlsClient, httpsURL+"/h2c", "secure.example.com")
		if want := "HTTP/2.0  " + res.Header.Get("X-Request-Id"); body != want {
			t.Errorf("h2c upstream saw %q, want %q", body, want)
		}
		res, body = send(tlsClient, httpsURL+"/tls", "secure.example.com")
		if want := "HTTP/1.1 tlsweb.default.svc " + res.Header.Get("X-Request-Id"); body != want {
			t.Errorf("https upstream saw %q, want %q", body, want)
		}
	})

	dial := func(t *testing.T, useTLS bool) *grpc.ClientConn {
		target, creds := fmt.Sprintf("127.0.0.1:%d", sp.http), insecure.NewCredentials()
		if useTLS {
			target = fmt.Sprintf("127.0.0.1:%d", sp.https)
			creds = credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "grpc.example.com"})
		}
		cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds), grpc.WithAuthority("grpc.example.com"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, useTLS := range []bool{true, false} {
		t.Run(fmt.Sprintf("grpc tls=%v", useTLS), func(t *testing.T) {
			cc := dial(t, useTLS)
			for range 4 { // both endpoints
				if err := grpcecho.Exercise(ctx, cc, "grpc-"); err != nil {
					t.Fatal(err)
				}
			}
			before := servers[0].Canceled.Load() + servers[1].Canceled.Load()
			dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, err := grpcecho.Unary(dctx, cc, "sleep:1m")
			dcancel()
			if status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("deadline: %v", err)
			}
			cctx, ccancel := context.WithCancel(ctx)
			st, err := grpcecho.Stream(cctx, cc, "ServerStream")
			if err != nil {
				t.Fatal(err)
			}
			grpcecho.Send(st, "1000/50ms")
			st.CloseSend()
			if _, err := grpcecho.Recv(st); err != nil {
				t.Fatal(err)
			}
			ccancel()
			eventuallyTrue(t, "the pods to see the deadline and the cancel", func() bool {
				return servers[0].Canceled.Load()+servers[1].Canceled.Load() >= before+2
			})
		})
	}

	t.Run("endpoint removed mid-stream", func(t *testing.T) {
		cc := dial(t, true)
		st, err := grpcecho.Stream(ctx, cc, "Bidi")
		if err != nil {
			t.Fatal(err)
		}
		grpcecho.Send(st, "m0")
		first, err := grpcecho.Recv(st)
		if err != nil {
			t.Fatal(err)
		}
		owner, _, _ := strings.Cut(first, ":")
		other := 1
		if owner == "grpc-1" {
			other = 0
		}
		e.write("grpc-slice.yaml", grpcSlice(gips[other]))
		eventuallyTrue(t, "new calls to go to the remaining endpoint only", func() bool {
			for range 20 { // 20 in a row by chance before the change: 1 in a million
				got, err := grpcecho.Unary(ctx, cc, "x")
				if err != nil || !strings.HasPrefix(got, fmt.Sprintf("grpc-%d:", other)) {
					return false
				}
			}
			return true
		})
		for i := 1; i <= 5; i++ {
			v := fmt.Sprintf("m%d", i)
			if err := grpcecho.Send(st, v); err != nil {
				t.Fatalf("stream after its endpoint's removal: %v", err)
			}
			if got, err := grpcecho.Recv(st); err != nil || got != owner+":"+v {
				t.Fatalf("stream after its endpoint's removal: %q, %v", got, err)
			}
		}
		st.CloseSend()
		if _, err := grpcecho.Recv(st); err != io.EOF {
			t.Errorf("stream end: %v", err)
		}
	})

	t.Run("unavailable", func(t *testing.T) {
		cc := dial(t, false)
		e.write("grpc-slice.yaml", grpcSlice(e.loopbacks(1)[0])) // nothing listens there
		eventuallyTrue(t, "UNAVAILABLE from a dead endpoint", func() bool {
			_, err := grpcecho.Unary(ctx, cc, "x")
			s, _ := status.FromError(err)
			return s.Code() == codes.Unavailable && strings.Contains(s.Message(), "sluice: upstream connection failed")
		})
	})
}

// eventuallyTrue polls cond until it holds or a generous deadline passes.
func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
