// Command tlsconns measures what a new TLS connection costs a proxy: for
// --duration, --conns loops each open a TLS 1.3 connection (X25519, the
// proxy's ECDSA P-256 certificate), send one request with "Connection:
// close", read the response and close. It reads the proxy's CPU time from
// /proc/PID/stat before and after and prints one result.Record (phase
// "row"): handshakes per second, and the proxy's CPU µs per connection
// (handshake + request), whose inverse is handshakes per second per core.
// With --resume the loops share a session cache, so the handshakes resume
// a session (variant "tls-resumed"; Resumed counts those that did);
// otherwise every handshake is full (variant "tls-new").
//
// Data flow: scripts/bench.sh → tlsconns → TLS → proxy → backend;
// tlsconns → JSON line → raw.jsonl → report.
//
//	tlsconns --proxy haproxy --pid 1234 --addr 127.0.0.1:24103 --duration 10s [--resume]
package main

import (
	"bufio"
	"crypto/tls"
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

// Options configure one run.
type Options struct {
	PID        int
	ClockTicks float64
	Addr       string // proxy's TLS address, loopback
	Host       string // SNI and Host header
	Conns      int    // connections opened at once
	Duration   time.Duration
	Resume     bool
}

func main() {
	var o Options
	proxy := flag.String("proxy", "", "name of the proxy under test")
	round := flag.Int("round", 0, "round number, recorded as is")
	flag.IntVar(&o.PID, "pid", 0, "PID whose CPU time is measured (the proxy's worker); 0 for none")
	flag.Float64Var(&o.ClockTicks, "clock-ticks", 100, "USER_HZ of /proc/PID/stat (getconf CLK_TCK)")
	flag.StringVar(&o.Addr, "addr", "", "proxy TLS address host:port (loopback)")
	flag.StringVar(&o.Host, "host", "bench.local", "SNI name and Host header")
	flag.IntVar(&o.Conns, "conns", 8, "connections in flight at once")
	flag.DurationVar(&o.Duration, "duration", 10*time.Second, "how long to run")
	flag.BoolVar(&o.Resume, "resume", false, "resume TLS sessions (a shared client session cache)")
	flag.Parse()
	rec := result.Record{Phase: result.PhaseRow, Variant: "tls-new", Proxy: *proxy, Round: *round}
	if o.Resume {
		rec.Variant = "tls-resumed"
	}
	if err := run(&rec, o); err != nil {
		rec.Error = err.Error()
		rec.Failed = -1
	}
	result.Print(rec)
}

func run(rec *result.Record, o Options) error {
	host, _, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return fmt.Errorf("parsing --addr: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--addr %q: only loopback addresses are allowed", o.Addr)
	}
	if o.Conns <= 0 || o.Duration <= 0 {
		return errors.New("--conns and --duration must be positive")
	}
	cfg := &tls.Config{
		ServerName: o.Host,
		// The client's cost is not measured: skip verifying the
		// self-signed bench certificate.
		InsecureSkipVerify: true,
		MinVersion:         tls.VersionTLS13,
		// What OpenSSL 3.0 (wrk, h2load, HAProxy, nginx) offers; Go would
		// otherwise offer the costlier hybrid X25519MLKEM768 to sluice.
		CurvePreferences: []tls.CurveID{tls.X25519},
		NextProtos:       []string{"http/1.1"},
	}
	if o.Resume {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(o.Conns)
	}
	req := []byte("GET / HTTP/1.1\r\nHost: " + o.Host + "\r\nConnection: close\r\n\r\n")

	// One connection first: a resumed run starts with a ticket, and a
	// proxy that does not answer fails here.
	if _, err := once(o.Addr, cfg, req); err != nil {
		return fmt.Errorf("first connection: %w", err)
	}
	var before float64
	if o.PID > 0 {
		if before, err = result.ProcStatCPU(o.PID, o.ClockTicks); err != nil {
			return err
		}
	}
	var done, resumed, failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	deadline := start.Add(o.Duration)
	var wg sync.WaitGroup
	for range o.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				r, err := once(o.Addr, cfg, req)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				done.Add(1)
				if r {
					resumed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	if o.PID > 0 {
		after, err := result.ProcStatCPU(o.PID, o.ClockTicks)
		if err != nil {
			return err
		}
		rec.CPUSeconds = after - before
		rec.CPUUtil = rec.CPUSeconds / wall
		if n := done.Load(); n > 0 {
			rec.CPUMicrosReq = rec.CPUSeconds * 1e6 / float64(n)
		}
	}
	rec.Requests, rec.Resumed, rec.Failed = done.Load(), resumed.Load(), failed.Load()
	rec.RPS = float64(rec.Requests) / wall
	if e, ok := firstErr.Load().(string); ok {
		rec.Samples = append(rec.Samples, e)
	}
	if o.Resume && rec.Resumed < rec.Requests*9/10 {
		rec.Samples = append(rec.Samples, fmt.Sprintf("only %d of %d handshakes resumed a session", rec.Resumed, rec.Requests))
	}
	return nil
}

// once opens one TLS connection, sends req, reads a 200 response to its
// end and closes; it reports whether the handshake resumed a session.
func once(addr string, cfg *tls.Config, req []byte) (resumed bool, err error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return false, fmt.Errorf("handshake: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(req); err != nil {
		return false, fmt.Errorf("writing request: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false, fmt.Errorf("reading response: %w", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("response: status %d, body error %v", resp.StatusCode, err)
	}
	return c.ConnectionState().DidResume, nil
}
