package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestDrainEndsWhenPodDrained(t *testing.T) {
	ts := start(t, nil)
	ts.signal()
	ts.waitState(StateDraining)
	close(ts.drained)
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	ts.wantStates(StateServing, StateDraining, StateStopping, StateExited)
	if r := ts.lastReason(); r != "pod drained" {
		t.Errorf("stopping reason %q", r)
	}
	if v := ts.metric("sluice_lifecycle_state", "state", "exited"); v != 1 {
		t.Errorf("sluice_lifecycle_state{state=exited} = %v", v)
	}
	if v := ts.metric("sluice_lifecycle_state", "state", "serving"); v != 0 {
		t.Errorf("sluice_lifecycle_state{state=serving} = %v", v)
	}
	if v := ts.metric("sluice_drain_seconds", "", ""); v <= 0 {
		t.Errorf("sluice_drain_seconds = %v", v)
	}
}

func TestDrainEndsAtMaxWait(t *testing.T) {
	ts := start(t, func(o *Options) { o.DrainMaxWait = 100 * time.Millisecond })
	ts.signal()
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	ts.wantStates(StateServing, StateDraining, StateStopping, StateExited)
	if r := ts.lastReason(); !strings.Contains(r, "max wait") {
		t.Errorf("stopping reason %q", r)
	}
}

func TestDrainEndsAfterQuietPeriod(t *testing.T) {
	ts := start(t, func(o *Options) { o.DrainQuietPeriod = 100 * time.Millisecond })
	ts.signal()
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	ts.wantStates(StateServing, StateDraining, StateStopping, StateExited)
	if r := ts.lastReason(); !strings.Contains(r, "no new connection") {
		t.Errorf("stopping reason %q", r)
	}
}

func TestQuietRemaining(t *testing.T) {
	t0 := time.Unix(1000, 0)
	q := 10 * time.Second
	tests := []struct {
		name      string
		now, last time.Time
		want      time.Duration
	}{
		{"no connection since drain start", t0.Add(4 * time.Second), t0.Add(-time.Minute), 6 * time.Second},
		{"quiet since drain start", t0.Add(10 * time.Second), t0.Add(-time.Minute), 0},
		{"recent connection restarts the period", t0.Add(12 * time.Second), t0.Add(8 * time.Second), 6 * time.Second},
		{"quiet since last connection", t0.Add(20 * time.Second), t0.Add(8 * time.Second), -2 * time.Second},
		{"never accepted", t0.Add(3 * time.Second), time.Unix(0, 0), 7 * time.Second},
	}
	for _, tt := range tests {
		if got := quietRemaining(tt.now, t0, tt.last, q); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSecondSignalSkipsToStopping(t *testing.T) {
	ts := start(t, nil)
	ts.signal()
	ts.waitState(StateDraining)
	ts.signal()
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	ts.wantStates(StateServing, StateDraining, StateStopping, StateExited)
	if r := ts.lastReason(); !strings.Contains(r, "second signal") {
		t.Errorf("stopping reason %q", r)
	}
}

func TestContextCancelSkipsDraining(t *testing.T) {
	ts := start(t, nil)
	ts.cancel()
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	ts.wantStates(StateServing, StateStopping, StateExited)
}

func TestNegativeDrainMaxWaitSkipsDraining(t *testing.T) {
	ts := start(t, func(o *Options) { o.DrainMaxWait = -1 })
	ts.signal()
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	ts.wantStates(StateServing, StateStopping, StateExited)
}

func TestHealthFollowsReadinessAndLifecycle(t *testing.T) {
	var ready atomic.Bool
	ts := start(t, func(o *Options) {
		o.Ready = ready.Load
		o.HealthOnTrafficPort = true
	})
	admin, traffic := "http://"+ts.adminAddr, "http://"+ts.httpAddr
	for _, u := range []string{admin + "/healthz", admin + "/readyz", traffic + "/healthz"} {
		if code, _ := get(t, u); code != http.StatusServiceUnavailable {
			t.Errorf("not ready: %s = %d, want 503", u, code)
		}
	}
	ready.Store(true)
	for _, u := range []string{admin + "/healthz", admin + "/readyz", traffic + "/healthz", admin + "/livez"} {
		if code, body := get(t, u); code != http.StatusOK || body != "ok\n" {
			t.Errorf("ready: %s = %d %q, want 200 ok", u, code, body)
		}
	}
	if code, body := get(t, admin+"/metrics"); code != http.StatusOK || !strings.Contains(body, `sluice_lifecycle_state{state="serving"} 1`) {
		t.Errorf("/metrics = %d:\n%s", code, body)
	}

	ts.signal()
	ts.waitState(StateDraining)
	for _, u := range []string{admin + "/healthz", admin + "/readyz", traffic + "/healthz"} {
		if code, body := get(t, u); code != http.StatusServiceUnavailable || body != "draining\n" {
			t.Errorf("draining: %s = %d %q, want 503 draining", u, code, body)
		}
	}
	// Traffic is still served while draining.
	if code, body := get(t, traffic+"/app"); code != http.StatusOK || !strings.HasPrefix(body, "127.0.0.1:") {
		t.Errorf("draining: traffic = %d %q, want 200", code, body)
	}
	if code, _ := get(t, admin+"/livez"); code != http.StatusOK {
		t.Errorf("draining: /livez = %d", code)
	}
	close(ts.drained)
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// A request in flight when stopping starts completes; the listener no
// longer accepts.
func TestInFlightRequestCompletesWhileStopping(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	ts := start(t, func(o *Options) {
		o.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
			io.WriteString(w, "slow done")
		})
	})
	type result struct {
		code int
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + ts.httpAddr + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{resp.StatusCode, string(b), err}
	}()
	<-entered
	ts.signal()
	ts.waitState(StateDraining)
	close(ts.drained)
	ts.waitState(StateStopping)
	// The listener closes right after stopping starts.
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", ts.httpAddr)
		if err != nil {
			break
		}
		c.Close()
		if i == 1000 {
			t.Fatal("traffic listener still accepting while stopping")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ts.State() != StateStopping {
		t.Fatalf("state %v before the in-flight request finished", ts.State())
	}
	close(release)
	r := <-got
	if r.err != nil || r.code != http.StatusOK || r.body != "slow done" {
		t.Fatalf("in-flight request: %d %q %v", r.code, r.body, r.err)
	}
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	ts.wantStates(StateServing, StateDraining, StateStopping, StateExited)
	if v := ts.metric("sluice_connections_closed_total", "reason", reasonShutdownDeadline); v != 0 {
		t.Errorf("connections closed at the deadline: %v", v)
	}
	if v := ts.metric("sluice_connections_closed_total", "reason", reasonDrain); v < 1 {
		t.Errorf("connections closed while draining/stopping: %v", v)
	}
	if v := ts.metric("sluice_connections_active", "listener", listenerHTTP); v != 0 {
		t.Errorf("active connections after exit: %v", v)
	}
}

// upgradeHandler hijacks the connection, answers 101 and keeps it open
// until the client or the server closes it.
var upgradeHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
	brw.Flush()
	io.Copy(io.Discard, c) // until closed
	c.Close()
})

