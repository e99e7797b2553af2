//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The request policies of issue 27 part B through a real `sluice proxy`
// and real echo backends: each test writes an annotated Ingress into the
// manifests directory and checks the proxy's answers (and that refused
// requests never reached the backend: its answers carry X-Echo-Name).

// l7Proxy starts an echo backend and a proxy serving host with the
// annotations ann; more are extra documents (Secrets).
func l7Proxy(t *testing.T, host string, ann map[string]string, flags []string, more ...string) (*sluiceProxy, string) {
	t.Helper()
	e := newEnv(t)
	web := e.pool("web", 1)
	web.start(0)
	ing := annotatedIngressYAML("policy", host, ann)
	e.write("objects.yaml", docs(append([]string{ingressClassYAML, serviceYAML("web"), web.slice([]int{0}), ing}, more...)...))
	sp := e.startProxy("proxy", flags...)
	addr := fmt.Sprintf("127.0.0.1:%d", sp.http)
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Wait until the route exists: anything but the proxy's 404.
		res, err := l7Do(t, "127.0.0.1", addr, host, "GET", "/", nil, nil)
		if err == nil && res.status != http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not served", host)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return sp, addr
}

func annotatedIngressYAML(name, host string, ann map[string]string) string {
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var a strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&a, "    %s: %q\n", k, ann[k])
	}
	return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: %s
  namespace: default
  annotations:
