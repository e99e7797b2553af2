//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestL7Timeouts: per-Ingress read and send timeouts through a real sluice
// proxy, with nginx's semantics (issue 27): a timeout bounds the gap
// between two successive reads of the upstream's response, or writes of
// the request to it, not the whole exchange. The upstream is a real HTTP
// server on a loopback address. Both proxy paths are taken: plain requests
// go the synchronous path, requests with Expect: 100-continue the
// Transport's.
//
//   - a response whose body comes in gaps shorter than the read timeout,
//     taking longer than it in all, arrives whole;
//   - a body that stalls longer is cut: the client's response is aborted
//     and the upstream connection closed (the upstream sees it);
//   - a request body sent by the client in gaps, longer in all than the
//     send timeout, reaches the upstream whole;
//   - an upstream that stops reading a large body gets a 504 to the client;
//   - an nginx-class Ingress's proxy-read-timeout also bounds the wait for
//     the response header (504), as in nginx.
func TestL7Timeouts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.9.52:0")
	if err != nil {
		t.Fatal(err)
	}
	var closedByProxy atomic.Int64
	gap := 300 * time.Millisecond // the timeouts are 1s
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.URL.Path != "/deaf" && r.URL.Path != "/count" {
			// A body read to its end lets the server notice the
			// connection closing (r.Context).
			io.Copy(io.Discard, r.Body)
		}
		switch r.URL.Path {
		case "/gaps": // 4 chunks 300ms apart
			w.WriteHeader(200)
			for i := 0; i < 4; i++ {
				fmt.Fprintf(w, "chunk%d;", i)
				rc.Flush()
				time.Sleep(gap)
			}
		case "/stall": // a chunk, then nothing until the proxy gives up
			w.WriteHeader(200)
			io.WriteString(w, "part;")
			rc.Flush()
			select {
			case <-r.Context().Done():
				closedByProxy.Add(1)
			case <-time.After(20 * time.Second):
			}
		case "/count": // reads the whole body
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				w.WriteHeader(400)
				return
			}
			fmt.Fprint(w, n)
		case "/deaf": // never reads the body
			select {
			case <-r.Context().Done():
				closedByProxy.Add(1)
			case <-time.After(20 * time.Second):
			}
		case "/late": // the header after 3s
			select {
			case <-r.Context().Done():
				closedByProxy.Add(1)
			case <-time.After(3 * time.Second):
				io.WriteString(w, "late")
			}
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	e := newEnv(t)
	nginxClass := "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: nginx\nspec:\n  controller: k8s.io/ingress-nginx\n"
	objs := docs(ingressClassYAML, nginxClass, serviceYAML("slow"), sliceYAML("slow", "slow-slice", port, []string{"127.0.9.52"}),
		l7Ingress("timeouts", "sluice", "timeouts.test", map[string]string{
			"sluice.dev/proxy-read-timeout": "1", "sluice.dev/proxy-send-timeout": "1s"}, rule{"/", "slow"}),
		l7Ingress("nginx", "nginx", "nginx.test", map[string]string{
			"nginx.ingress.kubernetes.io/proxy-read-timeout": "1"}, rule{"/", "slow"}),
	)
	base := startL7(t, e, objs, "timeouts.test", "/count", "--ingress-nginx-compat")

	do := func(method, host, path string, body io.Reader, expect bool) (int, string, error) {
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if expect {
			req.Header.Set("Expect", "100-continue")
		}
		tr := &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: 5 * time.Second}
		defer tr.CloseIdleConnections()
		res, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}
	wrong := 0
	check := func(name string, ok bool, format string, args ...any) {
		if !ok {
			wrong++
			t.Errorf(name+": "+format, args...)
		}
	}
	for _, transport := range []bool{false, true} {
		path := map[bool]string{false: "synchronous", true: "transport"}[transport]
		// A POST with a small body takes the Transport path with Expect.
		small := func() io.Reader {
			if transport {
				return bytes.NewReader([]byte("x"))
			}
			return nil
		}
		method := map[bool]string{false: "GET", true: "POST"}[transport]

		status, body, err := do(method, "timeouts.test", "/gaps", small(), transport)
		check(path+" gaps", err == nil && status == 200 && body == "chunk0;chunk1;chunk2;chunk3;", "status %d body %q err %v", status, body, err)

		before := closedByProxy.Load()
		status, body, err = do(method, "timeouts.test", "/stall", small(), transport)
		check(path+" stall", err != nil && status == 200 && body == "part;", "status %d body %q err %v, want an aborted body", status, body, err)
		waitFor(t, 10*time.Second, path+": the upstream connection closed by the proxy", func() bool { return closedByProxy.Load() > before })

		pr, pw := io.Pipe()
		go func() {
			for i := 0; i < 4; i++ {
				if _, err := pw.Write(bytes.Repeat([]byte("b"), 1000)); err != nil {
					return
				}
				time.Sleep(gap)
			}
			pw.Close()
		}()
		status, body, err = do("POST", "timeouts.test", "/count", pr, transport)
		check(path+" slow client body", err == nil && status == 200 && body == "4000", "status %d body %q err %v", status, body, err)

		status, err = deafUpload(base, transport)
		check(path+" deaf upstream", err == nil && status == http.StatusGatewayTimeout, "status %d err %v, want 504", status, err)
	}
	status, body, err := do("GET", "nginx.test", "/late", nil, false)
	check("nginx late header", err == nil && status == http.StatusGatewayTimeout, "status %d body %q err %v, want 504", status, body, err)
	status, body, err = do("GET", "nginx.test", "/gaps", nil, false)
	check("nginx gaps", err == nil && status == 200 && body == "chunk0;chunk1;chunk2;chunk3;", "status %d body %q err %v", status, body, err)
	t.Logf("integration l7-timeouts: requests=10 wrong=%d", wrong)
}

// deafUpload sends a 64 MiB body to /deaf, whose upstream never reads it,
// and returns the status of the answer. The body is written while the
// answer is read: the proxy answers before the body ends, and closes.
func deafUpload(base string, expect bool) (int, error) {
	conn, err := net.DialTimeout("tcp", base[len("http://"):], 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	const size = 64 << 20
	hdr := "POST /deaf HTTP/1.1\r\nHost: timeouts.test\r\nContent-Length: " + fmt.Sprint(size) + "\r\n"
	if expect {
		hdr += "Expect: 100-continue\r\n"
	}
	if _, err := io.WriteString(conn, hdr+"\r\n"); err != nil {
		return 0, err
	}
	go func() {
		buf := make([]byte, 64<<10)
		for sent := 0; sent < size; sent += len(buf) {
			if _, err := conn.Write(buf); err != nil {
				return // the proxy answered and closed
			}
		}
	}()
	br := bufio.NewReader(conn)
	for {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return 0, err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusContinue {
			return res.StatusCode, nil
		}
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s", what, d)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
