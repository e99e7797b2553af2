package server

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// Two servers with ReusePort share the traffic and admin addresses; both
// get connections, and one draining then stopping leaves the other
// serving every new connection.
func TestReusePortTwoServersShareAddresses(t *testing.T) {
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) })
	}
	a := start(t, func(o *Options) { o.ReusePort = true; o.Handler = named("a") })
	b := start(t, func(o *Options) {
		o.ReusePort, o.Handler = true, named("b")
		o.HTTPAddress, o.AdminAddress = a.httpAddr, a.adminAddr
	})
	if b.httpAddr != a.httpAddr || b.adminAddr != a.adminAddr {
		t.Fatalf("b bound %s/%s, want %s/%s", b.httpAddr, b.adminAddr, a.httpAddr, a.adminAddr)
	}
	// New connections each: the kernel hashes them over both sockets.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	fetch := func() (string, error) {
		resp, err := client.Get("http://" + a.httpAddr + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}
	seen := map[string]int{}
	for range 200 {
		name, err := fetch()
		if err != nil {
			t.Fatal(err)
		}
		seen[name]++
	}
	if seen["a"] == 0 || seen["b"] == 0 {
		t.Fatalf("answers %v: want both servers to serve", seen)
	}

	// a drains (keeps serving), then stops; b answers everything after.
	a.signal()
	a.waitState(StateDraining)
	for range 50 {
		if _, err := fetch(); err != nil {
			t.Fatalf("while a drains: %v", err)
		}
	}
	close(a.drained)
	if err := a.wait(); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for range 200 {
		name, err := fetch()
		if err != nil || name != "b" {
			failed++
		}
	}
	if failed != 0 {
		t.Errorf("after a stopped: %d of 200 requests failed or not answered by b", failed)
	}
	if code, _ := get(t, "http://"+b.adminAddr+"/healthz"); code != http.StatusOK {
		t.Errorf("b's /healthz on the shared admin address = %d after a stopped", code)
	}
}

// Without ReusePort a second server cannot bind a used address.
func TestNoReusePortConflicts(t *testing.T) {
	a := start(t, nil)
	_, err := New(Options{HTTPAddress: a.httpAddr, Handler: echoRemote})
	if err == nil {
		t.Fatal("second server bound a used address without ReusePort")
	}
}

// With ReusePort and a Ready signal, a replica joins the traffic group only
// once its first routing table is loaded: until then every new connection
// goes to the replica already serving, none to one that would answer 503.
func TestReusePortJoinsOnceReady(t *testing.T) {
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) })
	}
	a := start(t, func(o *Options) { o.ReusePort = true; o.Handler = named("a") })
	var ready atomic.Bool
	b := start(t, func(o *Options) {
		o.ReusePort, o.Handler, o.Ready = true, named("b"), ready.Load
		o.HTTPAddress, o.AdminAddress = a.httpAddr, a.adminAddr
	})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	count := func(n int) map[string]int {
		seen := map[string]int{}
		for range n {
			resp, err := client.Get("http://" + a.httpAddr + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			seen[string(body)]++
		}
		return seen
	}
	if seen := count(200); seen["a"] != 200 {
		t.Fatalf("before b is ready: answers %v, want all 200 from a", seen)
	}
	ready.Store(true)
	b.waitBound()
	if seen := count(200); seen["b"] == 0 {
		t.Fatalf("after b is ready: answers %v, want b to serve too", seen)
	}
}

// A replica stopped before its first routing table exits at once: it never
// bound a traffic listener, so there is nothing to drain.
func TestReusePortStopBeforeReady(t *testing.T) {
	s := start(t, func(o *Options) { o.ReusePort, o.Ready = true, func() bool { return false } })
	s.signal()
	if err := s.wait(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if s.State() != StateExited {
		t.Errorf("state %v, want exited", s.State())
	}
}

// waitBound polls until the server has bound its plain-HTTP listener.
func (ts *testServer) waitBound() {
	ts.t.Helper()
	for range 2000 {
		if h, _, _ := ts.Addrs(); h != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	ts.t.Fatal("the traffic listener was never bound")
}
