package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func run(t *testing.T, o Options) Result {
	t.Helper()
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Succeeded+res.Failed != res.Sent {
		t.Errorf("succeeded %d + failed %d != sent %d", res.Succeeded, res.Failed, res.Sent)
	}
	var byKind int64
	for _, n := range res.ByKind {
		byKind += n
	}
	if byKind != res.Failed {
		t.Errorf("ByKind %v sums to %d, failed %d", res.ByKind, byKind, res.Failed)
	}
	t.Log(res)
	return res
}

func TestExactCounts(t *testing.T) {
	var got atomic.Int64
	var mu sync.Mutex
	hosts := map[string]int{}
	paths := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		mu.Lock()
		hosts[r.Host]++
		paths[r.URL.Path]++
		mu.Unlock()
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()

	res := run(t, Options{Target: srv.URL, Host: "app.example", Paths: []string{"/a", "/b"}, Rate: 400, Requests: 100, KeepAliveFraction: 0.5})
	if res.Sent != 100 || res.Succeeded != 100 || res.Failed != 0 || got.Load() != 100 {
		t.Fatalf("sent %d succeeded %d failed %d served %d, want 100 100 0 100", res.Sent, res.Succeeded, res.Failed, got.Load())
	}
	if hosts["app.example"] != 100 {
		t.Errorf("Host headers %v, want app.example ×100", hosts)
	}
	if paths["/a"] != 50 || paths["/b"] != 50 {
		t.Errorf("paths %v, want /a and /b ×50", paths)
	}
	if res.Latencies.P50 <= 0 || res.Latencies.P99 < res.Latencies.P50 || res.Latencies.Max < res.Latencies.P99 {
		t.Errorf("latencies %+v not ordered", res.Latencies)
	}
}

func TestDurationBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	// Requests at 0, 5ms, ..., 195ms: 40 fit in 200ms, whatever the clock does.
	res := run(t, Options{Target: srv.URL, Rate: 200, Duration: 200 * time.Millisecond})
	if res.Sent != 40 || res.Succeeded != 40 {
		t.Fatalf("sent %d succeeded %d, want 40 40", res.Sent, res.Succeeded)
	}
	// Both bounds: the smaller one wins.
	res = run(t, Options{Target: srv.URL, Rate: 200, Duration: time.Hour, Requests: 7})
	if res.Sent != 7 {
		t.Fatalf("sent %d, want 7", res.Sent)
	}
}

func TestKeepAliveFraction(t *testing.T) {
	for _, tc := range []struct {
		fraction  float64
		wantClose int64 // requests of 20 sent with "Connection: close"
	}{
		{0, 20},
		{0.25, 15},
		{0.5, 10},
		{1, 0},
	} {
		t.Run(fmt.Sprint(tc.fraction), func(t *testing.T) {
			var closing atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Close {
					closing.Add(1)
				}
			}))
			defer srv.Close()
			run(t, Options{Target: srv.URL, Rate: 1000, Requests: 20, KeepAliveFraction: tc.fraction})
			if got := closing.Load(); got != tc.wantClose {
				t.Errorf("%d requests on new connections, want %d", got, tc.wantClose)
			}
		})
	}
}

// TestOpenLoop proves requests are scheduled without waiting for responses:
// no response can finish before the last request has been started.
func TestOpenLoop(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer srv.Close()
	o := Options{Target: srv.URL, Rate: 200, Requests: 10, Timeout: time.Minute, KeepAliveFraction: 1}
	base, err := checkOptions(&o)
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(o, base)
	defer r.close()
	r.onScheduled = func(i int64) {
		if i == 9 {
			close(release)
		}
	}
	res, err := r.run(context.Background())
	if err != nil || res.Sent != 10 || res.Succeeded != 10 {
		t.Fatalf("run: %v, %v; want 10 succeeded", res, err)
	}
}

func TestClassifiesStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/500":
			w.WriteHeader(http.StatusInternalServerError)
		case "/503":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/404":
			w.WriteHeader(http.StatusNotFound)
		case "/302":
			http.Redirect(w, r, "/500", http.StatusFound) // not followed
		}
	}))
	defer srv.Close()
	res := run(t, Options{Target: srv.URL, Paths: []string{"/500", "/503", "/404", "/ok", "/302"}, Rate: 500, Requests: 50})
	if res.ByKind[KindStatus5xx] != 20 || res.ByKind[KindStatus4xx] != 10 || res.Succeeded != 20 || res.Failed != 30 {
		t.Fatalf("ByKind %v succeeded %d failed %d, want 5xx=20 4xx=10 ok=20", res.ByKind, res.Succeeded, res.Failed)
	}
	if !strings.Contains(res.String(), "5xx=20") || !strings.Contains(res.String(), "4xx=10") {
		t.Errorf("String %q lacks 5xx=20 4xx=10", res.String())
	}
	// Samples are in the order the failures were recorded, which need not
	// be the order of their start times (the first request also dials).
	if !slices.ContainsFunc(res.Errors, func(e string) bool { return strings.Contains(e, "status_5xx: 500") }) {
		t.Errorf("error samples %q lack a status_5xx: 500", res.Errors)
	}
}

// hijacker answers every request by closing the connection, with a TCP RST
// if rst is set.
func hijacker(t *testing.T, rst bool) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijacking: %v", err)
			return
		}
		if rst {
			c.(*net.TCPConn).SetLinger(0)
		}
		c.Close()
	}))
}

func TestClassifiesReset(t *testing.T) {
	srv := hijacker(t, true)
	defer srv.Close()
	res := run(t, Options{Target: srv.URL, Rate: 200, Requests: 20, KeepAliveFraction: 0.5})
	if res.ByKind[KindReset] != 20 {
		t.Fatalf("ByKind %v, want reset=20; errors %q", res.ByKind, res.Errors)
	}
}

func TestClassifiesEOF(t *testing.T) {
	srv := hijacker(t, false)
	defer srv.Close()
	res := run(t, Options{Target: srv.URL, Rate: 200, Requests: 20, KeepAliveFraction: 0.5})
	if res.ByKind[KindEOF] != 20 {
		t.Fatalf("ByKind %v, want eof=20; errors %q", res.ByKind, res.Errors)
	}
}

func TestClassifiesTruncatedBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Write([]byte("short"))
		w.(http.Flusher).Flush()
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close()
	}))
	defer srv.Close()
	res := run(t, Options{Target: srv.URL, Rate: 200, Requests: 10})
	if res.ByKind[KindEOF] != 10 {
		t.Fatalf("ByKind %v, want eof=10; errors %q", res.ByKind, res.Errors)
	}
}

func TestClassifiesTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	res := run(t, Options{Target: srv.URL, Rate: 100, Requests: 5, Timeout: 50 * time.Millisecond})
	if res.ByKind[KindTimeout] != 5 {
		t.Fatalf("ByKind %v, want timeout=5; errors %q", res.ByKind, res.Errors)
	}
}

func TestClassifiesRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	res := run(t, Options{Target: "http://" + addr, Rate: 200, Requests: 10, KeepAliveFraction: 0.5})
	if res.ByKind[KindRefused] != 10 {
		t.Fatalf("ByKind %v, want refused=10; errors %q", res.ByKind, res.Errors)
	}
}

func TestCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Name", strings.TrimPrefix(r.URL.Path, "/"))
	}))
	defer srv.Close()
	check := func(r *http.Response) error {
		if r.Header.Get("X-Name") != "good" {
			return errors.New("wrong backend " + r.Header.Get("X-Name"))
		}
		return nil
	}
	res := run(t, Options{Target: srv.URL, Paths: []string{"/good", "/bad"}, Rate: 200, Requests: 10, Check: check})
	if res.Succeeded != 5 || res.ByKind[KindCheck] != 5 {
		t.Fatalf("succeeded %d ByKind %v, want 5 and check=5", res.Succeeded, res.ByKind)
	}
}