%sspec:
  ingressClassName: sluice
  rules:
  - host: %s
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              name: http
`, name, a.String(), host)
}

type l7Result struct {
	status  int
	header  http.Header
	backend bool // the echo backend answered
}

// l7Do sends one request from the loopback address src on a new
// connection.
func l7Do(t *testing.T, src, addr, host, method, path string, hdr map[string]string, body io.Reader) (l7Result, error) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}, DisableKeepAlives: true, ExpectContinueTimeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://"+host+path, body)
	if err != nil {
		return l7Result{}, err
	}
	for k, v := range hdr {
		if k == "Authorization-Basic" {
			user, pass, _ := strings.Cut(v, ":")
			req.SetBasicAuth(user, pass)
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		return l7Result{}, err
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	return l7Result{status: res.StatusCode, header: res.Header, backend: res.Header.Get("X-Echo-Name") != ""}, nil
}

func mustL7(t *testing.T, src, addr, host, method, path string, hdr map[string]string, body io.Reader) l7Result {
	t.Helper()
	res, err := l7Do(t, src, addr, host, method, path, hdr, body)
	if err != nil {
		t.Fatalf("%s %s from %s: %v", method, path, src, err)
	}
	return res
}

func refusedMetric(t *testing.T, sp *sluiceProxy, reason string) float64 {
	t.Helper()
	v, err := sp.metricWith("sluice_requests_refused_total", `reason="`+reason+`"`)
	if err != nil {
		t.Fatalf("reading refusals: %v", err)
	}
	return v
}

// TestL7AllowList: allow and deny source ranges by the peer address, and,
// from a trusted proxy only, by X-Forwarded-For.
func TestL7AllowList(t *testing.T) {
	const host = "allow.test"
	sp, addr := l7Proxy(t, host, map[string]string{
		"sluice.dev/allow-source-range": "127.0.0.0/24, 2001:db8::/32",
		"sluice.dev/deny-source-range":  "127.0.0.7",
	}, []string{"--trusted-proxies", "127.0.0.1/32"})
	cases := []struct {
		src, xff string
		want     int
	}{
		{"127.0.0.1", "", 200},                    // the trusted proxy itself, allowed
		{"127.0.0.2", "", 200},                    // allowed peer
		{"127.0.0.7", "", 403},                    // denied peer
		{"127.0.9.1", "", 403},                    // outside the allow list
		{"127.0.9.1", "127.0.0.2", 403},           // untrusted peer: X-Forwarded-For ignored
		{"127.0.0.1", "127.0.0.7", 403},           // trusted proxy: the client is denied
		{"127.0.0.1", "192.0.2.1", 403},           // trusted proxy: the client is outside
		{"127.0.0.1", "2001:db8::1", 200},         // trusted proxy: IPv6 client allowed
		{"127.0.0.1", "127.0.0.2, 10.0.0.1", 403}, // the last untrusted hop counts
	}
	refused := 0
	for _, c := range cases {
		hdr := map[string]string{}
		if c.xff != "" {
			hdr["X-Forwarded-For"] = c.xff
		}
		res := mustL7(t, c.src, addr, host, "GET", "/", hdr, nil)
		if res.status != c.want || res.backend != (c.want == 200) {
			t.Errorf("from %s (X-Forwarded-For %q): status %d backend %t, want %d", c.src, c.xff, res.status, res.backend, c.want)
		}
		if c.want == 403 {
			refused++
		}
	}
	if got := refusedMetric(t, sp, "source"); got != float64(refused) {
		t.Errorf("sluice_requests_refused_total{reason=source} = %v, want %d", got, refused)
	}
	report(t, "l7 allow-list: requests=%d refused=%d", len(cases), refused)
}

// TestL7BodySize: a body over max-body-size is refused with 413, up front
// when its length is announced, while streaming when it is chunked.
func TestL7BodySize(t *testing.T) {
	const host = "body.test"
	sp, addr := l7Proxy(t, host, map[string]string{"sluice.dev/max-body-size": "1k"}, nil)
	// A client announcing a large body waits for "100 Continue" (as curl
	// does): the proxy answers 413 at once, without reading a byte of it.
	// (Without it, Go's client may report its failed write instead of the
	// early answer, golang.org/issue/11745.)
	cases := []struct {
		size    int
		chunked bool
		want    int
		expect  bool
	}{
		{1024, false, 200, false},
		{1025, false, 413, false},
		{1000, true, 200, false},
		{256 << 10, true, 413, false},
		{10 << 20, false, 413, true},
	}
	for _, c := range cases {
		var body io.Reader = strings.NewReader(strings.Repeat("x", c.size))
		if c.chunked {
			body = io.MultiReader(body) // unknown length: sent chunked
		}
		var hdr map[string]string
		if c.expect {
			hdr = map[string]string{"Expect": "100-continue"}
		}
		res, err := l7Do(t, "127.0.0.1", addr, host, "POST", "/", hdr, body)
		if err != nil {
			t.Errorf("%d bytes (chunked %t): %v", c.size, c.chunked, err)
			continue
		}
		if res.status != c.want {
			t.Errorf("%d bytes (chunked %t): status %d, want %d", c.size, c.chunked, res.status, c.want)
		}
	}
	if got := refusedMetric(t, sp, "body_size"); got != 3 {
		t.Errorf("sluice_requests_refused_total{reason=body_size} = %v, want 3", got)
	}
}

// TestL7CORS: the proxy answers preflights itself and adds the CORS
// headers for allowed origins only.
func TestL7CORS(t *testing.T) {
	const host = "cors.test"
	_, addr := l7Proxy(t, host, map[string]string{
		"sluice.dev/cors-enable":            "true",
		"sluice.dev/cors-allow-origin":      "https://app.example.com, https://*.example.org",
		"sluice.dev/cors-allow-credentials": "true",
		"sluice.dev/cors-allow-methods":     "GET, POST",
		"sluice.dev/cors-max-age":           "600",
	}, nil)
	pre := func(origin string) map[string]string {
		return map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST"}
	}
	wrong := 0
	check := func(what string, ok bool) {
		if !ok {
			wrong++
			t.Errorf("%s", what)
		}
	}
	res := mustL7(t, "127.0.0.1", addr, host, "OPTIONS", "/", pre("https://app.example.com"), nil)
	check("preflight of an allowed origin", res.status == 204 && !res.backend &&
		res.header.Get("Access-Control-Allow-Origin") == "https://app.example.com" &&
		res.header.Get("Access-Control-Allow-Methods") == "GET, POST" && res.header.Get("Access-Control-Max-Age") == "600" &&
		res.header.Get("Access-Control-Allow-Credentials") == "true" && res.header.Get("Vary") == "Origin")
	res = mustL7(t, "127.0.0.1", addr, host, "OPTIONS", "/", pre("https://x.y.example.org"), nil)
	check("preflight of a wildcard origin", res.status == 204 && res.header.Get("Access-Control-Allow-Origin") == "https://x.y.example.org")
	res = mustL7(t, "127.0.0.1", addr, host, "OPTIONS", "/", pre("https://evil.example"), nil)
	check("preflight of another origin", res.status == 204 && !res.backend && res.header.Get("Access-Control-Allow-Origin") == "")
	res = mustL7(t, "127.0.0.1", addr, host, "GET", "/", map[string]string{"Origin": "https://app.example.com"}, nil)
	check("request of an allowed origin", res.status == 200 && res.backend && res.header.Get("Access-Control-Allow-Origin") == "https://app.example.com")
	res = mustL7(t, "127.0.0.1", addr, host, "GET", "/", map[string]string{"Origin": "https://evil.example"}, nil)
	check("request of another origin", res.status == 200 && res.backend && res.header.Get("Access-Control-Allow-Origin") == "")
	report(t, "l7 cors: requests=5 wrong=%d", wrong)
}

// TestL7RateLimit: rps=5 with a burst of 5 lets 5 of a burst of 50
// through (plus what refills while they run), all 50 from an exempt
// source; the refusals are counted.
func TestL7RateLimit(t *testing.T) {
	const host = "rate.test"
	sp, addr := l7Proxy(t, host, map[string]string{
		"sluice.dev/limit-rps":                 "5",
		"sluice.dev/limit-burst":               "5",
		"sluice.dev/limit-exempt-source-range": "127.0.0.9",
	}, nil)
	// l7Proxy's readiness probe came from 127.0.0.1 and took a token.
	burst := func(src string) (ok, limited int) {
		for range 50 {
			res := mustL7(t, src, addr, host, "GET", "/", nil, nil)
			switch res.status {
			case 200:
				ok++
			case 429:
				limited++
			default:
				t.Fatalf("status %d", res.status)
			}
		}
		return ok, limited
	}
	start := time.Now()
	ok, limited := burst("127.0.0.3")
	// Refill while the burst ran: 5 per second.
	refill := int(time.Since(start).Seconds()*5) + 1
	if ok < 5 || ok > 5+refill {
		t.Errorf("limited client: %d of 50 allowed, want 5 to %d", ok, 5+refill)
	}
	exemptOK, _ := burst("127.0.0.9")
	if exemptOK != 50 {
		t.Errorf("exempt client: %d of 50 allowed, want 50", exemptOK)
	}
	if got := refusedMetric(t, sp, "rate_limit"); got != float64(limited) {
		t.Errorf("sluice_requests_refused_total{reason=rate_limit} = %v, want %d", got, limited)
	}
	report(t, "l7 rate-limit: limited_client_allowed=%d/50 exempt_allowed=%d/50", ok, exemptOK)
}

// TestL7BasicAuth: credentials from a Secret of the Ingress's namespace;
// a route whose Secret is missing answers 503 (fail closed).
func TestL7BasicAuth(t *testing.T) {
	const host = "auth.test"
	secret := `apiVersion: v1
