// Command latency sends requests at a fixed rate (open loop) to a proxy or
// straight to the backend and reports p50, p90, p99, p99.9 and max latency
// (and the percentiles of the HDR-style plot), measured from
// each request's scheduled start, so a stalled proxy shows up as latency
// instead of a slower send rate. The report subtracts the direct run's
// percentiles to get the latency each proxy adds.
//
// It is deliberately lean (raw keep-alive connections, one goroutine each, a
// scheduler that hands out send times) because it shares a core with the
// backend and must not be the bottleneck at tens of thousands of requests
// per second; test/load is the richer tool for correctness tests.
//
// Data flow: scripts/bench.sh → latency → N keep-alive connections → proxy →
// backend; latency → JSON line → raw.jsonl → report.
//
//	latency --proxy haproxy --round 1 --addr 127.0.0.1:24083 --rate 10000 --duration 10s
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sluice.dev/sluice/bench/internal/goruntime"
	"sluice.dev/sluice/bench/internal/result"
)

// Options configure one run.
type Options struct {
	Addr     string        // target host:port, loopback
	Host     string        // Host header
	Rate     int           // requests per second
	Duration time.Duration // sending time
	Conns    int           // keep-alive connections
	Timeout  time.Duration // per request, and the grace period after Duration
}

func main() {
	var o Options
	proxy := flag.String("proxy", "", "name of the proxy under test (sluice, nginx, haproxy, direct)")
	round := flag.Int("round", 0, "round number, recorded as is")
	flag.StringVar(&o.Addr, "addr", "", "target host:port (loopback)")
	flag.StringVar(&o.Host, "host", "bench.local", "Host header")
	flag.IntVar(&o.Rate, "rate", 1000, "requests per second")
	flag.DurationVar(&o.Duration, "duration", 10*time.Second, "how long to send")
	flag.IntVar(&o.Conns, "conns", 128, "keep-alive connections; a request whose time has come waits for a free one, and the wait counts as latency")
	flag.DurationVar(&o.Timeout, "timeout", 5*time.Second, "per-request timeout")
	pid := flag.Int("pid", 0, "PID whose CPU time per request is measured (the proxy's worker); 0 for none")
	hz := flag.Float64("clock-ticks", 100, "USER_HZ of /proc/PID/stat (getconf CLK_TCK)")
	metrics := flag.String("metrics", "", "a Go proxy's Prometheus endpoint (http://127.0.0.1:PORT/metrics), read before and after the run: GC and scheduling latency during it")
	sweep := flag.String("sweep", "", "a load-sweep run at this share (percent) of the proxy's own max req/s: recorded as phase sweep with this variant")
	variant := flag.String("variant", "", "what the rate is, recorded as the latency record's variant: \"common\" (the rate every proxy runs at) or a share in percent of the proxy's own max req/s (\"25\", \"50\"); empty for the direct runs")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rec := result.Record{Phase: result.PhaseLatency, Proxy: *proxy, Round: *round, Rate: o.Rate, Variant: *variant}
	if *sweep != "" {
		rec.Phase, rec.Variant = result.PhaseSweep, *sweep
	}
	var before float64
	if *pid > 0 {
		var err error
		if before, err = result.ProcStatCPU(*pid, *hz); err != nil {
			rec.Error = err.Error()
			result.Print(rec)
			return
		}
	}
	var rtBefore goruntime.Snapshot
	if *metrics != "" {
		var err error
		if rtBefore, err = goruntime.Scrape(*metrics); err != nil {
			rec.Error = err.Error()
			result.Print(rec)
			return
		}
	}
	if err := run(ctx, &rec, o); err != nil {
		rec.Error = err.Error()
	}
	if *pid > 0 {
		after, err := result.ProcStatCPU(*pid, *hz)
		if ok := rec.Sent - rec.Failed - rec.Unsent; err == nil && ok > 0 {
			rec.CPUSeconds = after - before
			rec.CPUMicrosReq = rec.CPUSeconds * 1e6 / float64(ok)
		}
	}
	if *metrics != "" {
		if rtAfter, err := goruntime.Scrape(*metrics); err == nil {
			st := goruntime.Delta(rtBefore, rtAfter)
			rec.Runtime = &st
		} else if rec.Error == "" {
			rec.Error = err.Error()
		}
	}
	result.Print(rec)
}

type worker struct {
	lat    []time.Duration
	failed int64
	errs   map[string]int64
}

