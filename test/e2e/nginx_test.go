//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The ingress-nginx compatibility suite (issue 27): sluice installed by
// the chart with ingressNginxCompat.enabled, an IngressClass "nginx" of
// controller k8s.io/ingress-nginx as a cluster migrating from
// ingress-nginx has, and Ingresses written as an ingress-nginx user
// writes them (ingress-nginx's documented examples, written anew). Every
// request goes through HAProxy to the proxies. Each case prints
//
//	e2e nginx-<feature>: requests=N failed=W wrong=W
//
// with W the answers that differ from what ingress-nginx would answer;
// nginx-canary-roll shifts a canary's weight 0→100 in steps under load:
//
//	e2e nginx-canary-roll: requests=N failed=F canary_share=S0/S25/...
const (
	ngxNS     = "shop"
	ngxStable = "stable"
	ngxCanary = "canary"
	ngxClass  = "nginx"
	ngxN      = 100 // requests per exact case
)

// TestIngressNginx runs the suite on one cluster.
func TestIngressNginx(t *testing.T) {
	h := newChartEnv(t, "ngx", chartOptions{values: "ingressNginxCompat: {enabled: true}\nproxy: {replicas: 2}\n"})
	e := h.env
	n := &ngx{e: e, cs: newCases(e), lb: fmt.Sprintf("127.0.0.1:%d", e.lbPort)}
	n.setup()

	n.run("nginx-rewrite", n.rewrite)
	n.run("nginx-app-root", n.appRoot)
	n.run("nginx-permanent-redirect", n.permanentRedirect)
	n.run("nginx-temporal-redirect", n.temporalRedirect)
	n.run("nginx-upstream-vhost", n.upstreamVhost)
	n.run("nginx-snippet-refused", n.snippet)
	n.run("nginx-canary-header", n.canaryHeader)
	n.run("nginx-canary-cookie", n.canaryCookie)
	n.policies() // nginxpolicy_test.go
	n.canaryRoll()
	n.migrate()
}

type ngx struct {
	e  *env
	cs *cases
	lb string
}

// ngxAnswer is one answer: the echo pod's name, and the Host and path it
// saw (its plain-text body: NAME METHOD HOST PATH).
type ngxAnswer struct {
	status     int
	echo       string
	host, path string
	location   string
}

func (a ngxAnswer) from(app string) bool { return strings.HasPrefix(a.echo, app+"-") }

