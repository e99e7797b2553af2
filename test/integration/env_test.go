//go:build integration

package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sluice.dev/sluice/test/testenv"
)

// env is one test's world: a temp dir with the manifests directory the
// proxies read, process logs, and the processes themselves.
type env struct {
	t         *testing.T
	dir       string // temp root
	logs      string // process logs
	manifests string // the proxies' --manifests directory
	staging   string // files are written here, then renamed into manifests
	nextIP    int    // last octet of the next loopback address handed out
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, logs: logDir(t), manifests: filepath.Join(dir, "manifests"), staging: filepath.Join(dir, "staging"), nextIP: 10}
	for _, d := range []string{e.manifests, e.staging} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("creating %s: %v", d, err)
		}
	}
	return e
}

// write replaces manifests/name atomically (write elsewhere, then rename),
// so a proxy never reads a half-written file.
func (e *env) write(name, content string) {
	e.t.Helper()
	tmp := filepath.Join(e.staging, name)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		e.t.Fatalf("writing %s: %v", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(e.manifests, name)); err != nil {
		e.t.Fatalf("renaming %s into manifests: %v", name, err)
	}
}

func (e *env) remove(name string) {
	e.t.Helper()
	if err := os.Remove(filepath.Join(e.manifests, name)); err != nil {
		e.t.Fatalf("removing manifest %s: %v", name, err)
	}
}

// loopbacks hands out n loopback addresses no other backend of this test
// uses.
func (e *env) loopbacks(n int) []string {
	ips := make([]string, n)
	for i := range ips {
		ips[i] = fmt.Sprintf("127.0.%d.%d", 1+e.nextIP/250, e.nextIP%250+1)
		e.nextIP++
	}
	return ips
}

// pool is a set of echo backends of one Service: distinct loopback
// addresses sharing one port, as pods of a Deployment share a container
// port, so they fit in one EndpointSlice.
type pool struct {
	e       *env
	service string
	ips     []string
	port    int
	procs   []*testenv.Process // by index; nil until started
	flags   []string           // extra echo flags for backends started from now on
}

func (e *env) pool(service string, size int) *pool {
	ips := e.loopbacks(size)
	return &pool{e: e, service: service, ips: ips, port: testenv.FreePortOnAll(e.t, ips), procs: make([]*testenv.Process, size)}
}

func (p *pool) name(i int) string { return fmt.Sprintf("%s-%d", p.service, i) }

func (p *pool) addr(i int) string { return fmt.Sprintf("%s:%d", p.ips[i], p.port) }

// start starts echo backend i and waits until it answers.
func (p *pool) start(i int) {
	p.e.t.Helper()
	args := append([]string{"--listen", p.addr(i), "--name", p.name(i)}, p.flags...)
	p.procs[i] = start(p.e.t, p.e.logs, p.name(i), bin.echo, args...)
	waitHTTP(p.e.t, "http://"+p.addr(i)+"/healthz", 200, 10*time.Second)
}

// stop sends SIGTERM to backend i and checks it exits 0 (echo finishes its
// in-flight requests first).
func (p *pool) stop(i int) error {
	if err := p.procs[i].Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping %s: %w", p.name(i), err)
	}
	if code := p.procs[i].Wait(35 * time.Second); code != 0 {
		return fmt.Errorf("%s exited with %d after SIGTERM", p.name(i), code)
	}
	return nil
}

// slice renders the pool's EndpointSlice holding the backends in members,
// in that order.
func (p *pool) slice(members []int) string {
	return p.sliceNamed(p.service+"-slice", members)
}

// sliceNamed renders one of several EndpointSlices of the pool's Service.
func (p *pool) sliceNamed(name string, members []int) string {
	addrs := make([]string, len(members))
	for k, i := range members {
		addrs[k] = p.ips[i]
	}
	return sliceYAML(p.service, name, p.port, addrs)
}

// sluiceProxy is one `sluice proxy` process in manifests mode.
type sluiceProxy struct {
	name              string
	http, https, admn int
	flags             []string // extra flags, kept for restarts
	// checkTraffic makes HAProxy health-check the traffic port instead of
	// the admin port (start the proxy with --health-on-traffic-port).
	checkTraffic bool
	proc         *testenv.Process
	starts       int // processes started so far under this name
}

