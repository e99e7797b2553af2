package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlotsCap: never more than the cap hold a slot at once, and every
// waiter gets one when they are given back.
func TestSlotsCap(t *testing.T) {
	s := newSlots()
	const limit, workers = 3, 16
	var in, peak atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if !s.take(limit) && !s.wait(context.Background(), limit, time.Hour) {
					t.Error("acquire failed with an hour to wait")
					return
				}
				n := in.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				in.Add(-1)
				s.release(limit)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Errorf("peak holders = %d, want at most %d", p, limit)
	}
	if b := s.busy.Load(); b != 0 {
		t.Errorf("busy after all released = %d, want 0", b)
	}
}

func TestSlotsContextEnds(t *testing.T) {
	s := newSlots()
	if !s.take(1) {
		t.Fatal("first take failed")
	}
	if s.take(1) {
		t.Fatal("second take succeeded over the cap")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s.wait(ctx, 1, time.Hour) {
		t.Error("wait with a canceled context took a slot")
	}
	if !s.take(0) {
		t.Error("take without a cap failed")
	}
	s.release(1)
	if !s.wait(context.Background(), 1, time.Hour) {
		t.Error("wait with a free slot failed")
	}
}

// TestMaxConnsPerEndpoint: with one request in flight to the only
// endpoint and a cap of 1, the next request waits for the slot and is
// served when it frees; with a short queue timeout it is answered 503
// without reaching the endpoint.
func TestMaxConnsPerEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		queue time.Duration
		want  int
	}{
		{"queued then served", time.Hour, 200},
		{"queue timeout", 20 * time.Millisecond, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/slow" {
					<-release
				}
				w.Write([]byte("a\n"))
			})
			p, url, c := fastProxy(t, Options{MaxConnsPerEndpoint: 1, QueueTimeout: tc.queue}, a.addr())
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free) // before the backend's Close, should the test stop early
			slow := make(chan result, 1)
			go func() {
				res, err := c.Get(url + "/slow")
				if err != nil {
					slow <- result{}
					return
				}
				res.Body.Close()
				slow <- result{status: res.StatusCode}
			}()
			eventually(t, "slow request at the backend", func() bool { return a.hits.Load() == 1 })
			next := make(chan result, 1)
			go func() {
				res, err := c.Get(url)
				if err != nil {
					next <- result{}
					return
				}
				res.Body.Close()
				next <- result{status: res.StatusCode}
			}()
			eventually(t, "next request queued", func() bool { return value(t, p.m.queued.WithLabelValues("ns/s")) == 1 })
			if tc.want == 200 {
				free()
				if r := <-next; r.status != 200 {
					t.Errorf("queued request: %d, want 200", r.status)
				}
			} else {
				if r := <-next; r.status != 503 {
					t.Errorf("queued request: %d, want 503", r.status)
				}
				if got := value(t, p.m.queueTimeouts.WithLabelValues("ns/s")); got != 1 {
					t.Errorf("queue timeouts = %v, want 1", got)
				}
				if got := a.hits.Load(); got != 1 {
					t.Errorf("backend hits = %d, want 1 (the refused request never sent)", got)
				}
				free()
			}
			if r := <-slow; r.status != 200 {
				t.Errorf("slow request: %d, want 200", r.status)
			}
			if got := value(t, p.m.upstreamErrors.WithLabelValues("ns/s", "connect")); got != 0 {
				t.Errorf("connect errors = %v, want 0", got)
			}
		})
	}
}

// TestTunnelHoldsNoSlot: an open WebSocket tunnel does not count against
// MaxConnsPerEndpoint: with a cap of 1 and a tunnel open, a request is
// served without waiting.
func TestTunnelHoldsNoSlot(t *testing.T) {
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			echoUpgrade(w, r)
			return
		}
		w.Write([]byte("a\n"))
	})
	p, url, c := fastProxy(t, Options{MaxConnsPerEndpoint: 1, QueueTimeout: time.Hour}, a.addr())
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: app\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k1\r\n\r\nping")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo %q, %v", buf, err)
	}
	// The tunnel is open: the next request finds the slot free.
	if r := get(t, c, url); r.status != 200 {
		t.Fatalf("GET beside the tunnel: %d", r.status)
	}
	if got := value(t, p.m.queued.WithLabelValues("ns/s")); got != 0 {
		t.Errorf("queued = %v, want 0", got)
	}
	conn.Close()
	eventually(t, "slots back to 0", func() bool { return p.ups[a.addr()].slots.busy.Load() == 0 })
}
