//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/sluice/test/testenv"
)

const (
	// connCap is the public fleet's --max-connections (chart value
	// proxy.limits.maxConnections).
	connCap = 40
	// attackers is how many attackers each limits-* case sets on the
	// proxy (conn-cap: connCap more).
	attackers = 20
	// slowReadBytes is what a slow-read attacker asks for and never reads.
	slowReadBytes = 64 << 20
)

// limits runs the limits-* cases against one proxy of the public fleet,
// whose chart values set --read-header-timeout, --body-idle-timeout and
// --write-idle-timeout to 1s and --max-connections to connCap. The
// attackers connect to the proxy pod directly, as clients do behind a
// TCP pass-through load balancer (an NLB, or HAProxy in TCP mode): an
// HTTP-mode HAProxy would take the slow clients on itself. The legitimate
// client sends 50 requests a second on one kept-alive connection opened
// before the attack, which the connection cap must never refuse.
func (tn *tenancy) limits() {
	ips := tn.podIPs(proxyNS, fleetPublic)
	addr := net.JoinHostPort(ips[0], "8080")
	admin := net.JoinHostPort(ips[0], "9090")
	var mu sync.Mutex
	var readers []net.Conn // the slow-read attackers' connections
	for _, c := range []struct {
		name string
		n    int
		// metric{label} of the limit that must have fired, at least
		// fired times during the case.
		metric, label string
		fired         float64
		// attack runs attacker i; it reports whether the proxy closed
		// the attacker's connection.
		attack func(t *testing.T, i int) bool
	}{
		{"limits-slowloris", attackers, "sluice_client_timeouts_total", `timeout="read_header"`, attackers, func(t *testing.T, _ int) bool {
			return testenv.Slowloris(t, addr, limitsHost)
		}},
		{"limits-slow-body", attackers, "sluice_client_timeouts_total", `timeout="body_idle"`, attackers, func(t *testing.T, _ int) bool {
			return testenv.SlowBody(t, addr, limitsHost)
		}},
		{"limits-slow-read", attackers, "sluice_client_timeouts_total", `timeout="write_idle"`, attackers, func(t *testing.T, _ int) bool {
			conn := testenv.SlowReader(t, addr, limitsHost, fmt.Sprintf("/bytes/%d", slowReadBytes))
			mu.Lock()
			readers = append(readers, conn)
			mu.Unlock()
			return false // judged by slowRead, once every attacker has asked
		}},
		// Some attackers are over the cap, not only cut by the header
		// timeout.
		{"limits-conn-cap", connCap + attackers, "sluice_connections_refused_total", "", 1, func(t *testing.T, _ int) bool {
			return testenv.IdleConn(t, addr)
		}},
	} {
		if !tn.cs.wants(c.name) {
			continue
		}
		t := tn.e.t
		legit := newLegitClient(addr)
		if err := legit.request(); err != nil { // the connection, opened before the attack
			t.Fatalf("%s: the legitimate client's first request: %v", c.name, err)
		}
		stop := make(chan struct{})
		loadDone := make(chan struct{})
		go func() {
			defer close(loadDone)
			legit.run(t, stop)
		}()
		var closed atomic.Int64
		var wg sync.WaitGroup
		before, err := scrapeLabelled(admin, c.metric, c.label)
		if err != nil {
			t.Fatalf("%s: scraping %s: %v", c.name, admin, err)
		}
		for i := range c.n {
			wg.Go(func() {
				if c.attack(t, i) {
					closed.Add(1)
				}
			})
		}
		wg.Wait()
		if c.name == "limits-slow-read" {
			closed.Store(tn.slowRead(admin, before, readers))
		}
		if n, err := scrapeLabelled(admin, c.metric, c.label); err != nil || n-before < c.fired {
			t.Errorf("%s: %s{%s} went from %v to %v (%v), want at least %v more: the limit did not fire", c.name, c.metric, c.label, before, n, err, c.fired)
		}
		close(stop)
		<-loadDone
		line := fmt.Sprintf("e2e %s: requests=%d failed=%d attackers_closed=%d", c.name, legit.requests.Load(), legit.failed.Load(), closed.Load())
		t.Log(line)
		writeSummary([]string{line})
		if legit.failed.Load() != 0 || closed.Load() != int64(c.n) || legit.requests.Load() == 0 {
			t.Errorf("%s: %d of %d legitimate requests failed, %d of %d attackers closed by the proxy", c.name,
				legit.failed.Load(), legit.requests.Load(), closed.Load(), c.n)
		}
	}
}

// slowRead waits until the proxy counted a write timeout for every
// slow-read attacker (read nothing till then), then counts the attackers
// whose response was cut short by the proxy closing the connection.
func (tn *tenancy) slowRead(admin string, before float64, conns []net.Conn) int64 {
	tn.e.eventually(time.Minute, "a write timeout for every slow reader", func(context.Context) (bool, error) {
		n, err := scrapeLabelled(admin, "sluice_client_timeouts_total", `timeout="write_idle"`)
		return err == nil && n-before >= attackers, err
	})
	var closed int64
	for _, conn := range conns {
		if conn == nil {
			continue
		}
		if n, ok := testenv.Drain(conn); ok && n < slowReadBytes {
			closed++
		}
	}
	return closed
}

// legitClient sends a legitimate load of 50 requests a second on one
// kept-alive connection.
type legitClient struct {
	addr             string
	client           *http.Client
	requests, failed atomic.Int64
	errs             []string
}

func newLegitClient(addr string) *legitClient {
	return &legitClient{addr: addr, client: &http.Client{
		Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1},
		Timeout:   10 * time.Second,
	}}
}

// run sends a request every 20ms until stop.
func (l *legitClient) run(t *testing.T, stop <-chan struct{}) {
	defer l.client.CloseIdleConnections()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		l.requests.Add(1)
		if err := l.request(); err != nil {
			if l.failed.Add(1) <= 5 {
				t.Logf("legitimate request failed: %v", err)
			}
		}
	}
}

func (l *legitClient) request() error {
	req, err := http.NewRequest("GET", "http://"+l.addr+"/", nil)
	if err != nil {
		return err
	}
	req.Host = limitsHost
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	a, err := readAnswer(resp)
	if err != nil {
		return err
	}
	if a.status != 200 || !a.from(echoA) {
		return fmt.Errorf("answered %v, want 200 from %s", a, echoA)
	}
	return nil
}

// scrapeLabelled sums the samples of name whose labels contain label on a
// proxy's admin address.
func scrapeLabelled(addr, name, label string) (float64, error) {
	return testenv.ScrapeSum("http://"+addr+"/metrics", name, label)
}
