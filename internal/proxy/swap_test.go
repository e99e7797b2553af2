package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/sluice/internal/route"
)

// echoUpgrade switches to an "echo" protocol that upper-cases nothing and
// returns every byte it reads.
func echoUpgrade(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "websocket" || !strings.EqualFold(r.Header.Get("Connection"), "upgrade") {
		http.Error(w, "want an upgrade", 400)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Echo: %s\r\n\r\n", r.Header.Get("Sec-WebSocket-Key"))
	brw.Flush()
	io.Copy(conn, brw)
}

func TestWebSocketUpgrade(t *testing.T) {
	a := newBackend(t, "a", echoUpgrade)
	p, srv, _ := front(t, Options{})
	p.Update(tableOf(backendOf("ns/s", route.Policy{Retries: -1, Affinity: &route.CookieAffinity{Name: "pin"}}, a.addr())))

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The first message rides in the same packet as the request.
	io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: app\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k1\r\n\r\nhello ")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 101 || res.Header.Get("X-Echo") != "k1" || res.Header.Get("Upgrade") != "websocket" {
		t.Fatalf("upgrade response %d %v", res.StatusCode, res.Header)
	}
	if !strings.HasPrefix(res.Header.Get("Set-Cookie"), "pin=") {
		t.Errorf("no affinity cookie on the 101: %v", res.Header)
	}
	for _, msg := range []string{"world", "again"} {
		io.WriteString(conn, msg)
	}
	want := "hello worldagain"
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != want {
		t.Fatalf("echo %q, %v; want %q", buf, err, want)
	}
	conn.Close()
	eventually(t, "in-flight count back to 0", func() bool { return p.ups[a.addr()].inflight.Load() == 0 })
	// The request is recorded after the in-flight count goes down: wait
	// for it too.
	eventually(t, "1xx requests = 1", func() bool {
		return value(t, p.m.requests.WithLabelValues("default/ing", "ns/s", "1xx")) == 1
	})
}

func TestUpgradeRefusedByUpstream(t *testing.T) {
	a := newBackend(t, "a", nil) // answers 200, no switch
	p, srv, _ := front(t, Options{})
	p.Update(tableOf(backendOf("ns/s", defaults(), a.addr())))
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: app\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("refused upgrade: %v %v, want the upstream's 200", res, err)
	}
}

func TestStreamingFlush(t *testing.T) {
	next := make(chan struct{})
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			<-next
		}
	})
	p, srv, c := front(t, Options{})
	p.Update(tableOf(backendOf("ns/s", defaults(), a.addr())))
	res, err := c.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	for i := range 3 {
		// Each event arrives while the upstream is still blocked after it.
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d: %q %v", i, line, err)
		}
		br.ReadString('\n')
		next <- struct{}{}
	}
}

func TestSwapDuringSlowRequest(t *testing.T) {
	release := make(chan struct{})
	slow := newBackend(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		w.Write([]byte("sl"))
		w.(http.Flusher).Flush()
		<-release
		w.Write([]byte("ow\n"))
	})
	other := newBackend(t, "other", nil)
	p, srv, c := front(t, Options{})
	p.Update(tableOf(backendOf("ns/s", defaults(), slow.addr())))

	done := make(chan result, 1)
	go func() {
		res, err := c.Get(srv.URL)
		if err != nil {
			done <- result{body: err.Error()}
			return
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			b = []byte(err.Error())
		}
		done <- result{status: res.StatusCode, body: string(b)}
	}()
	eventually(t, "slow request in flight", func() bool { return slow.hits.Load() == 1 })
	p.Update(tableOf(backendOf("ns/s", defaults(), other.addr())))
	if r := get(t, c, srv.URL); r.body != "other\n" {
		t.Errorf("new request after swap went to %q", r.body)
	}
	close(release)
	if r := <-done; r.status != 200 || r.body != "slow\n" {
		t.Errorf("in-flight request across a swap: %d %q, want 200 slow", r.status, r.body)
	}
	// Its connection was not returned to a pool nobody uses.
	eventually(t, "slow's connection closed", func() bool { return slow.closed.Load() == slow.opened.Load() })
}