const upgradeRequest = "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n"

func TestHijackedConnectionClosedAtShutdownDeadline(t *testing.T) {
	ts := start(t, func(o *Options) {
		o.Handler = upgradeHandler
		o.ShutdownTimeout = 200 * time.Millisecond
	})
	c := dialRaw(t, ts.httpAddr)
	if resp := c.do(t, upgradeRequest); resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d", resp.StatusCode)
	}
	ts.signal()
	ts.waitState(StateDraining)
	// Draining leaves the upgraded connection alone.
	if _, err := io.WriteString(c, "still here"); err != nil {
		t.Fatalf("writing on the upgraded connection while draining: %v", err)
	}
	close(ts.drained)
	if !c.closedByServer() {
		t.Fatal("upgraded connection not closed by the server")
	}
	if err := ts.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if v := ts.metric("sluice_connections_closed_total", "reason", reasonHijackedDeadline); v != 1 {
		t.Errorf("hijacked connections closed at the deadline: %v, want 1", v)
	}
}

func TestSignalWhileStoppingForcesClose(t *testing.T) {
	ts := start(t, func(o *Options) {
		o.Handler = upgradeHandler
		o.DrainMaxWait = -1
		o.ShutdownTimeout = time.Hour
	})
	c := dialRaw(t, ts.httpAddr)
	if resp := c.do(t, upgradeRequest); resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d", resp.StatusCode)
	}
	ts.signal()
	ts.waitState(StateStopping)
	ts.signal()
	if !c.closedByServer() {
		t.Fatal("upgraded connection not closed by the server")
	}
	if err := ts.wait(); !errors.Is(err, ErrForced) {
		t.Fatalf("Run: %v, want ErrForced", err)
	}
	if v := ts.metric("sluice_connections_closed_total", "reason", reasonForced); v != 1 {
		t.Errorf("forced closes: %v, want 1", v)
	}
}

func TestNewErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name string
		o    Options
	}{
		{"no handler", Options{HTTPAddress: "127.0.0.1:0"}},
		{"proxy protocol without trusted proxies", Options{HTTPAddress: "127.0.0.1:0", Handler: echoRemote, ProxyProtocol: true}},
		{"address in use", Options{HTTPAddress: "127.0.0.1:0", AdminAddress: busy.Addr().String(), Handler: echoRemote}},
	}
	for _, tt := range tests {
		if s, err := New(tt.o); err == nil {
			s.Close()
			t.Errorf("%s: New succeeded", tt.name)
		}
	}
	// A nil GetCertificate disables HTTPS.
	s, err := New(Options{HTTPSAddress: "127.0.0.1:0", Handler: echoRemote, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, https, _ := s.Addrs(); https != nil {
		t.Errorf("https listener %v without a certificate source", https)
	}
}

// A connection is new traffic for the quiet period from its first request
// that is not a health check on, once: health checks on the traffic port
// (a new connection each) and connections without a request do not count.
func TestQuietPeriodCountsTrafficNotHealthChecks(t *testing.T) {
	ts := start(t, func(o *Options) { o.HealthOnTrafficPort = true })
	traffic := "http://" + ts.httpAddr
	last := ts.tracker.lastTraffic.Load
	before := last()

	for range 3 {
		if code, _ := get(t, traffic+"/healthz"); code != http.StatusOK {
			t.Fatalf("/healthz on the traffic port = %d", code)
		}
	}
	dialRaw(t, ts.httpAddr) // opened, never used
	for i := 0; ts.metric("sluice_connections_accepted_total", "listener", listenerHTTP) < 4; i++ {
		if i == 2000 {
			t.Fatal("the idle connection was not accepted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if last() != before {
		t.Error("health-check connections or a connection without a request counted as new traffic")
	}

	if code, _ := get(t, traffic+"/app"); code != http.StatusOK {
		t.Fatalf("/app = %d", code)
	}
	afterApp := last()
	if afterApp == before {
		t.Error("a new connection with a request was not counted as new traffic")
	}

	// A keep-alive connection counts on its first request that is not a
	// health check, and only then.
	c := dialRaw(t, ts.httpAddr)
	const health = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	const app = "GET /app HTTP/1.1\r\nHost: x\r\n\r\n"
	if resp := c.do(t, health); resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz = %d", resp.StatusCode)
	}
	if last() != afterApp {
		t.Error("a health check on a keep-alive connection counted as new traffic")
	}
	if resp := c.do(t, app); resp.StatusCode != http.StatusOK {
		t.Fatalf("/app = %d", resp.StatusCode)
	}
	first := last()
	if first == afterApp {
		t.Error("the first request of a keep-alive connection was not counted")
	}
	c.do(t, app)
	c.do(t, health)
	if last() != first {
		t.Error("later requests on a counted connection counted again")
	}
}

// TestDrainQuietPeriodWithTrafficPortHealthChecks drains while a load
// balancer keeps health-checking the traffic port with a new connection
// per check: the quiet period still ends draining.
func TestDrainQuietPeriodWithTrafficPortHealthChecks(t *testing.T) {
	ts := start(t, func(o *Options) {
		o.HealthOnTrafficPort = true
		o.DrainQuietPeriod = 100 * time.Millisecond
		o.DrainMaxWait = 10 * time.Second
	})
	stop := make(chan struct{})
	checks := make(chan int, 1)
	go func() {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		n := 0
		defer func() { checks <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if resp, err := c.Get("http://" + ts.httpAddr + "/healthz"); err == nil {
				resp.Body.Close()
				n++
			}
		}
	}()
	ts.signal()
	err := ts.wait()
	close(stop)
	n := <-checks
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r := ts.lastReason(); !strings.Contains(r, "no new connection") {
		t.Errorf("draining ended by %q with %d health checks on the traffic port, want the quiet period", r, n)
	}
}

// Over HTTP/2 the requests of one connection share its state: a health
// check first does not count, the first other request does, once.
func TestQuietPeriodCountsHTTP2ConnectionOnce(t *testing.T) {
	var cs certs
	cs.set("a.test", newCert(t, "a.test", "a"))
	ts := start(t, func(o *Options) {
		tlsOptions(&cs)(o)
		o.HealthOnTrafficPort = true
	})
	client := tlsClient("a.test", false)
	last := ts.tracker.lastTraffic.Load
	fetch := func(path string) {
		t.Helper()
		resp, err := client.Get("https://" + ts.httpsAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s %d, want HTTP/2 200", path, resp.Proto, resp.StatusCode)
		}
	}
	fetch("/healthz")
	if last() != 0 {
		t.Error("an HTTP/2 health check counted as new traffic")
	}
	fetch("/app")
	first := last()
	if first == 0 {
		t.Error("the first HTTP/2 request was not counted")
	}
	fetch("/app")
	if last() != first {
		t.Error("a second request on the same HTTP/2 connection counted again")
	}
}
