//go:build integration

package haproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/test/testenv"
)

// haproxyEnv is one HAProxy process with a runtime API socket, a frontend
// on 127.0.0.1 routing to backend "be" (roundrobin, option httpchk GET
// /healthz) and a static-rr backend "static".
type haproxyEnv struct {
	dir, sock, front string
	tcpAPI           string // the same runtime API over TCP
	cfg              string
	args             []string // more haproxy arguments ("-W -S master.sock")
	proc             *testenv.Process
}

func startHAProxy(t *testing.T) *haproxyEnv {
	t.Helper()
	if _, err := testenv.HAProxyBin(); err != nil {
		t.Skipf("no haproxy: %v", err)
	}
	dir := t.TempDir()
	e := &haproxyEnv{dir: dir, sock: filepath.Join(dir, "admin.sock"), front: testenv.FreeAddr(t, "127.0.0.1"), tcpAPI: testenv.FreeAddr(t, "127.0.0.1")}
	e.cfg = filepath.Join(dir, "haproxy.cfg")
	cfg := fmt.Sprintf(`global
    stats socket %s mode 600 level admin
    stats socket ipv4@%s level admin
    maxconn 1000
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend fe
    bind %s
    default_backend be
backend be
    balance roundrobin
    option httpchk GET /healthz
    timeout check 60s
backend static
    balance static-rr
    option httpchk GET /healthz
`, e.sock, e.tcpAPI, e.front)
	if err := os.WriteFile(e.cfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start(t)
	return e
}

func (e *haproxyEnv) start(t *testing.T) {
	t.Helper()
	e.proc = testenv.StartHAProxy(t, testenv.HAProxy{Config: e.cfg, Args: e.args, Socket: e.sock,
		LogDir: e.dir, StopGrace: 10 * time.Second})
}

// stop ends HAProxy by its PID (SIGTERM, SIGKILL after 10 s).
func (e *haproxyEnv) stop() {
	if e.proc != nil {
		e.proc.Stop(10 * time.Second)
		e.proc = nil
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// backendServer is an HTTP server on 127.0.0.1 standing in for a pod.
type backendServer struct {
	addr    netip.AddrPort
	healthy atomic.Bool
	gate    chan struct{} // health checks wait until it closes
	release chan struct{} // closes to end /slow requests
	hits    atomic.Int64
}

func startBackend(t *testing.T, name string, healthy bool) *backendServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backendServer{addr: netip.MustParseAddrPort(ln.Addr().String()), release: make(chan struct{}), gate: make(chan struct{})}
	if healthy {
		close(b.gate)
	}
	b.healthy.Store(healthy)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-b.gate:
		case <-r.Context().Done():
			return
		}
		if !b.healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-b.release
		io.WriteString(w, name)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		io.WriteString(w, name)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return b
}

func statusOf(t *testing.T, p *Provider, addr netip.AddrPort) (lb.Status, bool) {
	t.Helper()
	st, err := p.Targets(context.Background(), "be")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Target.Address == addr {
			return s, true
		}
	}
	return lb.Status{}, false
}

func waitState(t *testing.T, p *Provider, addr netip.AddrPort, want lb.State) lb.Status {
	t.Helper()
	var last lb.Status
	waitFor(t, fmt.Sprintf("%v %s (last %+v)", addr, want, last), func() bool {
		last, _ = statusOf(t, p, addr)
		return last.State == want
	})
	return last
}

