//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// Issue 27's rewrite, redirect, header and canary features through a
// real sluice proxy (manifests mode) and real echo backends, native
// sluice.dev annotations and ingress-nginx's under --ingress-nginx-compat.

// l7Ingress renders an Ingress of class cls with annotations and
// ImplementationSpecific paths (regex paths need them).
func l7Ingress(name, cls, host string, ann map[string]string, rules ...rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: %s\n  namespace: default\n", name)
	if len(ann) > 0 {
		b.WriteString("  annotations:\n")
		keys := make([]string, 0, len(ann))
		for k := range ann {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, _ := json.Marshal(ann[k]) // a JSON string is a YAML string
			fmt.Fprintf(&b, "    %s: %s\n", k, v)
		}
	}
	fmt.Fprintf(&b, "spec:\n  ingressClassName: %s\n  rules:\n  - host: %s\n    http:\n      paths:\n", cls, host)
	for _, r := range rules {
		fmt.Fprintf(&b, "      - path: %q\n        pathType: ImplementationSpecific\n        backend:\n          service:\n            name: %s\n            port:\n              name: http\n", r.path, r.service)
	}
	return b.String()
}

// echoed is what the echo backend reports with ?json=1.
type echoed struct {
	Name    string              `json:"name"`
	Host    string              `json:"host"`
	Path    string              `json:"path"`
	Headers map[string][]string `json:"headers"`
}

type l7Answer struct {
	status int
	header http.Header
	echo   echoed
}

// l7Client does not follow redirects.
var l7Client = &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func l7Get(t *testing.T, base, host, target string, hdr ...string) l7Answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	res, err := l7Client.Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", target, host, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	a := l7Answer{status: res.StatusCode, header: res.Header}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(body, &a.echo); err != nil {
			t.Fatalf("GET %s: bad JSON %q: %v", target, body, err)
		}
	}
	return a
}

// startL7 writes objects, starts a proxy with flags and waits until
// host serves path from the echo backends.
func startL7(t *testing.T, e *env, objects, host, path string, flags ...string) string {
	t.Helper()
	e.write("objects.yaml", objects)
	sp := e.startProxy("proxy", flags...)
	base := fmt.Sprintf("http://127.0.0.1:%d", sp.http)
	waitRoute(t, base+path, host, "", 10*time.Second)
	return base
}

// TestL7Rewrite: prefix replacement, regex capture groups (native, and
// ingress-nginx's case-insensitive rewrite-target), upstream-vhost and
// X-Forwarded-Prefix.
func TestL7Rewrite(t *testing.T) {
	e := newEnv(t)
	web := e.pool("web", 1)
	web.start(0)
	nginxClass := "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: nginx\nspec:\n  controller: k8s.io/ingress-nginx\n"
	objs := docs(ingressClassYAML, nginxClass, serviceYAML("web"), web.slice([]int{0}),
		l7Ingress("prefix", "sluice", "prefix.test", map[string]string{
			"sluice.dev/rewrite-target": "/v2", "sluice.dev/upstream-vhost": "internal.test", "sluice.dev/x-forwarded-prefix": "/api"},
			rule{"/api", "web"}),
		l7Ingress("regex", "sluice", "regex.test", map[string]string{"sluice.dev/use-regex": "true", "sluice.dev/rewrite-target": "/store/$2"},
			rule{"/shop(/|$)(.*)", "web"}),
		l7Ingress("nginx", "nginx", "nginx.test", map[string]string{"nginx.ingress.kubernetes.io/rewrite-target": "/$2",
			"nginx.ingress.kubernetes.io/configuration-snippet": "more_set_headers \"X-Evil: 1\";"},
			rule{"/something(/|$)(.*)", "web"}),
	)
	base := startL7(t, e, objs, "prefix.test", "/api/", "--ingress-nginx-compat")
	for _, tc := range []struct{ host, target, path, upHost string }{
		{"prefix.test", "/api/users?json=1", "/v2/users", "internal.test"},
		{"prefix.test", "/api?json=1", "/v2", "internal.test"},
		{"regex.test", "/shop/cart/1?json=1", "/store/cart/1", "regex.test"},
		{"regex.test", "/shop?json=1", "/store/", "regex.test"},
		{"nginx.test", "/something/new?json=1", "/new", "nginx.test"},
		{"nginx.test", "/SOMETHING/Else?json=1", "/Else", "nginx.test"},
		{"nginx.test", "/something?json=1", "/", "nginx.test"},
	} {
		a := l7Get(t, base, tc.host, tc.target)
		if a.status != 200 || a.echo.Path != tc.path || a.echo.Host != tc.upHost {
			t.Errorf("%s%s: %d path %q host %q; want path %q host %q", tc.host, tc.target, a.status, a.echo.Path, a.echo.Host, tc.path, tc.upHost)
		}
		if tc.host == "prefix.test" && strings.Join(a.echo.Headers["X-Forwarded-Prefix"], ",") != "/api" {
			t.Errorf("%s: X-Forwarded-Prefix %q", tc.target, a.echo.Headers["X-Forwarded-Prefix"])
		}
		if a.header.Get("X-Evil") != "" {
			t.Errorf("%s: a refused snippet took effect", tc.target)
		}
	}
	if a := l7Get(t, base, "regex.test", "/Shop/x?json=1"); a.status != http.StatusNotFound {
		t.Errorf("native regexes are case-sensitive: /Shop/x got %d", a.status)
	}
}

