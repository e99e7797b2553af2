//go:build integration

package integration

import (
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"sluice.dev/sluice/test/testenv"
)

// haproxy is HAProxy in front of the test's proxies, as the external load
// balancer: one frontend, one backend with a server per proxy, each
// health-checked on the proxy's admin /healthz.
type haproxy struct {
	port int    // frontend, on 127.0.0.1
	sock string // runtime API (stats socket, level admin)
	proc *testenv.Process
}

// server is one HAProxy server line: a proxy's traffic port and the port
// its /healthz is checked on.
type server struct {
	Name        string
	Port, Admin int
}

// haproxyConfig is deliberately unforgiving: `retries 0` and no
// `option redispatch`, so a request HAProxy sends to a proxy that fails it
// reaches the client as a failure instead of being retried elsewhere, and
// the load harness counts what the proxies really did.
var haproxyConfig = template.Must(template.New("haproxy.cfg").Parse(`global
	stats socket {{.Sock}} mode 600 level admin
	maxconn 4096
	nbthread 1

defaults
	mode http
	option http-keep-alive
	retries 0
	timeout connect 2s
	timeout client 30s
	timeout server 30s
	timeout http-request 10s
	timeout http-keep-alive 10s

frontend web
	bind 127.0.0.1:{{.Port}}
	default_backend proxies

backend proxies
	balance roundrobin
	option httpchk GET /healthz
	http-check expect status 200
{{- range .Servers}}
	server {{.Name}} 127.0.0.1:{{.Port}} check port {{.Admin}} inter 200ms fall 2 rise 2
{{- end}}
`))

// startHAProxy starts HAProxy in the foreground in front of proxies and
// waits until it reports every server UP.
func (e *env) startHAProxy(proxies ...*sluiceProxy) *haproxy {
	e.t.Helper()
	h := &haproxy{port: testenv.FreePort(e.t, "127.0.0.1"), sock: filepath.Join(e.dir, "haproxy.sock")}
	data := struct {
		Sock    string
		Port    int
		Servers []server
	}{Sock: h.sock, Port: h.port}
	for _, p := range proxies {
		check := p.admn
		if p.checkTraffic {
			check = p.http
		}
		data.Servers = append(data.Servers, server{Name: p.name, Port: p.http, Admin: check})
	}
	var b strings.Builder
	if err := haproxyConfig.Execute(&b, data); err != nil {
		e.t.Fatalf("rendering haproxy.cfg: %v", err)
	}
	cfg := filepath.Join(e.dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		e.t.Fatalf("writing haproxy.cfg: %v", err)
	}
	h.proc = testenv.StartHAProxy(e.t, testenv.HAProxy{Config: cfg, Socket: h.sock, LogDir: e.logs})
	for _, p := range proxies {
		h.waitStatus(e.t, p.name, "UP", 10*time.Second)
	}
	return h
}

func (h *haproxy) url() string { return fmt.Sprintf("http://127.0.0.1:%d", h.port) }

// command sends one runtime API command and returns the answer.
func (h *haproxy) command(cmd string) (string, error) {
	c, err := net.DialTimeout("unix", h.sock, time.Second)
	if err != nil {
		return "", fmt.Errorf("dialing haproxy runtime API: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return "", fmt.Errorf("sending %q: %w", cmd, err)
	}
	out, err := io.ReadAll(c)
	if err != nil {
		return "", fmt.Errorf("reading answer to %q: %w", cmd, err)
	}
	return string(out), nil
}

// statuses returns each server's check status from `show stat`: "UP",
// "DOWN", "UP 1/2" (going down), "DOWN 1/2" (going up), "MAINT", ...
func (h *haproxy) statuses() (map[string]string, error) {
	out, err := h.command("show stat")
	if err != nil {
		return nil, err
	}
	records, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(out, "# "))).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("parsing show stat: %w", err)
	}
	if len(records) == 0 {
		return nil, fmt.Errorf("empty show stat")
	}
	col := map[string]int{}
	for i, name := range records[0] {
		col[name] = i
	}
	st := map[string]string{}
	for _, r := range records[1:] {
		if r[col["pxname"]] == "proxies" && r[col["svname"]] != "BACKEND" {
			st[r[col["svname"]]] = r[col["status"]]
		}
	}
	return st, nil
}

// waitStatus waits until server's status is exactly want.
func (h *haproxy) waitStatus(t *testing.T, server, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		st, err := h.statuses()
		if err == nil && st[server] == want {
			return
		}
		last = fmt.Sprint(st, err)
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("waiting for haproxy server %s to be %s: last %s", server, want, last)
}

// watchDown polls HAProxy until server is DOWN and returns a channel that
// receives the time it was first seen DOWN (or is closed at stop).
func (h *haproxy) watchDown(server string, stop <-chan struct{}) <-chan time.Time {
	c := make(chan time.Time, 1)
	go func() {
		defer close(c)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if st, err := h.statuses(); err == nil && strings.HasPrefix(st[server], "DOWN") {
				c <- time.Now()
				return
			}
		}
	}()
	return c
}
