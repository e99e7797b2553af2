package load

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	if res.Posts > res.Sent || res.Retried > res.Sent || res.Slow > res.Succeeded {
		t.Errorf("posts %d retried %d slow %d out of range (sent %d, succeeded %d)", res.Posts, res.Retried, res.Slow, res.Sent, res.Succeeded)
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
	r := Result{Sent: 10, Succeeded: 7, Failed: 3, Posts: 3, Retried: 1, Slow: 1, SentRatio: 0.9987, ByKind: map[string]int64{KindRefused: 2, KindStatus5xx: 1},
		Latencies: Latencies{P50: 1500 * time.Microsecond, P99: 20 * time.Millisecond, Max: 2 * time.Second}}
	want := "requests=10 ok=7 failed=3 posts=3 retried=1 5xx=1 reset=0 refused=2 timeout=0 p50=1.5ms p99=20ms max=2s slow=1 sent_ratio=0.999"
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

// oneRequestPerConn serves only the first request of every connection;
// a later request on the same (reused) connection is read, body and all,
// and the connection closed without an answer, as a server that closes a
// keep-alive connection just when the client sends on it. It counts the
// requests it cut by method.
func oneRequestPerConn(t *testing.T) (srv *httptest.Server, cut *sync.Map) {
	type connKey struct{}
	cut = &sync.Map{}
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(connKey{}).(*atomic.Int32).Add(1) == 1 {
			w.Header().Set("X-Echo-Name", "echo-1")
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		n, _ := cut.LoadOrStore(r.Method, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijacking: %v", err)
			return
		}
		c.Close()
	}))
	srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, new(atomic.Int32))
	}
	srv.Start()
	return srv, cut
}

func cutCount(m *sync.Map, method string) int64 {
	n, ok := m.Load(method)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// sequential runs o with each request started only after the one before
// it finished (its connection back in the pool), so which connection each
// request gets is fixed.
func sequential(t *testing.T, o Options) Result {
	t.Helper()
	base, err := checkOptions(&o)
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(o, base)
	defer r.close()
	done := make(chan int64, 1)
	r.onDone = func(i int64) { done <- i }
	r.onScheduled = func(i int64) {
		if got := <-done; got != i {
			t.Errorf("request %d finished while waiting for %d", got, i)
		}
	}
	res, err := r.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	return res
}

// TestPostsAreNotReplayed: on keep-alive connections a server closes under
// each reused request, every POST (not replayable) fails and every GET is
// sent again on a new connection by net/http: it succeeds and counts as
// retried. With keep-alive requests alternating POST, GET, POST, ... and
// each request starting after the previous one finished: request 0 (POST)
// opens connection A; 1 (GET) is cut on A, retried on a new B; 2 (POST) is
// cut on B and fails; 3 (GET) opens C; 4 (POST) is cut on C; and so on.
func TestPostsAreNotReplayed(t *testing.T) {
	srv, cut := oneRequestPerConn(t)
	defer srv.Close()
	res := sequential(t, Options{Target: srv.URL, Rate: 1000, Requests: 10, KeepAliveFraction: 1, Timeout: time.Minute})
	if res.Posts != 5 || res.Failed != 4 || res.Retried != 1 || res.Succeeded != 6 {
		t.Fatalf("posts %d failed %d retried %d succeeded %d, want 5 4 1 6; errors %q", res.Posts, res.Failed, res.Retried, res.Succeeded, res.Errors)
	}
	if got := res.ByKind[KindEOF] + res.ByKind[KindReset]; got != 4 {
		t.Errorf("ByKind %v, want 4 eof or reset", res.ByKind)
	}
	for _, e := range res.Errors {
		if !strings.Contains(e, "POST") {
			t.Errorf("failure %q is not a POST's", e)
		}
	}
	if post, get := cutCount(cut, http.MethodPost), cutCount(cut, http.MethodGet); post != 4 || get != 1 {
		t.Errorf("server cut %d POSTs and %d GETs, want 4 and 1", post, get)
	}
}

// TestFreshConnectionsNeverRetried: requests on new connections are GETs,
// never retried, and the server saw no reused connection.
func TestFreshConnectionsNeverRetried(t *testing.T) {
	srv, cut := oneRequestPerConn(t)
	defer srv.Close()
	res := run(t, Options{Target: srv.URL, Rate: 500, Requests: 20, KeepAliveFraction: 0})
	if res.Succeeded != 20 || res.Posts != 0 || res.Retried != 0 {
		t.Fatalf("succeeded %d posts %d retried %d, want 20 0 0", res.Succeeded, res.Posts, res.Retried)
	}
	if n := cutCount(cut, http.MethodGet) + cutCount(cut, http.MethodPost); n != 0 {
		t.Errorf("server cut %d requests on reused connections, want 0", n)
	}
}

// TestPostMix: half of the keep-alive requests are POSTs carrying the body
// in full, the other keep-alive ones and all the others GETs.
func TestPostMix(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			got["error"]++
		case r.Method == http.MethodPost && string(b) == postBody && r.ContentLength == int64(len(postBody)):
			got["post"]++
		case r.Method == http.MethodGet && len(b) == 0:
			got["get"]++
		default:
			got[r.Method+" "+string(b)]++
		}
	}))
	defer srv.Close()
	// 40 requests, 30 keep-alive (15 POSTs), 10 on new connections.
	res := run(t, Options{Target: srv.URL, Rate: 1000, Requests: 40, KeepAliveFraction: 0.75})
	if res.Posts != 15 || res.Succeeded != 40 {
		t.Fatalf("posts %d succeeded %d, want 15 40", res.Posts, res.Succeeded)
	}
	if got["post"] != 15 || got["get"] != 25 || len(got) != 2 {
		t.Errorf("server saw %v, want post:15 get:25", got)
	}
}