// ngxGet sends GET target with Host host and extra header lines to addr.
func ngxGet(addr, host, target string, hdr ...string) (ngxAnswer, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return ngxAnswer{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", target, host)
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return ngxAnswer{}, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return ngxAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	a := ngxAnswer{status: resp.StatusCode, echo: resp.Header.Get("X-Echo-Name"), location: resp.Header.Get("Location")}
	if f := strings.Fields(string(body)); a.echo != "" && len(f) == 4 {
		a.host, a.path = f[2], f[3]
	}
	return a, err
}

// run runs one exact case: check is called ngxN times and says whether
// the answer was right.
func (n *ngx) run(name string, check func(i int) bool) {
	if !n.cs.wants(name) {
		return
	}
	wrong := 0
	for i := 0; i < ngxN; i++ {
		if !check(i) {
			wrong++
		}
	}
	line := fmt.Sprintf("e2e %s: requests=%d failed=%d wrong=%d", name, ngxN, wrong, wrong)
	n.e.t.Log(line)
	writeSummary([]string{line})
	if wrong != 0 {
		n.e.t.Errorf("%s: %d of %d answers wrong", name, wrong, ngxN)
	}
}

// get sends one request through the load balancer; a failure is a wrong
// answer (status 0).
func (n *ngx) get(host, target string, hdr ...string) ngxAnswer {
	a, err := ngxGet(n.lb, host, target, hdr...)
	if err != nil {
		n.e.t.Logf("GET %s%s: %v", host, target, err)
	}
	return a
}

func ngxIngress(name, host string, ann map[string]string, paths ...networkingv1.HTTPIngressPath) *networkingv1.Ingress {
	ing := ingress(ngxNS, name, ngxClass, rule(host, paths...))
	ing.Annotations = ann
	return ing
}

func implSpecific(p, svc string) networkingv1.HTTPIngressPath {
	return ingressPath(p, networkingv1.PathTypeImplementationSpecific, svc)
}

const nginxPrefix = "nginx.ingress.kubernetes.io/"

// setup creates the ingress-nginx class, the apps and the Ingresses, and
// waits until the last one is served through the load balancer.
func (n *ngx) setup() {
	e := n.e
	e.create(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: ngxClass}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}})
	e.create(echoApp(ngxNS, ngxStable, 2, map[string]string{"app": ngxStable, "app.kubernetes.io/name": ngxStable})...)
	e.create(echoApp(ngxNS, ngxCanary, 1, map[string]string{"app": ngxCanary, "app.kubernetes.io/name": ngxCanary})[1:]...) // the namespace exists
	e.create(
		ngxIngress("rewrite", "rewrite.bar.test", map[string]string{nginxPrefix + "use-regex": "true", nginxPrefix + "rewrite-target": "/$2"},
			implSpecific("/something(/|$)(.*)", ngxStable)),
		ngxIngress("approot", "approot.bar.test", map[string]string{nginxPrefix + "app-root": "/app1"}, prefix("/", ngxStable)),
		ngxIngress("permanent", "permanent.bar.test", map[string]string{nginxPrefix + "permanent-redirect": "https://www.google.test",
			nginxPrefix + "permanent-redirect-code": "308"}, prefix("/", ngxStable)),
		ngxIngress("temporal", "temporal.bar.test", map[string]string{nginxPrefix + "temporal-redirect": "https://maintenance.bar.test/sorry"}, prefix("/", ngxStable)),
		ngxIngress("vhost", "vhost.bar.test", map[string]string{nginxPrefix + "upstream-vhost": "internal.bar.svc",
			nginxPrefix + "x-forwarded-prefix": "/api"}, prefix("/", ngxStable)),
		ngxIngress("snippet", "snippet.bar.test", map[string]string{nginxPrefix + "configuration-snippet": "more_set_headers \"Request-Id: $req_id\";",
			nginxPrefix + "enable-cors": "true", nginxPrefix + "proxy-body-size": "8m", nginxPrefix + "proxy-buffering": "on"}, prefix("/", ngxStable)),
		ngxIngress("main", "canary.bar.test", nil, prefix("/", ngxStable)),
	)
	e.create(ngxPolicyObjects()...)
	// The canary after its main Ingress, as users apply them; its weight
	// starts at 0 for the header and cookie cases.
	e.create(ngxIngress("main-canary", "canary.bar.test", map[string]string{nginxPrefix + "canary": "true",
		nginxPrefix + "canary-by-header": "X-Canary", nginxPrefix + "canary-by-cookie": "canary", nginxPrefix + "canary-weight": "0"},
		prefix("/", ngxCanary)))
	e.settled(ngxNS, ngxStable, 3*time.Minute)
	e.settled(ngxNS, ngxCanary, 3*time.Minute)
	// Every proxy has the canary (20 answers in a row through the load
	// balancer): the other Ingresses came first.
	e.eventually(2*time.Minute, "the canary served by every proxy", func(context.Context) (bool, error) {
		for i := 0; i < 20; i++ {
			if a, err := ngxGet(n.lb, "canary.bar.test", "/", "X-Canary", "always"); err != nil || a.status != 200 || !a.from(ngxCanary) {
				return false, nil
			}
		}
		return true, nil
	})
}

// rewrite: ingress-nginx's capture-group example; case-insensitive.
func (n *ngx) rewrite(i int) bool {
	targets := []struct{ in, want string }{{"/something", "/"}, {"/something/", "/"}, {"/something/new", "/new"}, {"/SOMETHING/New/x", "/New/x"}}
	tc := targets[i%len(targets)]
	a := n.get("rewrite.bar.test", tc.in)
	return a.status == 200 && a.from(ngxStable) && a.path == tc.want
}

func (n *ngx) appRoot(i int) bool {
	if i%2 == 0 {
		a := n.get("approot.bar.test", "/")
		return a.status == 302 && a.location == "http://approot.bar.test/app1"
	}
	a := n.get("approot.bar.test", "/app1")
	return a.status == 200 && a.path == "/app1"
}

func (n *ngx) permanentRedirect(int) bool {
	a := n.get("permanent.bar.test", "/some/path?x=1")
	return a.status == 308 && a.location == "https://www.google.test/" && a.echo == ""
}