// TestL7Redirect: permanent and temporary redirects with their codes
// (native and nginx), app-root. A request that reached the backend would
// be a 200 from echo, not the redirect.
func TestL7Redirect(t *testing.T) {
	e := newEnv(t)
	web := e.pool("web", 1)
	web.start(0)
	objs := docs(ingressClassYAML, serviceYAML("web"), web.slice([]int{0}),
		ingressYAML("plain", "plain.test", rule{"/", "web"}),
		l7Ingress("moved", "sluice", "moved.test", map[string]string{"sluice.dev/permanent-redirect": "https://new.test/landing"}, rule{"/", "web"}),
		l7Ingress("moved308", "sluice", "moved308.test", map[string]string{"sluice.dev/permanent-redirect": "https://new.test/", "sluice.dev/permanent-redirect-code": "308"}, rule{"/", "web"}),
		l7Ingress("temp", "sluice", "temp.test", map[string]string{"sluice.dev/temporary-redirect": "http://maintenance.test:8080/sorry"}, rule{"/", "web"}),
		l7Ingress("temp307", "sluice", "temp307.test", map[string]string{"sluice.dev/temporary-redirect": "https://other.test", "sluice.dev/temporary-redirect-code": "307"}, rule{"/", "web"}),
		l7Ingress("approot", "sluice", "approot.test", map[string]string{"sluice.dev/app-root": "/app1"}, rule{"/", "web"}),
		l7Ingress("nginx", "nginx", "nginx.test", map[string]string{"nginx.ingress.kubernetes.io/permanent-redirect": "https://www.example.com/x",
			"nginx.ingress.kubernetes.io/permanent-redirect-code": "308"}, rule{"/", "web"}),
	)
	base := startL7(t, e, objs, "plain.test", "/", "--ingress-nginx-compat")
	waitRoute(t, base+"/app1", "approot.test", "", 10*time.Second)
	for _, tc := range []struct {
		host, target string
		status       int
		loc          string
	}{
		{"moved.test", "/a?b=c", 301, "https://new.test/landing"},
		{"moved308.test", "/", 308, "https://new.test/"},
		{"temp.test", "/x", 302, "http://maintenance.test:8080/sorry"},
		{"temp307.test", "/x", 307, "https://other.test/"},
		{"approot.test", "/", 302, "http://approot.test/app1"},
		{"nginx.test", "/y", 308, "https://www.example.com/x"},
	} {
		a := l7Get(t, base, tc.host, tc.target)
		if a.status != tc.status || a.header.Get("Location") != tc.loc {
			t.Errorf("%s%s: %d %q; want %d %q", tc.host, tc.target, a.status, a.header.Get("Location"), tc.status, tc.loc)
		}
	}
	if a := l7Get(t, base, "approot.test", "/app1?json=1"); a.status != 200 || a.echo.Path != "/app1" {
		t.Errorf("approot.test/app1: %d %q", a.status, a.echo.Path)
	}
}