func run(ctx context.Context, rec *result.Record, o Options) error {
	if err := checkLoopback(o.Addr); err != nil {
		return err
	}
	if o.Rate <= 0 || o.Duration <= 0 || o.Conns <= 0 {
		return errors.New("--rate, --duration and --conns must be positive")
	}
	total := int(int64(o.Rate) * int64(o.Duration) / int64(time.Second))
	req := []byte("GET / HTTP/1.1\r\nHost: " + o.Host + "\r\nUser-Agent: sluice-bench-latency\r\n\r\n")
	// Every scheduled send fits in the queue: the scheduler never blocks, so
	// a slow target shows up as latency, never as a lower send rate.
	queue := make(chan time.Time, total)
	deadline := time.Now().Add(o.Duration + o.Timeout + time.Second)
	workers := make([]*worker, o.Conns)
	var wg sync.WaitGroup
	var done atomic.Int64
	for i := range workers {
		w := &worker{lat: make([]time.Duration, 0, total/o.Conns+16), errs: map[string]int64{}}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(ctx, o, req, queue, deadline, &done)
		}()
	}

	start := time.Now().Add(10 * time.Millisecond)
	interval := float64(time.Second) / float64(o.Rate)
	sent := 0
schedule:
	for sent < total {
		now := time.Now()
		for sent < total {
			at := start.Add(time.Duration(float64(sent) * interval))
			if at.After(now) {
				break
			}
			queue <- at
			sent++
		}
		if sent == total {
			break
		}
		next := start.Add(time.Duration(float64(sent) * interval))
		select {
		case <-ctx.Done():
			break schedule
		case <-time.After(time.Until(next)):
		}
	}
	close(queue)
	wg.Wait()

	var lat []time.Duration
	errs := map[string]int64{}
	for _, w := range workers {
		lat = append(lat, w.lat...)
		rec.Failed += w.failed
		for k, v := range w.errs {
			errs[k] += v
		}
	}
	// Requests still queued when the workers gave up never got an answer.
	if unsent := int64(total) - int64(len(lat)) - rec.Failed; unsent > 0 {
		rec.Unsent = unsent
	}
	rec.Sent = int64(total)
	for k, v := range errs {
		rec.Samples = append(rec.Samples, fmt.Sprintf("%d× %s", v, k))
	}
	sort.Strings(rec.Samples)
	if len(lat) == 0 {
		return errors.New("no request succeeded")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) float64 {
		i := int(f*float64(len(lat))+0.5) - 1
		i = max(0, min(i, len(lat)-1))
		return float64(lat[i]) / float64(time.Microsecond)
	}
	rec.P50Us, rec.P90Us, rec.P99Us, rec.P999Us, rec.MaxUs = q(0.50), q(0.90), q(0.99), q(0.999), q(1)
	for _, p := range result.HDRPercentiles {
		rec.HDRUs = append(rec.HDRUs, q(p/100))
	}
	return nil
}

// loop sends one request per queued send time on its own keep-alive
// connection, reconnecting after an error.
func (w *worker) loop(ctx context.Context, o Options, req []byte, queue <-chan time.Time, deadline time.Time, done *atomic.Int64) {
	var c net.Conn
	var br *bufio.Reader
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for at := range queue {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return
		}
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		if c == nil {
			var err error
			if c, err = net.DialTimeout("tcp", o.Addr, o.Timeout); err != nil {
				w.fail("dialing: " + errKind(err))
				c = nil
				continue
			}
			br = bufio.NewReaderSize(c, 4096)
		}
		c.SetDeadline(time.Now().Add(o.Timeout))
		ok, err := exchange(c, br, req)
		if err != nil {
			w.fail(err.Error())
			c.Close()
			c = nil
			continue
		}
		w.lat = append(w.lat, time.Since(at))
		done.Add(1)
		if !ok {
			c.Close()
			c = nil
		}
	}
}

func (w *worker) fail(kind string) {
	w.failed++
	w.errs[kind]++
}

// exchange writes req and reads one response; it reports whether the
// connection may be reused.
func exchange(c net.Conn, br *bufio.Reader, req []byte) (keepAlive bool, err error) {
	if _, err := c.Write(req); err != nil {
		return false, fmt.Errorf("writing: %s", errKind(err))
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return false, fmt.Errorf("reading response: %s", errKind(err))
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return false, fmt.Errorf("reading body: %s", errKind(err))
	}
	if resp.StatusCode != http.StatusOK {
		return !resp.Close, fmt.Errorf("status %d", resp.StatusCode)
	}
	return !resp.Close, nil
}

// errKind shortens an error to something that repeats across requests.
func errKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return err.Error()
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
