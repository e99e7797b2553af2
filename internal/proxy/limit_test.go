package proxy

import (
	"context"
	"net/http"
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
