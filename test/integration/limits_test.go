//go:build integration

package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
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
			conn := dialAttacker(t, addr)
			if conn == nil {
				return false
			}
			io.WriteString(conn, "GET / HTTP/1.1\r\nHost: limits.test\r\n")
			go func() {
				for _, b := range []byte("X-Slow: 1\r\nX-Slow: 2\r\nX-Slow: 3\r\nX-Slow: 4\r\n") {
					if _, err := conn.Write([]byte{b}); err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
			return closedByProxy(conn)
		}},
		{"slow-body", attackers, func(t *testing.T, _ int) bool {
			conn := dialAttacker(t, addr)
			if conn == nil {
				return false
			}
			io.WriteString(conn, "POST / HTTP/1.1\r\nHost: limits.test\r\nContent-Length: 1000000\r\n\r\n0123456789")
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusRequestTimeout {
				t.Errorf("stalled body: %v %v, want 408", resp, err)
				return false
			}
			_, err = io.Copy(io.Discard, br)
			return err == nil || errors.Is(err, syscall.ECONNRESET)
		}},
		{"slow-read", attackers, func(t *testing.T, _ int) bool {
			conn := dialAttacker(t, addr)
			if conn == nil {
				return false
			}
			// The default receive buffer: a tiny one makes the kernel
			// deliver the rest, once read, by slow zero-window probes.
			io.WriteString(conn, fmt.Sprintf("GET /bytes/%d HTTP/1.1\r\nHost: limits.test\r\n\r\n", 64<<20))
			// Read nothing until the proxy counted every attacker's
			// write timeout, then see whether the response was cut.
			waitMetricAtLeast(t, sp, "sluice_client_timeouts_total", `timeout="write_idle"`, attackers)
			n, closed := drain(conn)
			return closed && n < 64<<20
		}},
		{"conn-cap", connCap + attackers, func(t *testing.T, _ int) bool {
			// Idle connections: beyond the cap they are reset at
			// accept (maybe before the dial returns), the others
			// closed by the header timeout.
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				return errors.Is(err, syscall.ECONNRESET)
			}
			t.Cleanup(func() { conn.Close() })
			conn.SetDeadline(time.Now().Add(30 * time.Second)) // failsafe
			return closedByProxy(conn)
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

func dialAttacker(t *testing.T, addr string) net.Conn {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Errorf("dialing: %v", err)
		return nil
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // failsafe
	return conn
}

// closedByProxy reads conn until the proxy closes it (whatever it sent
// before) and reports whether it did; false on the failsafe deadline.
func closedByProxy(conn net.Conn) bool {
	if conn == nil {
		return false
	}
	_, closed := drain(conn)
	return closed
}

// drain reads conn to its end: the bytes read, and whether the proxy
// closed it (EOF or reset).
func drain(conn net.Conn) (int64, bool) {
	n, err := io.Copy(io.Discard, conn)
	return n, err == nil || errors.Is(err, syscall.ECONNRESET)
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
	resp, err := http.Get(sp.admin("/metrics"))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("parsing %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}
