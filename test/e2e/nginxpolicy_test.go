//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/migrate"
)

// The request policies under --ingress-nginx-compat (issue 27), written
// as an ingress-nginx user writes them: source allow-lists, rate limits,
// basic authentication (bcrypt, $apr1$ and {SHA} users), CORS with
// ingress-nginx's defaults, and the body size limit. Then `sluice
// migrate` against the suite's cluster. Each case prints
//
//	e2e nginx-<feature>: requests=N failed=W wrong=W
//	e2e nginx-migrate: requests=1 failed=F ingresses=N unsupported=U refused=R

// ngxPolicyObjects are the policy Ingresses and the basic-auth Secret.
func ngxPolicyObjects() []client.Object {
	// Every private and loopback range: whatever address the load
	// balancer's connections come from.
	const everyLocal = "127.0.0.0/8,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10"
	hash, err := bcrypt.GenerateFromPassword([]byte("bcrypt-pass"), 5)
	if err != nil {
		panic(err)
	}
	htpasswd := "# htpasswd -B, htpasswd -m, htpasswd -s\n" +
		"bee:" + strings.Replace(string(hash), "$2a$", "$2y$", 1) + "\n" +
		"apr:$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/\n" + // "secret"
		"sha:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n" // "secret"
	return []client.Object{
		ngxIngress("allowed", "allowed.bar.test", map[string]string{nginxPrefix + "whitelist-source-range": everyLocal}, prefix("/", ngxStable)),
		ngxIngress("denied", "denied.bar.test", map[string]string{nginxPrefix + "whitelist-source-range": "192.0.2.0/24"}, prefix("/", ngxStable)),
		ngxIngress("limited", "limited.bar.test", map[string]string{nginxPrefix + "limit-rps": "1"}, prefix("/", ngxStable)),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ngxNS, Name: "basic-auth", Labels: map[string]string{"sluice.dev/auth-secret": "true"}},
			Data: map[string][]byte{"auth": []byte(htpasswd)}},
		ngxIngress("basic", "basic.bar.test", map[string]string{nginxPrefix + "auth-type": "basic", nginxPrefix + "auth-secret": "basic-auth",
			nginxPrefix + "auth-realm": "Authentication Required - foo"}, prefix("/", ngxStable)),
		ngxIngress("cors", "cors.bar.test", map[string]string{nginxPrefix + "enable-cors": "true"}, prefix("/", ngxStable)),
		ngxIngress("body", "body.bar.test", map[string]string{nginxPrefix + "proxy-body-size": "1k"}, prefix("/", ngxStable)),
	}
}

// ngxDo sends method target with Host host, body and extra header lines
// to addr, and returns the status and header.
func ngxDo(addr, method, host, target string, body []byte, hdr ...string) (int, http.Header, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, host)
	if body != nil {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	b.WriteString("\r\n")
	if _, err := conn.Write(append([]byte(b.String()), body...)); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, resp.Header, err
}

// policies runs the policy cases.
func (n *ngx) policies() {
	do := func(method, host, target string, body []byte, hdr ...string) (int, http.Header) {
		status, h, err := ngxDo(n.lb, method, host, target, body, hdr...)
		if err != nil {
			n.e.t.Logf("%s %s%s: %v", method, host, target, err)
		}
		return status, h
	}
	n.run("nginx-allowlist", func(i int) bool {
		if i%2 == 0 {
			s, _ := do("GET", "allowed.bar.test", "/", nil)
			return s == 200
		}
		s, _ := do("GET", "denied.bar.test", "/", nil)
		return s == 403
	})
	basic := func(user, pass string) []string {
		return []string{"Authorization", "Basic " + basicToken(user, pass)}
	}
	n.run("nginx-basic-auth", func(i int) bool {
		switch i % 5 {
		case 0:
			s, h := do("GET", "basic.bar.test", "/", nil)
			return s == 401 && strings.HasPrefix(h.Get("WWW-Authenticate"), `Basic realm="Authentication Required - foo"`)
		case 1:
			s, _ := do("GET", "basic.bar.test", "/", nil, basic("bee", "bcrypt-pass")...)
			return s == 200
		case 2:
			s, _ := do("GET", "basic.bar.test", "/", nil, basic("apr", "secret")...)
			return s == 200
		case 3:
			s, _ := do("GET", "basic.bar.test", "/", nil, basic("sha", "secret")...)
			return s == 200
		}
		s, _ := do("GET", "basic.bar.test", "/", nil, basic("bee", "wrong")...)
		return s == 401
	})
	n.run("nginx-cors", func(i int) bool {
		if i%2 == 0 {
			s, h := do("OPTIONS", "cors.bar.test", "/api", nil, "Origin", "https://app.example.com", "Access-Control-Request-Method", "PUT")
			return s == 204 && h.Get("Access-Control-Allow-Origin") == "*" && strings.Contains(h.Get("Access-Control-Allow-Methods"), "PUT") &&
				h.Get("Access-Control-Max-Age") == "1728000"
		}
		s, h := do("GET", "cors.bar.test", "/api", nil, "Origin", "https://app.example.com")
		return s == 200 && h.Get("Access-Control-Allow-Origin") == "*"
	})
	n.run("nginx-body-size", func(i int) bool {
		if i%2 == 0 {
			s, _ := do("POST", "body.bar.test", "/", bytes.Repeat([]byte("a"), 512))
			return s == 200
		}
		s, _ := do("POST", "body.bar.test", "/", bytes.Repeat([]byte("a"), 2048))
		return s == 413
	})
	n.limitRPS()
}