func (n *ngx) temporalRedirect(int) bool {
	a := n.get("temporal.bar.test", "/")
	return a.status == 302 && a.location == "https://maintenance.bar.test/sorry" && a.echo == ""
}

func (n *ngx) upstreamVhost(int) bool {
	a := n.get("vhost.bar.test", "/x")
	return a.status == 200 && a.host == "internal.bar.svc" && a.path == "/x"
}

// snippet: the Ingress is served without its snippet; the first request
// also waits for the Warning Events.
func (n *ngx) snippet(i int) bool {
	if i == 0 {
		n.warned("snippet", "SnippetRefused", "configuration-snippet")
		n.warned("snippet", "UnsupportedAnnotations", "proxy-buffering")
	}
	a := n.get("snippet.bar.test", "/")
	return a.status == 200 && a.from(ngxStable)
}

// warned waits for the Warning Event reason on the Ingress name whose
// message contains what.
func (n *ngx) warned(name, reason, what string) {
	e := n.e
	e.eventually(time.Minute, fmt.Sprintf("Event %s on Ingress %s/%s", reason, ngxNS, name), func(ctx context.Context) (bool, error) {
		var evs corev1.EventList
		if err := e.cl.List(ctx, &evs, client.InNamespace(ngxNS)); err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == "Ingress" && ev.InvolvedObject.Name == name && ev.Reason == reason &&
				ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, what) {
				return true, nil
			}
		}
		return false, nil
	})
}

// canaryHeader: always → canary, never → stable, even against the cookie.
func (n *ngx) canaryHeader(i int) bool {
	if i%2 == 0 {
		return n.get("canary.bar.test", "/", "X-Canary", "always", "Cookie", "canary=never").from(ngxCanary)
	}
	return n.get("canary.bar.test", "/", "X-Canary", "never", "Cookie", "canary=always").from(ngxStable)
}

// canaryCookie: always → canary, never and none → stable (weight 0).
func (n *ngx) canaryCookie(i int) bool {
	switch i % 3 {
	case 0:
		return n.get("canary.bar.test", "/", "Cookie", "canary=always").from(ngxCanary)
	case 1:
		return n.get("canary.bar.test", "/", "Cookie", "canary=never").from(ngxStable)
	}
	return n.get("canary.bar.test", "/").from(ngxStable)
}

// canaryRoll shifts the canary's weight 0→25→50→75→100 while a load of
// plain requests runs; at each step it waits until a sample of 200
// requests shows the new share (within 4 binomial sigma; exact at 0 and
// 100) and records that share. failed counts load requests that did not
// get a 200 from stable or canary.
func (n *ngx) canaryRoll() {
	const name = "nginx-canary-roll"
	if !n.cs.wants(name) {
		return
	}
	e := n.e
	var requests, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, err := ngxGet(n.lb, "canary.bar.test", "/")
				requests.Add(1)
				if err != nil || a.status != 200 || !(a.from(ngxStable) || a.from(ngxCanary)) {
					failed.Add(1)
				}
			}
		}()
	}
	canary := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ngxNS, Name: "main-canary"}}
	var shares []string
	for _, w := range []int{0, 25, 50, 75, 100} {
		if err := e.update(canary, func() { canary.Annotations[nginxPrefix+"canary-weight"] = fmt.Sprint(w) }); err != nil {
			e.t.Fatalf("setting canary-weight %d: %v", w, err)
		}
		var share float64
		e.eventually(2*time.Minute, fmt.Sprintf("canary share at weight %d", w), func(context.Context) (bool, error) {
			const sample = 200
			got := 0
			for i := 0; i < sample; i++ {
				if a, err := ngxGet(n.lb, "canary.bar.test", "/"); err == nil && a.from(ngxCanary) {
					got++
				}
			}
			share = float64(got) / sample
			p := float64(w) / 100
			return math.Abs(share-p) <= 4*math.Sqrt(p*(1-p)/sample), nil
		})
		shares = append(shares, fmt.Sprintf("%.2f", share))
	}
	close(stop)
	wg.Wait()
	line := fmt.Sprintf("e2e %s: requests=%d failed=%d canary_share=%s", name, requests.Load(), failed.Load(), strings.Join(shares, "/"))
	e.t.Log(line)
	writeSummary([]string{line})
	if failed.Load() != 0 || requests.Load() == 0 {
		e.t.Errorf("%s: %d of %d requests failed", name, failed.Load(), requests.Load())
	}
}
