//go:build integration

package integration

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestACMEAndPaths runs a real sluice proxy with the first state of a
// cert-manager HTTP-01 issuance: a host listed in spec.tls whose Secret
// does not exist yet, and the solver's Ingress for the challenge path. The
// challenge is served over plain HTTP (everything else on the host is
// redirected), the TLS handshake completes with the generated default
// certificate, and paths are normalised over HTTP/1.1 (sluice's own loop)
// and HTTP/2 alike.
func TestACMEAndPaths(t *testing.T) {
	e := newEnv(t)
	echo := e.pool("echo", 1)
	echo.start(0)
	app := `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: app
  namespace: default
  annotations:
    sluice.dev/ssl-redirect: "true" # the redirect is opt-in
spec:
  ingressClassName: sluice
  tls:
  - hosts: [app.example.com]
    secretName: app-tls
  rules:
  - host: app.example.com
    http:
      paths:
      - {path: /public, pathType: Prefix, backend: {service: {name: echo, port: {name: http}}}}
`
	solver := `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: cm-acme-http-solver-x7k2p
  namespace: default
spec:
  ingressClassName: sluice
  rules:
  - host: app.example.com
    http:
      paths:
      - {path: /.well-known/acme-challenge/t0ken, pathType: ImplementationSpecific, backend: {service: {name: echo, port: {name: http}}}}
`
	e.write("objects.yaml", docs(ingressClassYAML, app, solver, serviceYAML("echo"), echo.slice([]int{0})))
	sp := e.startProxy("proxy")

	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(c *http.Client, url string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = "app.example.com"
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer res.Body.Close()
		if strings.HasPrefix(url, "https:") && res.ProtoMajor != 2 {
			t.Errorf("GET %s: answered over %s, want HTTP/2", url, res.Proto)
		}
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	plain := fmt.Sprintf("http://127.0.0.1:%d", sp.http)
	if status, body := get(noRedirect, plain+"/.well-known/acme-challenge/t0ken"); status != 200 || !strings.HasSuffix(body, " /.well-known/acme-challenge/t0ken\n") {
		t.Errorf("challenge over plain HTTP: %d %q, want 200 from the solver", status, body)
	}
	if status, _ := get(noRedirect, plain+"/public/a"); status != http.StatusPermanentRedirect {
		t.Errorf("plain HTTP to the TLS host: %d, want 308", status)
	}

	tlsConf := &tls.Config{ServerName: "app.example.com", InsecureSkipVerify: true}
	h2 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true}}
	https := fmt.Sprintf("https://127.0.0.1:%d", sp.https)
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", sp.https), &tls.Config{ServerName: "app.example.com", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatalf("TLS handshake for a host whose Secret is missing: %v", err)
	}
	defer conn.Close()
	if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "sluice-default.invalid" {
		t.Errorf("served certificate %q, want the generated default", cn)
	}
	br := bufio.NewReader(conn)
	http1 := func(target string) (int, string) {
		t.Helper()
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: app.example.com\r\n\r\n", target)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s over HTTP/1.1: %v", target, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, string(b)
	}
	for _, tc := range []struct {
		target string
		status int
		path   string // the path echo saw
	}{
		{"/public//a/./b/../c?q=1", 200, "/public/a/c"},
		{"/public/../internal", 404, ""},
		{"/public/%2e%2e/internal", 400, ""},
		{"/../public/x", 200, "/public/x"},
	} {
		s1, b1 := http1(tc.target)
		s2, b2 := get(h2, https+tc.target)
		for proto, got := range map[string][2]any{"HTTP/1.1": {s1, b1}, "HTTP/2": {s2, b2}} {
			status, body := got[0].(int), got[1].(string)
			if status != tc.status || tc.path != "" && !strings.HasSuffix(body, " "+tc.path+"\n") {
				t.Errorf("%s %s: %d %q, want %d with path %q", proto, tc.target, status, body, tc.status, tc.path)
			}
		}
	}
}
