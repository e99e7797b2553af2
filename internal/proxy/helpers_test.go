package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sluice.dev/sluice/internal/route"
)

// upstream test server: answers its name unless handler is set, and counts
// requests and connections.
type testBackend struct {
	*httptest.Server
	name   string
	hits   atomic.Int64
	opened atomic.Int64
	closed atomic.Int64
	mu     sync.Mutex
	last   *http.Request // last request seen (header cloned)
	body   string        // last request body
}

func newBackend(t *testing.T, name string, h http.HandlerFunc) *testBackend {
	t.Helper()
	b := &testBackend{name: name}
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.last = r.Clone(r.Context())
		b.body = string(body)
		b.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		w.Header().Set("X-Backend", name)
		fmt.Fprintf(w, "%s\n", name)
	}))
	b.Config.ConnState = func(c net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			b.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			b.closed.Add(1)
		}
	}
	b.Start()
	t.Cleanup(b.Close)
	return b
}

func (b *testBackend) addr() string { return b.Listener.Addr().String() }

func (b *testBackend) lastRequest() (*http.Request, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last, b.body
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	addr, release := holdPort(t)
	t.Cleanup(release)
	return addr
}

// holdPort binds a TCP socket on a loopback port without listening, so
// that connecting to it is refused and no other process can take the port
// while it is held (a port merely closed again was taken by another
// test's server on a busy machine, which then answered 200). release
// frees it (idempotent), to listen on it.
func holdPort(t *testing.T) (addr string, release func()) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	var once sync.Once
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port), func() { once.Do(func() { syscall.Close(fd) }) }
}

func backendOf(name string, pol route.Policy, addrs ...string) *route.Backend {
	ns, svc, _ := strings.Cut(name, "/")
	b := &route.Backend{Name: name + ":80", Namespace: ns, Service: svc, Port: "80", Policy: pol}
	for _, a := range addrs {
		b.Endpoints = append(b.Endpoints, route.Endpoint{Address: a})
	}
	return b
}

// tableOf routes every host and path to one backend.
func tableOf(b *route.Backend) *route.Table {
	return route.New(route.Config{VirtualHosts: []route.VirtualHost{{
		Routes: []route.Route{{PathType: route.PathPrefix, Path: "/", Backend: b, Ingress: "default/ing"}},
	}}})
}

func defaults() route.Policy { return route.Policy{Retries: -1} }

// front starts the proxy behind a real HTTP server, so hijacking and
// flushing behave as in production.
// Unless the test asks for one mode, it runs in the mode TestMain selects.
func front(t *testing.T, o Options) (*Proxy, *httptest.Server, *http.Client) {
	t.Helper()
	if !o.StdTransport {
		o.StdTransport = stdMode
	}
	p := New(o)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return p, srv, &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

type result struct {
	status int
	body   string
	header http.Header
}

func do(t *testing.T, c *http.Client, req *http.Request) result {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading body of %s: %v", req.URL, err)
	}
	return result{status: res.StatusCode, body: string(b), header: res.Header}
}

func get(t *testing.T, c *http.Client, url string, hdr ...string) result {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return do(t, c, req)
}

// eventually polls cond until it holds or a generous deadline passes; it
// waits for an event, it does not measure time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeClock is a settable clock for passive health.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }
