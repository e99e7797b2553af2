// Command idleconns measures a proxy's memory per idle keep-alive client
// connection: it reads the proxy's VmRSS, opens N connections that each send
// one request and read the whole response, waits for the proxy's VmRSS to
// settle, reads it again and reports (after-before)/N. The connections stay
// open and idle until the second reading, then are closed.
//
// Settling: a proxy may give memory back a while after its connections went
// idle (sluice parks an idle connection after 1-2 s, which frees its
// goroutine's stack; the Go runtime then returns the pages to the system
// in the background, or at a collection). The reading is taken once VmRSS
// has not fallen by more than --settle-slack over --settle-quiet, or after
// --settle-max; the record says how long that took (settle_seconds) and
// the VmRSS samples go to stderr. With --metrics (a Prometheus endpoint,
// sluice's admin /metrics) the record also has the Go runtime's view after
// the wait: goroutines, stack and heap in use.
//
// Data flow: scripts/bench.sh → idleconns → N × TCP → proxy → backend;
// idleconns → JSON line → raw.jsonl → report.
//
//	idleconns --proxy sluice --pid 1234 --addr 127.0.0.1:24081 --conns 10000
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"sluice.dev/sluice/bench/internal/result"
)

// Options configure one measurement.
type Options struct {
	PID         int           // process whose VmRSS is read
	Addr        string        // proxy address, loopback
	Host        string        // Host header
	Conns       int           // idle connections to hold
	Concurrency int           // connections being opened at once
	Settle      time.Duration // wait before the first RSS reading, and at least before the second
	// SettleQuiet, SettleSlack, SettleMax: the second reading waits until
	// VmRSS has not fallen by more than SettleSlack KiB over SettleQuiet,
	// at most SettleMax.
	SettleQuiet, SettleMax time.Duration
	SettleSlack            int64
	Metrics                string // Prometheus endpoint of the proxy (sluice), or ""
	// Sources is how many loopback source addresses (127.0.0.1, .2, ...)
	// the connections are spread over: one address has about 28k
	// ephemeral ports, so 50k connections need two.
	Sources int
	// OpenOver spreads the opening of each batch of connections over
	// this long. A proxy whose accepted sockets have TCP keep-alive on
	// (Go's default: a probe after 15 s idle, then every 15 s) would
	// otherwise send every connection's probes in one burst, and on a
	// busy loopback (net.core.netdev_max_backlog, 1000 by default) the
	// same connections' probes are dropped each time until the kernel
	// gives up on them (ETIMEDOUT after 9 probes, about 150 s): a closed
	// connection that is the bench's doing, not the proxy's.
	OpenOver time.Duration
	// Halves: also read VmRSS, settled, after the first half of the
	// connections, and report what the second half cost per connection.
	Halves bool
}

func main() {
	var o Options
	proxy := flag.String("proxy", "", "name of the proxy under test")
	round := flag.Int("round", 0, "round number, recorded as is")
	flag.IntVar(&o.PID, "pid", 0, "PID whose VmRSS is measured (the proxy's worker)")
	flag.StringVar(&o.Addr, "addr", "", "proxy address host:port (loopback)")
	flag.StringVar(&o.Host, "host", "bench.local", "Host header")
	flag.IntVar(&o.Conns, "conns", 10000, "idle keep-alive connections to open")
	flag.IntVar(&o.Concurrency, "concurrency", 100, "connections opened in parallel")
	flag.DurationVar(&o.Settle, "settle", 2*time.Second, "wait before the first RSS reading, and at least before the second")
	flag.DurationVar(&o.SettleQuiet, "settle-quiet", 10*time.Second, "the second RSS reading waits until VmRSS has not fallen for this long")
	flag.Int64Var(&o.SettleSlack, "settle-slack", 256, "KiB VmRSS may fall over --settle-quiet and still count as settled")
	flag.DurationVar(&o.SettleMax, "settle-max", 180*time.Second, "longest wait for VmRSS to settle (the Go runtime collects at least every 2 minutes)")
	flag.StringVar(&o.Metrics, "metrics", "", "the proxy's Prometheus endpoint (sluice admin /metrics): the Go runtime's view goes into the record")
	flag.IntVar(&o.Sources, "sources", 0, "loopback source addresses to spread the connections over (0: one per 25,000 connections)")
	flag.DurationVar(&o.OpenOver, "open-over", 15*time.Second, "spread the opening of each batch of connections over this long (desynchronizes TCP keep-alive probes on loopback)")
	flag.BoolVar(&o.Halves, "halves", false, "also read VmRSS (settled) after the first half of the connections and report the second half's KiB per connection (kib_per_conn_marginal)")
	flag.Parse()
	rec := result.Record{Phase: result.PhaseIdle, Proxy: *proxy, Round: *round}
	if err := measure(&rec, o); err != nil {
		rec.Error = err.Error()
	}
	result.Print(rec)
}