kind: Secret
metadata:
  name: users
  namespace: default
type: Opaque
stringData:
  auth: |
    alice:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=
    bob:$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/
`
	missing := annotatedIngressYAML("missing", "auth-missing.test", map[string]string{
		"sluice.dev/auth-type": "basic", "sluice.dev/auth-secret": "nothere"})
	sp, addr := l7Proxy(t, host, map[string]string{
		"sluice.dev/auth-type":   "basic",
		"sluice.dev/auth-secret": "users",
		"sluice.dev/auth-realm":  "Staff",
	}, nil, secret, missing)
	cases := []struct {
		host, creds string
		want        int
	}{
		{host, "", 401},
		{host, "alice:wrong", 401},
		{host, "mallory:secret", 401},
		{host, "alice:secret", 200},
		{host, "bob:secret", 200},
		{host, "bob:wrong", 401},
		{"auth-missing.test", "alice:secret", 503},
	}
	for _, c := range cases {
		hdr := map[string]string{}
		if c.creds != "" {
			hdr["Authorization-Basic"] = c.creds
		}
		res := mustL7(t, "127.0.0.1", addr, c.host, "GET", "/", hdr, nil)
		if res.status != c.want || res.backend != (c.want == 200) {
			t.Errorf("%s with %q: status %d backend %t, want %d", c.host, c.creds, res.status, res.backend, c.want)
		}
		if c.want == 401 && res.header.Get("WWW-Authenticate") != `Basic realm="Staff", charset="UTF-8"` {
			t.Errorf("challenge %q", res.header.Get("WWW-Authenticate"))
		}
	}
	// l7Proxy's readiness probe was one more 401.
	if got := refusedMetric(t, sp, "auth"); got != 5 {
		t.Errorf("sluice_requests_refused_total{reason=auth} = %v, want 5", got)
	}
}

// TestL7ForwardAuth: an auth Service of the Ingress's namespace (a real
// HTTP server on a loopback address, named by an EndpointSlice) decides
// each request; its 2xx lets the request through with X-Auth-User copied,
// 401 becomes a sign-in redirect, 403 passes, its failure is a 500.
func TestL7ForwardAuth(t *testing.T) {
	const host = "fwd.test"
	ln, err := net.Listen("tcp", "127.0.9.50:0")
	if err != nil {
		t.Fatal(err)
	}
	originals := make(chan string, 100)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case originals <- r.Header.Get("X-Original-URL"):
		default: // more than the test reads: never block the answer
		}
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			w.Header().Set("X-Auth-User", "alice")
		case "Bearer banned":
			w.WriteHeader(http.StatusForbidden)
		case "Bearer broken":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	sp, addr := l7Proxy(t, host, map[string]string{
		"sluice.dev/auth-url":              "http://auth.default.svc/check",
		"sluice.dev/auth-signin":           "https://login.example.com/start",
		"sluice.dev/auth-response-headers": "X-Auth-User",
	}, nil, serviceYAML("auth"), sliceYAML("auth", "auth-slice", port, []string{"127.0.9.50"}))
	cases := []struct {
		token string
		want  int
	}{
		{"good", 200},
		{"", 302},
		{"banned", 403},
		{"broken", 500},
	}
	wrong := 0
	for _, c := range cases {
		hdr := map[string]string{"X-Auth-User": "forged"}
		if c.token != "" {
			hdr["Authorization"] = "Bearer " + c.token
		}
		res := mustL7(t, "127.0.0.1", addr, host, "GET", "/app?json=1", hdr, nil)
		ok := res.status == c.want && res.backend == (c.want == 200)
		if c.want == 302 {
			ok = ok && strings.HasPrefix(res.header.Get("Location"), "https://login.example.com/start?rd=http%3A%2F%2Ffwd.test%2Fapp")
		}
		if !ok {
			wrong++
			t.Errorf("token %q: status %d backend %t location %q, want %d", c.token, res.status, res.backend, res.header.Get("Location"), c.want)
		}
	}
	// The upstream saw the auth service's X-Auth-User, not the client's.
	res, err := l7Body(addr, host, "/app?json=1", map[string]string{"Authorization": "Bearer good", "X-Auth-User": "forged"})
	if err != nil || !strings.Contains(res, `"X-Auth-User":["alice"]`) {
		wrong++
		t.Errorf("upstream request header: %v %s", err, res)
	}
	for len(originals) > 0 {
		if o := <-originals; o != "http://fwd.test/app?json=1" && o != "http://fwd.test/" {
			t.Errorf("X-Original-URL %q", o)
		}
	}
	if got := refusedMetric(t, sp, "forward_auth_error"); got != 1 {
		t.Errorf("sluice_requests_refused_total{reason=forward_auth_error} = %v, want 1", got)
	}
	report(t, "l7 forward-auth: requests=%d wrong=%d", len(cases)+1, wrong)
}

// l7Body returns the body of a GET through the proxy.
func l7Body(addr, host, path string, hdr map[string]string) (string, error) {
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	if err != nil {
		return "", err
	}
	req.Host = host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// TestL7ErrorPages: an upstream 400 (echo refuses a bad ?delay) is
// replaced by the page of the error Service (a real HTTP server on a
// loopback address), which gets X-Code and X-Format; other answers pass.
func TestL7ErrorPages(t *testing.T) {
	const host = "errors.test"
	ln, err := net.Listen("tcp", "127.0.9.51:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.Header.Get("X-Code"))
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(code)
		fmt.Fprintf(w, "<p>custom %s for %s</p>", r.Header.Get("X-Code"), r.Header.Get("X-Format"))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	_, addr := l7Proxy(t, host, map[string]string{
		"sluice.dev/custom-http-errors": "400, 503",
		"sluice.dev/error-backend":      "pages",
	}, nil, serviceYAML("pages"), sliceYAML("pages", "pages-slice", port, []string{"127.0.9.51"}))
	wrong := 0
	body, status, err := policyGet(addr, host, "/?delay=bad", map[string]string{"Accept": "text/html"})
	if err != nil || status != 400 || body != "<p>custom 400 for text/html</p>" {
		wrong++
		t.Errorf("intercepted: %d %q %v", status, body, err)
	}
	body, status, err = policyGet(addr, host, "/ok", nil)
	if err != nil || status != 200 || !strings.HasPrefix(body, "web-0 GET errors.test /ok") {
		wrong++
		t.Errorf("passed: %d %q %v", status, body, err)
	}
	report(t, "l7 error-pages: requests=2 wrong=%d", wrong)
}

// policyGet sends a GET to addr for host and path with hdr; it returns the body and status.
func policyGet(addr, host, path string, hdr map[string]string) (string, int, error) {
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	if err != nil {
		return "", 0, err
	}
	req.Host = host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), res.StatusCode, err
}