func (sp *sluiceProxy) admin(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", sp.admn, path)
}

// startProxy starts a proxy reading e.manifests and waits for /readyz.
// extra flags come after the defaults, so they override them.
func (e *env) startProxy(name string, extra ...string) *sluiceProxy {
	e.t.Helper()
	sp := &sluiceProxy{name: name, http: testenv.FreePort(e.t, "127.0.0.1"), https: testenv.FreePort(e.t, "127.0.0.1"), admn: testenv.FreePort(e.t, "127.0.0.1"), flags: extra}
	e.restartProxy(sp)
	return sp
}

// restartProxy starts a new process for sp, on the same ports and flags,
// and waits for /readyz. The previous process must have exited.
func (e *env) restartProxy(sp *sluiceProxy) {
	e.t.Helper()
	args := []string{"proxy",
		"--manifests", e.manifests,
		"--allow-loopback-endpoints", // the backends listen on 127.0.0.0/8
		"--http-address", fmt.Sprintf("127.0.0.1:%d", sp.http),
		"--https-address", fmt.Sprintf("127.0.0.1:%d", sp.https),
		"--admin-address", fmt.Sprintf("127.0.0.1:%d", sp.admn),
		"--drain-max-wait", "5s",
		"--drain-quiet-period", "1s",
		"--shutdown-timeout", "5s",
	}
	if !slices.ContainsFunc(sp.flags, func(f string) bool { return strings.HasPrefix(f, "--ingress-class") }) {
		args = append(args, "--ingress-class", "sluice")
	}
	logName := sp.name
	if sp.starts > 0 {
		logName = fmt.Sprintf("%s.%d", sp.name, sp.starts)
	}
	sp.starts++
	sp.proc = start(e.t, e.logs, logName, bin.sluice, append(args, sp.flags...)...)
	waitHTTP(e.t, sp.admin("/readyz"), 200, 20*time.Second)
}

// Manifests. Objects are rendered as YAML text: short, and what a user
// would write.

const ingressClassYAML = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: sluice
spec:
  controller: sluice.dev/ingress-controller
`

func serviceYAML(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: default
spec:
  selector:
    app: %s
  ports:
  - name: http
    port: 80
    targetPort: http
`, name, name)
}

func sliceYAML(service, name string, port int, addrs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s
  namespace: default
  labels:
    kubernetes.io/service-name: %s
addressType: IPv4
ports:
- name: http
  port: %d
  protocol: TCP
`, name, service, port)
	if len(addrs) == 0 {
		b.WriteString("endpoints: []\n")
	} else {
		b.WriteString("endpoints:\n")
	}
	for i, a := range addrs {
		fmt.Fprintf(&b, "- addresses: [%q]\n  conditions: {ready: true}\n  targetRef: {kind: Pod, namespace: default, name: %s-%d}\n", a, name, i)
	}
	return b.String()
}

// rule is one path of an Ingress rule.
type rule struct{ path, service string }

func ingressYAML(name, host string, rules ...rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: %s
  namespace: default
spec:
  ingressClassName: sluice
  rules:
  - host: %s
    http:
      paths:
`, name, host)
	for _, r := range rules {
		fmt.Fprintf(&b, `      - path: %s
        pathType: Prefix
        backend:
          service:
            name: %s
            port:
              name: http
`, r.path, r.service)
	}
	return b.String()
}

// docs joins YAML documents into one multi-document file.
func docs(d ...string) string { return strings.Join(d, "---\n") }

// metric sums the samples of the metric name (any labels) on the proxy's
// /metrics.
func (sp *sluiceProxy) metric(name string) (float64, error) {
	resp, err := http.Get(sp.admin("/metrics"))
	if err != nil {
		return 0, fmt.Errorf("reading %s metrics: %w", sp.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("reading %s metrics: %w", sp.name, err)
	}
	var sum float64
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("parsing %q: %w", line, err)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no %s in %s metrics", name, sp.name)
	}
	return sum, nil
}