// limitRPS: limit-rps 1 (burst 5, ingress-nginx's multiplier) per proxy
// and client address: of a quick run of requests, the first pass and
// the rest get ingress-nginx's 503. wrong counts answers other than 200
// and 503, 200s beyond what two proxies' buckets allow, and a run without
// any 503.
func (n *ngx) limitRPS() {
	const name, requests = "nginx-limit-rps", 60
	if !n.cs.wants(name) {
		return
	}
	start := time.Now()
	ok, limited, other := 0, 0, 0
	for i := 0; i < requests; i++ {
		status, _, err := ngxDo(n.lb, "GET", "limited.bar.test", "/", nil)
		switch {
		case err == nil && status == 200:
			ok++
		case err == nil && status == 503:
			limited++
		default:
			other++
		}
	}
	// Two proxies, each a bucket of 5 refilled at 1/s.
	allowed := 2 * (5 + int(time.Since(start).Seconds()) + 1)
	wrong := other + max(0, ok-allowed)
	if limited == 0 {
		wrong++
	}
	line := fmt.Sprintf("e2e %s: requests=%d failed=%d wrong=%d", name, requests, wrong, wrong)
	n.e.t.Logf("%s (passed=%d limited=%d other=%d, at most %d may pass)", line, ok, limited, other, allowed)
	writeSummary([]string{line})
	if wrong != 0 {
		n.e.t.Errorf("%s: passed=%d limited=%d other=%d, at most %d may pass", name, ok, limited, other, allowed)
	}
}

// migrate runs `sluice migrate` against the suite's cluster: every
// Ingress of the suite is of the nginx class and reported; the configuration snippet
// is refused and proxy-buffering unsupported, so it exits 1.
func (n *ngx) migrate() {
	const name = "nginx-migrate"
	if !n.cs.wants(name) {
		return
	}
	e := n.e
	run := func(args ...string) (string, int) {
		return e.cli(append([]string{"migrate", "--kubeconfig", e.c.Kubeconfig()}, args...)...)
	}
	text, code := run()
	e.t.Logf("sluice migrate (exit %d):\n%s", code, text)
	js, jcode := run("--output", "json")
	var rep migrate.Report
	err := json.Unmarshal([]byte(js), &rep)
	var ings int
	if err == nil {
		ings = rep.Totals.Ingresses
	}
	want := n.ingresses()
	failed := 0
	if code != 1 || jcode != 1 || err != nil || ings != want || rep.Totals.Refused != 1 || rep.Totals.Unsupported != 1 {
		failed = 1
		e.t.Errorf("%s: exit %d/%d, err %v, %d Ingresses (want %d), totals %+v", name, code, jcode, err, ings, want, rep.Totals)
	}
	line := fmt.Sprintf("e2e %s: requests=1 failed=%d ingresses=%d unsupported=%d refused=%d", name, failed, ings, rep.Totals.Unsupported, rep.Totals.Refused)
	e.t.Log(line)
	writeSummary([]string{line})
}

func basicToken(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// ingresses counts the suite's Ingresses (of the nginx class, in ngxNS;
// the chart environment's own Ingress is of sluice's class).
func (n *ngx) ingresses() int {
	var l networkingv1.IngressList
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.e.cl.List(ctx, &l, client.InNamespace(ngxNS)); err != nil {
		n.e.t.Fatalf("listing Ingresses: %v", err)
	}
	return len(l.Items)
}