func TestDroppedClient(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer srv.Close()
	o := Options{Target: srv.URL, Rate: 1000, Requests: 10, MaxInFlight: 3, Timeout: time.Minute}
	base, err := checkOptions(&o)
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(o, base)
	defer r.close()
	// The first 3 requests hold every slot until all 10 are scheduled.
	r.onScheduled = func(i int64) {
		if i == 9 {
			close(release)
		}
	}
	res, err := r.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	if res.Sent != 10 || res.Succeeded != 3 || res.ByKind[KindDroppedClient] != 7 || res.Failed != 7 {
		t.Fatalf("sent %d succeeded %d failed %d ByKind %v, want 10 3 7 dropped_client=7", res.Sent, res.Succeeded, res.Failed, res.ByKind)
	}
}

func TestCanceled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	o := Options{Target: srv.URL, Rate: 1000, Requests: 5, Timeout: time.Minute}
	base, err := checkOptions(&o)
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(o, base)
	defer r.close()
	ctx, cancel := context.WithCancel(context.Background())
	r.onScheduled = func(i int64) {
		if i == 4 {
			cancel()
		}
	}
	res, err := r.run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if res.Sent != 5 || res.ByKind[KindCanceled] != 5 {
		t.Fatalf("sent %d ByKind %v, want 5 canceled=5", res.Sent, res.ByKind)
	}
}

func TestRefusesForeignTargets(t *testing.T) {
	for _, target := range []string{
		"http://192.168.1.1:80", "http://8.8.8.8", "http://10.245.0.1", "http://[::1]:80",
		"http://example.com", "ftp://127.0.0.1", "http://10.0.0.1:8080",
	} {
		_, err := Run(context.Background(), Options{Target: target, Rate: 1, Requests: 1})
		if err == nil {
			t.Errorf("Run(%q) = nil error, want refusal", target)
		}
	}
	for _, target := range []string{"http://127.0.0.1:1", "http://127.9.9.9:1", "http://10.244.3.4:1", "http://localhost:1"} {
		o := Options{Target: target, Rate: 1, Requests: 1}
		if _, err := checkOptions(&o); err != nil {
			t.Errorf("checkOptions(%q) = %v, want nil", target, err)
		}
	}
	if err := checkDial("tcp", "1.2.3.4:80", nil); !errors.Is(err, ErrForbiddenTarget) {
		t.Errorf("checkDial(1.2.3.4:80) = %v, want ErrForbiddenTarget", err)
	}
	if err := checkDial("tcp", "[::ffff:127.0.0.1]:80", nil); err != nil {
		t.Errorf("checkDial(::ffff:127.0.0.1) = %v, want nil", err)
	}
}

func TestRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Target: "http://127.0.0.1:1", Requests: 1},
		{Target: "http://127.0.0.1:1", Rate: 1},
		{Target: "http://127.0.0.1:1", Rate: 1, Requests: 1, KeepAliveFraction: 2},
		{Target: "http://127.0.0.1:1", Rate: 1, Requests: 1, Paths: []string{"nopath"}},
		{Target: "::", Rate: 1, Requests: 1},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("Run(%+v) = nil error", o)
		}
	}
}

func TestString(t *testing.T) {
	r := Result{Sent: 10, Succeeded: 7, Failed: 3, ByKind: map[string]int64{KindRefused: 2, KindStatus5xx: 1},
		Latencies: Latencies{P50: 1500 * time.Microsecond, P99: 20 * time.Millisecond, Max: 2 * time.Second}}
	want := "requests=10 ok=7 failed=3 5xx=1 reset=0 refused=2 timeout=0 p50=1.5ms p99=20ms max=2s"
	if got := r.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestQuantileIndex(t *testing.T) {
	for _, tc := range []struct {
		n    int
		q    float64
		want int
	}{{1, 0.5, 0}, {1, 0.99, 0}, {100, 0.5, 49}, {100, 0.99, 98}, {1000, 0.99, 989}, {2, 0.5, 0}} {
		if got := quantileIndex(tc.n, tc.q); got != tc.want {
			t.Errorf("quantileIndex(%d, %v) = %d, want %d", tc.n, tc.q, got, tc.want)
		}
	}
}
