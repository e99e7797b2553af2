//go:build integration

package integration

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/sluice/test/testenv"
)

// TestClientLimits runs a real sluice proxy with short client timeouts and
// a connection cap, and sets attackers on it one kind at a time while a
// legitimate client sends 50 requests a second on a kept-alive connection:
// slowloris (headers trickled), slow-body (a body that stops), slow-read
// (a response never read) and conn-cap (more idle connections than the
// cap). Every legitimate request must succeed, and the proxy must close
// every attacker's connection.
func TestClientLimits(t *testing.T) {
	e := newEnv(t)
	web := e.pool("web", 1)
	web.start(0)
	e.write("objects.yaml", docs(ingressClassYAML, serviceYAML("web"), web.slice([]int{0}),
		ingressYAML("web", "limits.test", rule{"/", "web"})))
	const connCap = 40
	sp := e.startProxy("proxy", "--read-header-timeout=1s", "--body-idle-timeout=1s",
		"--write-idle-timeout=1s", fmt.Sprintf("--max-connections=%d", connCap))
	addr := fmt.Sprintf("127.0.0.1:%d", sp.http)
	waitLimitsRoute(t, addr)

	const attackers = 20
	for _, c := range []struct {
		name string
		n    int
		// attack runs one attacker; it reports whether the proxy closed
		// the attacker's connection.
		attack func(t *testing.T, i int) bool
	}{
		{"slowloris", attackers, func(t *testing.T, _ int) bool {
			return testenv.Slowloris(t, addr, "limits.test")
		}},
		{"slow-body", attackers, func(t *testing.T, _ int) bool {
			return testenv.SlowBody(t, addr, "limits.test")
		}},
		{"slow-read", attackers, func(t *testing.T, _ int) bool {
			conn := testenv.SlowReader(t, addr, "limits.test", fmt.Sprintf("/bytes/%d", 64<<20))
			if conn == nil {
				return false
			}
			// Read nothing until the proxy counted every attacker's
			// write timeout, then see whether the response was cut.
			waitMetricAtLeast(t, sp, "sluice_client_timeouts_total", `timeout="write_idle"`, attackers)
			n, closed := testenv.Drain(conn)
			return closed && n < 64<<20
		}},
		{"conn-cap", connCap + attackers, func(t *testing.T, _ int) bool {
			return testenv.IdleConn(t, addr)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			stop := make(chan struct{})
			var requests, failed atomic.Int64
			loadDone := make(chan struct{})
			go func() {
				defer close(loadDone)
				legitLoad(addr, stop, &requests, &failed)
			}()
			var closed atomic.Int64
			var wg sync.WaitGroup
			for i := range c.n {
				wg.Go(func() {
					if c.attack(t, i) {
						closed.Add(1)
					}
				})
			}
			wg.Wait()
			close(stop)
			<-loadDone
			fmt.Printf("e2e limits-%s: requests=%d failed=%d attackers_closed=%d\n", c.name, requests.Load(), failed.Load(), closed.Load())
			if failed.Load() != 0 || closed.Load() != int64(c.n) || requests.Load() == 0 {
				t.Errorf("requests=%d failed=%d attackers_closed=%d of %d", requests.Load(), failed.Load(), closed.Load(), c.n)
			}
		})
	}
	refused, err := sp.metric("sluice_connections_refused_total")
	if err != nil || refused == 0 {
		t.Errorf("no connection refused at the cap: %v %v", refused, err)
	}
}

// legitClient keeps one connection alive across the cases: the proxy's
// cap must never refuse it.
var legitClient = &http.Client{
	Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1},
	Timeout:   10 * time.Second,
}

// legitLoad sends 50 requests a second, one at a time, until stop.
func legitLoad(addr string, stop <-chan struct{}, requests, failed *atomic.Int64) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		requests.Add(1)
		if err := legitRequest(addr); err != nil {
			failed.Add(1)
			fmt.Printf("legit request failed: %v\n", err)
		}
	}
}

func legitRequest(addr string) error {
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Host = "limits.test"
	resp, err := legitClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// waitLimitsRoute waits until the proxy serves limits.test.
func waitLimitsRoute(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for legitRequest(addr) != nil {
		if time.Now().After(deadline) {
			t.Fatal("limits.test not served")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitMetricAtLeast polls the proxy's metric (summed over the series
// whose labels contain label) until it reaches want.
func waitMetricAtLeast(t *testing.T, sp *sluiceProxy, name, label string, want float64) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		if v, err := sp.metricWith(name, label); err == nil && v >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s{%s} below %v", name, label, want)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metricWith sums the samples of name whose labels contain label (as it
// is written on /metrics, e.g. `timeout="write_idle"`).
func (sp *sluiceProxy) metricWith(name, label string) (float64, error) {
	return testenv.ScrapeSum(sp.admin("/metrics"), name, label)
}