func measure(rec *result.Record, o Options) error {
	if err := checkLoopback(o.Addr); err != nil {
		return err
	}
	if o.PID <= 0 || o.Conns <= 0 || o.Concurrency <= 0 {
		return errors.New("--pid, --conns and --concurrency must be positive")
	}
	if o.Sources <= 0 {
		o.Sources = (o.Conns + 24999) / 25000
	}
	if o.Sources > 250 {
		return errors.New("--sources must be at most 250")
	}
	req := []byte("GET / HTTP/1.1\r\nHost: " + o.Host + "\r\nUser-Agent: sluice-bench-idle\r\n\r\n")

	// Warm up on one connection so lazily allocated state (upstream
	// connection, pools) is in the "before" reading, not charged to the
	// idle connections.
	c, err := open(o.Addr, req, 0)
	if err != nil {
		return fmt.Errorf("warming up: %w", err)
	}
	c.Close()
	time.Sleep(o.Settle)
	if rec.RSSBeforeKiB, err = result.RSSKiB(o.PID); err != nil {
		return err
	}

	conns := make([]net.Conn, o.Conns)
	var failed atomic.Int64
	var firstErr atomic.Value
	openRange := func(from, to int) {
		start := time.Now()
		var next atomic.Int64
		next.Store(int64(from))
		var wg sync.WaitGroup
		for w := 0; w < o.Concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= to {
						return
					}
					// Spread the opening: see Options.OpenOver.
					time.Sleep(time.Until(start.Add(o.OpenOver * time.Duration(i-from) / time.Duration(to-from))))
					c, err := open(o.Addr, req, i%o.Sources)
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					conns[i] = c
				}
			}()
		}
		wg.Wait()
	}
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	// With Halves, the first half is opened and settled first: the growth
	// from there to all of them is what one more idle connection costs,
	// without the one-time growth of the process (a Go runtime's heap
	// goal, pools) that the first connections pay for.
	half, halfRSS := 0, int64(0)
	if o.Halves {
		half = o.Conns / 2
		openRange(0, half)
		if halfRSS, err = settle(o); err != nil {
			return err
		}
	}
	halfFailed := failed.Load()
	openRange(half, o.Conns)
	start := time.Now()
	if rec.RSSAfterKiB, err = settle(o); err != nil {
		return err
	}
	rec.SettleSeconds = time.Since(start).Seconds()
	if o.Halves {
		if n := o.Conns - half - int(failed.Load()-halfFailed); n > 0 {
			rec.KiBPerConnMarginal = float64(rec.RSSAfterKiB-halfRSS) / float64(n)
		}
	}
	if o.Metrics != "" {
		if err := runtimeView(rec, o.Metrics); err != nil {
			rec.Samples = append(rec.Samples, err.Error())
		}
	}
	// Check that the proxy kept them open: a closed connection reads EOF at
	// once, an open idle one times out.
	closed := 0
	for _, c := range conns {
		if c == nil {
			continue
		}
		c.SetReadDeadline(time.Now().Add(time.Microsecond))
		if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
			closed++
		}
	}
	rec.Conns = o.Conns - int(failed.Load()) - closed
	rec.Failed = failed.Load() + int64(closed)
	if rec.Conns > 0 {
		rec.KiBPerConn = float64(rec.RSSAfterKiB-rec.RSSBeforeKiB) / float64(rec.Conns)
	}
	if e, ok := firstErr.Load().(string); ok {
		rec.Samples = append(rec.Samples, e)
	}
	if closed > 0 {
		rec.Samples = append(rec.Samples, fmt.Sprintf("%d connections closed by the proxy while idle", closed))
	}
	return nil
}

// open dials addr from 127.0.0.(1+source), sends one request and reads the
// whole response.
func open(addr string, req []byte, source int) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+source))}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dialing: %w", err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(req); err != nil {
		c.Close()
		return nil, fmt.Errorf("writing request: %w", err)
	}
	// The bufio.Reader is dropped after the response: the connection is idle
	// from here on and no more bytes are expected.
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 1024), nil)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("reading response: %w", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		c.Close()
		return nil, fmt.Errorf("response: status %d, close %v, body error %v", resp.StatusCode, resp.Close, err)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("parsing --addr: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--addr %q: only loopback addresses are allowed", addr)
	}
	return nil
}
