//go:build e2e

package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// answer is what one request of the tenancy suite got back.
type answer struct {
	status   int
	echo     string // X-Echo-Name: the echo pod that answered; "" the proxy (or a redirect)
	path     string // the path the echo pod saw (last field of its body)
	location string
	proto    string
	cert     string // common name of the certificate served over TLS
}

// from says whether the answer came from an echo pod of app; app "" means
// from no echo pod (the proxy answered).
func (a answer) from(app string) bool {
	if app == "" {
		return a.echo == ""
	}
	return strings.HasPrefix(a.echo, app+"-")
}

func (a answer) String() string {
	return fmt.Sprintf("%d %s from %q path %q location %q cert %q", a.status, a.proto, a.echo, a.path, a.location, a.cert)
}

// get sends one HTTP/1.1 request for target (sent as written: no
// cleaning of dot-segments on the client side) with Host host to addr.
func get(addr, host, target string) (answer, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return answer{}, err
	}
	defer conn.Close()
	return exchange(conn, host, target)
}

// tlsGetSNI is get over TLS with server name sni.
func tlsGetSNI(addr, sni, host, target string) (answer, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // the test inspects which certificate it got
	if err != nil {
		return answer{}, err
	}
	defer conn.Close()
	a, err := exchange(conn, host, target)
	a.cert = conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	return a, err
}

// tlsRaw sends request (HTTP/1.1, as written) over TLS with server name
// sni to addr.
func tlsRaw(addr, sni, request string) (answer, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // see tlsGetSNI
	if err != nil {
		return answer{}, err
	}
	defer conn.Close()
	return send(conn, request)
}

func exchange(conn net.Conn, host, target string) (answer, error) {
	return send(conn, fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, host))
}

func send(conn net.Conn, request string) (answer, error) {
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		return answer{}, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return answer{}, err
	}
	return readAnswer(resp)
}

func readAnswer(resp *http.Response) (answer, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	a := answer{status: resp.StatusCode, echo: resp.Header.Get("X-Echo-Name"), location: resp.Header.Get("Location"), proto: resp.Proto}
	if f := strings.Fields(string(body)); a.echo != "" && len(f) > 0 {
		a.path = f[len(f)-1]
	}
	return a, err
}

// h2Get sends one HTTP/2 request over TLS with server name sni and
// :authority host to addr.
func h2Get(addr, sni, host, target string) (answer, error) {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{ServerName: sni, InsecureSkipVerify: true}, //nolint:gosec // see tlsGetSNI
		ForceAttemptHTTP2: true,
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest("GET", "https://"+addr+target, nil)
	if err != nil {
		return answer{}, err
	}
	req.Host = host
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		return answer{}, err
	}
	a, err := readAnswer(resp)
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		a.cert = resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	return a, err
}

// servedCert is the common name of the certificate the public fleet
// serves (through HAProxy's TCP frontend) for server name sni.
func (tn *tenancy) servedCert(sni string) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", tn.publicTLS(),
		&tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // see tlsGetSNI
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}