func TestRemovedEndpointIdleConnsClosed(t *testing.T) {
	a, b := newBackend(t, "a", nil), newBackend(t, "b", nil)
	p, srv, c := front(t, Options{})
	p.Update(tableOf(backendOf("ns/s", defaults(), a.addr(), b.addr())))
	// Concurrent requests open several keep-alive connections to each.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if res, err := c.Get(srv.URL); err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	if a.opened.Load() == 0 || a.closed.Load() != 0 {
		t.Fatalf("a: opened %d closed %d, want idle keep-alive connections", a.opened.Load(), a.closed.Load())
	}
	bOpened := b.opened.Load()

	// a leaves the table; b stays (another backend keeps using it).
	p.Update(route.New(route.Config{VirtualHosts: []route.VirtualHost{{Routes: []route.Route{
		{Path: "/", Backend: backendOf("ns/s", defaults(), b.addr())},
		{Path: "/x", Backend: backendOf("ns/t", defaults(), b.addr())},
	}}}}))
	eventually(t, "a's idle connections closed", func() bool { return a.closed.Load() == a.opened.Load() })
	if b.closed.Load() != 0 {
		t.Errorf("b lost %d connections though it stays", b.closed.Load())
	}
	// b's pool survived the swap: new requests reuse its connections.
	counts(t, c, srv.URL, 20)
	if b.opened.Load() != bOpened {
		t.Errorf("b opened %d new connections after the swap, want 0", b.opened.Load()-bOpened)
	}
	if _, ok := p.ups[a.addr()]; ok {
		t.Error("a still in the registry")
	}
}

func TestUpstreamStateSurvivesSwap(t *testing.T) {
	a := newBackend(t, "a", nil)
	p, _, _ := front(t, Options{})
	p.Update(tableOf(backendOf("ns/s", defaults(), a.addr())))
	u := p.ups[a.addr()]
	u.fails.Store(2)
	p.Update(tableOf(backendOf("ns/other", route.Policy{Algorithm: route.RoundRobin, Retries: 1}, a.addr())))
	if p.ups[a.addr()] != u || u.fails.Load() != 2 {
		t.Error("upstream state reset by a table swap")
	}
}

func TestConcurrentUpdateAndRequests(t *testing.T) {
	_, addrs := threeBackends(t)
	p, srv, c := front(t, Options{})
	pols := []route.Policy{
		defaults(),
		{Algorithm: route.RoundRobin, Retries: -1},
		{Algorithm: route.HeaderHash, HashHeader: "X-K", Retries: -1},
		{Affinity: &route.CookieAffinity{Name: "s"}, Retries: -1},
	}
	tables := make([]*route.Table, 0, 12)
	for i := range 12 {
		// Rotating, overlapping subsets of the three endpoints.
		from := i % 3
		to := min(3, from+1+(i/3)%3)
		tables = append(tables, tableOf(backendOf("ns/s", pols[i%len(pols)], addrs[from:to]...)))
	}
	p.Update(tables[0])
	stop := make(chan struct{})
	var updates sync.WaitGroup
	updates.Add(1)
	go func() {
		defer updates.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p.Update(tables[i%len(tables)])
		}
	}()
	var failed atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				req, _ := http.NewRequest("GET", srv.URL, nil)
				req.Header.Set("X-K", fmt.Sprint(g, i))
				res, err := c.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	updates.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of 800 requests failed during concurrent updates", n)
	}
}

// TestTunnelIdleTimeout: a tunnel in which bytes keep going, one way at a
// time, for longer than the idle timeout stays open; once no byte goes
// either way for the timeout, the proxy closes it and counts it.
func TestTunnelIdleTimeout(t *testing.T) {
	a := newBackend(t, "a", echoUpgrade)
	const timeout = time.Second
	p, srv, _ := front(t, Options{TunnelIdleTimeout: timeout})
	p.Update(tableOf(backendOf("ns/s", defaults(), a.addr())))

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second)) // failsafe
	io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: app\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	// Busy: an echoed byte every 50ms, for one and a half times the
	// timeout, with gaps of a twentieth of it.
	b := make([]byte, 1)
	for range 30 {
		io.WriteString(conn, "x")
		if _, err := io.ReadFull(br, b); err != nil {
			t.Fatalf("busy tunnel: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := value(t, p.m.tunnelIdle); got != 0 {
		t.Fatalf("busy tunnel: %v idle timeouts, want 0", got)
	}
	// Idle: the proxy closes it.
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle tunnel: read %v, want EOF", err)
	}
	eventually(t, "one idle timeout counted", func() bool { return value(t, p.m.tunnelIdle) == 1 })
	eventually(t, "in-flight count back to 0", func() bool { return p.ups[a.addr()].inflight.Load() == 0 })
}