// TestStop: closing Stop ends the schedule at once; the started requests
// finish; SentRatio compares what was sent with the time it ran.
func TestStop(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	stop := make(chan struct{})
	o := Options{Target: srv.URL, Rate: 200, Stop: stop, KeepAliveFraction: 0.5}
	base, err := checkOptions(&o)
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(o, base)
	defer r.close()
	r.onScheduled = func(i int64) {
		if i == 11 {
			close(stop)
		}
	}
	res, err := r.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	if res.Sent != 12 || res.Succeeded != 12 {
		t.Fatalf("sent %d succeeded %d, want 12 12", res.Sent, res.Succeeded)
	}
	// Request i is sent no earlier than its slot i/Rate, so no more than
	// Window×Rate+1 requests fit in the window.
	if max := 1 + 1/(res.Window.Seconds()*200); res.SentRatio <= 0 || res.SentRatio > max {
		t.Errorf("sent_ratio %.3f outside (0, %.3f]", res.SentRatio, max)
	}
}

// TestSentRatioShowsAStop: a schedule that ran but sent nothing for most
// of its window (the scheduler blocked) shows a ratio far below 1.
func TestSentRatioShowsAStop(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	stop := make(chan struct{})
	o := Options{Target: srv.URL, Rate: 100, Stop: stop}
	base, err := checkOptions(&o)
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(o, base)
	defer r.close()
	// The first request's hook holds the scheduler 300ms (30 slots), then
	// stops it: one request sent in a window of at least 300ms.
	r.onScheduled = func(int64) {
		time.Sleep(300 * time.Millisecond)
		close(stop)
	}
	res, err := r.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 1 || res.SentRatio > 1.0/30 {
		t.Fatalf("sent %d sent_ratio %.3f, want 1 and at most 1/30", res.Sent, res.SentRatio)
	}
}

// TestSlow: succeeded requests slower than SlowAfter count as slow; the
// latency includes the wait for the response.
func TestSlow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(60 * time.Millisecond) // the latency under test
		}
	}))
	defer srv.Close()
	res := run(t, Options{Target: srv.URL, Paths: []string{"/slow", "/fast"}, Rate: 500, Requests: 10, SlowAfter: 50 * time.Millisecond})
	if res.Succeeded != 10 || res.Slow < 5 {
		t.Fatalf("succeeded %d slow %d, want 10 and at least the 5 slow ones", res.Succeeded, res.Slow)
	}
	if res.Latencies.Max < 60*time.Millisecond {
		t.Errorf("max latency %v, want at least 60ms", res.Latencies.Max)
	}
	if !strings.Contains(res.String(), fmt.Sprintf("slow=%d", res.Slow)) {
		t.Errorf("String %q lacks slow=%d", res.String(), res.Slow)
	}
}

// TestFromEcho: a 2xx from a backend other than the expected one fails.
func TestFromEcho(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/right":
			w.Header().Set("X-Echo-Name", "echo-5d8f-abcde")
		case "/wrong":
			w.Header().Set("X-Echo-Name", "other-5d8f-abcde")
		}
	}))
	defer srv.Close()
	res := run(t, Options{Target: srv.URL, Paths: []string{"/right", "/wrong", "/none"}, Rate: 500, Requests: 30, Check: FromEcho("echo-")})
	if res.Succeeded != 10 || res.ByKind[KindCheck] != 20 {
		t.Fatalf("succeeded %d ByKind %v, want 10 and check=20", res.Succeeded, res.ByKind)
	}
}

// TestCall: a Call replaces the HTTP request on the same schedule; its
// failures are counted by the kind a CallError names, or as a transport
// error, and a Call that outlives Timeout is a timeout.
func TestCall(t *testing.T) {
	var calls atomic.Int64
	res := run(t, Options{Rate: 1000, Requests: 100, Timeout: 200 * time.Millisecond,
		Call: func(ctx context.Context, i int64) error {
			calls.Add(1)
			switch {
			case i%10 == 3:
				return &CallError{Kind: KindGRPCStatus, Err: errors.New("code = Unavailable")}
			case i%10 == 5:
				return fmt.Errorf("reading: %w", io.ErrUnexpectedEOF)
			case i == 7:
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}})
	if res.Sent != 100 || calls.Load() != 100 {
		t.Fatalf("sent %d, called %d; want 100 each", res.Sent, calls.Load())
	}
	want := map[string]int64{KindGRPCStatus: 10, KindEOF: 10, KindTimeout: 1}
	for k, n := range want {
		if res.ByKind[k] != n {
			t.Errorf("%s = %d, want %d (%v)", k, res.ByKind[k], n, res.ByKind)
		}
	}
	if res.Failed != 21 || res.Posts != 0 {
		t.Errorf("failed %d posts %d; want 21 and 0", res.Failed, res.Posts)
	}
	if !strings.Contains(res.String(), "grpc_status=10") {
		t.Errorf("summary %q lacks grpc_status=10", res.String())
	}
}

// TestCallChecksSchedule: a Call without a target still needs a rate and
// a bound, and a target, when given, is still checked.
func TestCallChecksSchedule(t *testing.T) {
	call := func(context.Context, int64) error { return nil }
	for name, o := range map[string]Options{
		"no rate":        {Requests: 1, Call: call},
		"no bound":       {Rate: 1, Call: call},
		"foreign target": {Target: "http://192.0.2.1:80", Rate: 1, Requests: 1, Call: call},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%s: Run accepted %+v", name, o)
		}
	}
}