func TestIntegrationLifecycle(t *testing.T) {
	env := startHAProxy(t)
	p, err := New(Options{Address: env.sock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	good := startBackend(t, "good", false) // health checks held until good.gate closes
	good.healthy.Store(true)
	bad := startBackend(t, "bad", false)
	close(bad.gate)
	tg := []lb.Target{{Address: good.addr}, {Address: bad.addr}}

	if err := p.Register(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
	// Until its first check answers, a new target is Initial and takes no
	// traffic (HAProxy alone would call it up).
	st, err := p.Targets(ctx, "be")
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 {
		t.Fatalf("targets after register: %+v", st)
	}
	if s, _ := statusOf(t, p, good.addr); s.State != lb.Initial {
		t.Fatalf("target with its check pending: %+v", s)
	}
	resp, err := http.Get("http://" + env.front + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || good.hits.Load() != 0 {
		t.Fatalf("unchecked target served: %d, hits %d", resp.StatusCode, good.hits.Load())
	}
	close(good.gate)
	waitState(t, p, good.addr, lb.Healthy)
	s := waitState(t, p, bad.addr, lb.Unhealthy)
	if !strings.Contains(s.Reason, "503") {
		t.Errorf("unhealthy reason %q lacks the status code", s.Reason)
	}
	// Registering again changes nothing.
	if err := p.Register(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
	if s, _ := statusOf(t, p, good.addr); s.State != lb.Healthy {
		t.Fatalf("re-register reset health: %+v", s)
	}

	// Traffic through the frontend reaches only the healthy target.
	client := &http.Client{Timeout: 10 * time.Second}
	for i := 0; i < 10; i++ {
		resp, err := client.Get("http://" + env.front + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "good" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	if bad.hits.Load() != 0 {
		t.Fatalf("unhealthy target got %d requests", bad.hits.Load())
	}

	// A slow request in flight while deregistering.
	slow := make(chan error, 1)
	go func() {
		resp, err := client.Get("http://" + env.front + "/slow")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		slow <- err
	}()
	waitFor(t, "slow request at backend", func() bool { return good.hits.Load() == 11 })

	if err := p.Deregister(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
	s, _ = statusOf(t, p, good.addr)
	if s.State != lb.Draining || s.Connections != 1 {
		t.Fatalf("after deregister with a request in flight: %+v", s)
	}
	// The unhealthy one had no sessions: in maintenance on the next call,
	// deleted once it settled there (maintSettle) by a later one.
	if err := p.Deregister(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
	if s, ok := statusOf(t, p, bad.addr); ok && s.Reason != "maint" {
		t.Fatalf("idle target after second deregister: %+v, want in maintenance", s)
	}
	waitFor(t, "the idle target deleted", func() bool {
		if err := p.Deregister(ctx, "be", tg); err != nil {
			t.Fatal(err)
		}
		_, ok := statusOf(t, p, bad.addr)
		return !ok
	})
	s, _ = statusOf(t, p, good.addr)
	if s.State != lb.Draining || s.Connections != 1 {
		t.Fatalf("busy target after second deregister: %+v", s)
	}
	// No new traffic while draining.
	resp, err = client.Get("http://" + env.front + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("request to drained backend: %d", resp.StatusCode)
	}
	if good.hits.Load() != 11 {
		t.Fatalf("draining target got new requests: %d", good.hits.Load())
	}

	close(good.release)
	if err := <-slow; err != nil {
		t.Fatalf("in-flight request broken by drain: %v", err)
	}
	waitFor(t, "connections to end", func() bool {
		s, ok := statusOf(t, p, good.addr)
		return !ok || s.Connections == 0
	})
	waitFor(t, "the drained target deleted", func() bool {
		if err := p.Deregister(ctx, "be", tg); err != nil {
			t.Fatal(err)
		}
		st, err := p.Targets(ctx, "be")
		if err != nil {
			t.Fatal(err)
		}
		return len(st) == 0
	})
}

func TestIntegrationRestartAndErrors(t *testing.T) {
	env := startHAProxy(t)
	p, err := New(Options{Address: env.sock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	good := startBackend(t, "good", true)
	tg := []lb.Target{{Address: good.addr}}
	if err := p.Register(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, good.addr, lb.Healthy)

	env.stop()
	if _, err := p.Targets(ctx, "be"); !errors.Is(err, lb.ErrUnreachable) {
		t.Fatalf("targets with haproxy stopped: %v", err)
	}
	env.start(t)
	// The new process forgot the server; the first listing restores it.
	st, err := p.Targets(ctx, "be")
	if err != nil || len(st) != 1 || p.Restarts() != 1 {
		t.Fatalf("targets after restart: %+v %v, restarts %d", st, err, p.Restarts())
	}
	if err := p.Register(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, good.addr, lb.Healthy)

	// The runtime API over TCP sees the same.
	overTCP, err := New(Options{Address: env.tcpAPI})
	if err != nil {
		t.Fatal(err)
	}
	// (p lists the restored server Healthy at once; a provider that did
	// not restore it waits for its first check in the new process.)
	waitState(t, overTCP, good.addr, lb.Healthy)
	if st, err := overTCP.Targets(ctx, "be"); err != nil || len(st) != 1 || st[0].State != lb.Healthy {
		t.Fatalf("targets over TCP: %+v %v", st, err)
	}

	if err := p.Register(ctx, "static", tg); !errors.Is(err, lb.ErrNotDynamic) {
		t.Fatalf("register in static-rr backend: %v", err)
	}
	if err := p.Register(ctx, "nope", tg); !errors.Is(err, lb.ErrGroupNotFound) {
		t.Fatalf("register in unknown backend: %v", err)
	}
	if _, err := p.Targets(ctx, "nope"); !errors.Is(err, lb.ErrGroupNotFound) {
		t.Fatalf("targets of unknown backend: %v", err)
	}
	if _, err := p.Targets(ctx, "fe"); !errors.Is(err, lb.ErrGroupNotFound) {
		t.Fatalf("targets of a frontend: %v", err)
	}
}