// TestL7Headers: request headers set/added/removed after the proxy's own
// X-Forwarded-*; response headers likewise; a framing header annotation
// is refused while the rest of the Ingress is served.
func TestL7Headers(t *testing.T) {
	e := newEnv(t)
	web := e.pool("web", 1)
	web.start(0)
	objs := docs(ingressClassYAML, serviceYAML("web"), web.slice([]int{0}),
		l7Ingress("headers", "sluice", "headers.test", map[string]string{
			"sluice.dev/request-headers-set":     "X-Team: blue\nX-Env: prod",
			"sluice.dev/request-headers-add":     "X-Team: green",
			"sluice.dev/request-headers-remove":  "X-Debug",
			"sluice.dev/response-headers-set":    "X-Frame-Options: DENY",
			"sluice.dev/response-headers-add":    "X-Served-By: sluice",
			"sluice.dev/response-headers-remove": "X-Echo-Name",
		}, rule{"/", "web"}),
		l7Ingress("refused", "sluice", "refused.test", map[string]string{"sluice.dev/request-headers-set": "Content-Length: 0"}, rule{"/", "web"}),
	)
	base := startL7(t, e, objs, "refused.test", "/")
	a := l7Get(t, base, "headers.test", "/x?json=1", "X-Debug", "1", "X-Team", "red")
	h := a.echo.Headers
	if a.status != 200 || strings.Join(h["X-Team"], ",") != "blue,green" || strings.Join(h["X-Env"], ",") != "prod" || h["X-Debug"] != nil {
		t.Errorf("upstream request headers %v (status %d)", h, a.status)
	}
	if len(h["X-Forwarded-For"]) != 1 {
		t.Errorf("X-Forwarded-For %q", h["X-Forwarded-For"])
	}
	if a.header.Get("X-Frame-Options") != "DENY" || a.header.Get("X-Served-By") != "sluice" || a.header.Get("X-Echo-Name") != "" {
		t.Errorf("response headers %v", a.header)
	}
	if a := l7Get(t, base, "refused.test", "/?json=1"); a.status != 200 || a.echo.Headers["Content-Length"] != nil {
		t.Errorf("refused.test: %d %v", a.status, a.echo.Headers)
	}
}

// TestL7Canary: a canary Ingress's header and cookie send requests
// exactly (always/never, a header value), precedence header > cookie >
// weight; its weight share over N requests holds within a binomial
// tolerance; the same through ingress-nginx's canary annotations.
func TestL7Canary(t *testing.T) {
	e := newEnv(t)
	stable, canary := e.pool("stable", 1), e.pool("canary", 1)
	stable.start(0)
	canary.start(0)
	const weight = 20
	main := strings.Replace(ingressYAML("main", "canary.test", rule{"/", "stable"}), "  namespace: default\n", "  namespace: default\n  creationTimestamp: \"2024-01-01T00:00:00Z\"\n", 1)
	objs := docs(ingressClassYAML, serviceYAML("stable"), serviceYAML("canary"), stable.slice([]int{0}), canary.slice([]int{0}), main,
		l7Ingress("canary", "sluice", "canary.test", map[string]string{
			"sluice.dev/canary": "true", "sluice.dev/canary-weight": fmt.Sprint(weight),
			"sluice.dev/canary-by-header": "X-Canary", "sluice.dev/canary-by-cookie": "use_canary",
		}, rule{"/", "canary"}),
		ingressYAML("main2", "value.test", rule{"/", "stable"}),
		l7Ingress("canary2", "sluice", "value.test", map[string]string{
			"sluice.dev/canary": "true", "sluice.dev/canary-by-header": "X-Version", "sluice.dev/canary-by-header-value": "v2",
		}, rule{"/", "canary"}),
	)
	base := startL7(t, e, objs, "value.test", "/")
	waitRoute(t, base+"/", "canary.test", "", 10*time.Second)
	for _, tc := range []struct {
		host string
		hdr  []string
		want string
	}{
		{"canary.test", []string{"X-Canary", "always"}, "canary"},
		{"canary.test", []string{"X-Canary", "never"}, "stable"},
		{"canary.test", []string{"X-Canary", "always", "Cookie", "use_canary=never"}, "canary"},
		{"canary.test", []string{"X-Canary", "never", "Cookie", "use_canary=always"}, "stable"},
		{"canary.test", []string{"Cookie", "use_canary=always"}, "canary"},
		{"canary.test", []string{"Cookie", "use_canary=never"}, "stable"},
		{"value.test", []string{"X-Version", "v2"}, "canary"},
		{"value.test", []string{"X-Version", "v1"}, "stable"},
		{"value.test", nil, "stable"},
	} {
		wrong := 0
		for i := 0; i < 50; i++ {
			if a := l7Get(t, base, tc.host, "/?json=1", tc.hdr...); a.status != 200 || !strings.HasPrefix(a.echo.Name, tc.want) {
				wrong++
			}
		}
		if wrong > 0 {
			t.Errorf("%s %v: %d of 50 not served by %s", tc.host, tc.hdr, wrong, tc.want)
		}
	}
	const n = 1000
	got := 0
	for i := 0; i < n; i++ {
		a := l7Get(t, base, "canary.test", "/?json=1")
		if a.status != 200 {
			t.Fatalf("request %d: status %d", i, a.status)
		}
		if strings.HasPrefix(a.echo.Name, "canary") {
			got++
		}
	}
	p := float64(weight) / 100
	if sd := math.Sqrt(n * p * (1 - p)); math.Abs(float64(got)-p*n) > 5*sd {
		t.Errorf("canary share %d of %d; want %v%% within 5 sigma (%.0f)", got, n, weight, 5*sd)
	}
	t.Logf("canary share %d of %d (weight %d%%)", got, n, weight)
}
