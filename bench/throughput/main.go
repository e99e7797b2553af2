// Command throughput runs wrk against one proxy (or the backend directly) and
// reads the proxy process's CPU time (utime+stime from /proc/PID/stat) before
// and after, so it reports both the requests per second wrk reached and the
// proxy's CPU microseconds per request. It prints one result.Record.
//
// Data flow: scripts/bench.sh → throughput → wrk → proxy → backend;
// throughput → JSON line → raw.jsonl → report.
//
// With --variant the record is one of the extra rows (result.PhaseRow):
// HTTPS, large bodies (--body-bytes) or HTTP/2, where the command is h2load
// and --h2load-log names its --log-file, from which the p99 is taken.
//
//	throughput --proxy nginx --pid 1234 --round 1 -- wrk -t1 -c64 -d10s http://127.0.0.1:24082/
//	throughput --proxy sluice --variant h2 --h2load-log /tmp/h2.log -- h2load -c4 -m16 -D 10 --log-file /tmp/h2.log https://...
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"sluice.dev/sluice/bench/internal/result"
)

func main() {
	proxy := flag.String("proxy", "", "name of the proxy under test (sluice, nginx, haproxy, direct)")
	pid := flag.Int("pid", 0, "PID whose CPU time is measured (the proxy's worker); 0 for none")
	round := flag.Int("round", 0, "round number, recorded as is")
	hz := flag.Float64("clock-ticks", 100, "USER_HZ of /proc/PID/stat (getconf CLK_TCK)")
	variant := flag.String("variant", "", "extra row this run is (https, h2, body-10k, body-1m); empty for the plain throughput phase")
	bodyBytes := flag.Int64("body-bytes", 0, "response body size, recorded as is")
	h2log := flag.String("h2load-log", "", "h2load's --log-file, read for the p99 (the command is h2load)")
	flag.Parse()
	rec := result.Record{Phase: result.PhaseThroughput, Proxy: *proxy, Round: *round}
	if *variant != "" {
		rec.Phase, rec.Variant, rec.BodyBytes = result.PhaseRow, *variant, *bodyBytes
	}
	if err := run(&rec, *pid, *hz, flag.Args(), *h2log); err != nil {
		rec.Error = err.Error()
		rec.Failed = -1
	}
	result.Print(rec)
}

func run(rec *result.Record, pid int, hz float64, wrk []string, h2log string) error {
	if len(wrk) == 0 {
		return errors.New("no wrk command after --")
	}
	var before float64
	var err error
	if pid > 0 {
		if before, err = result.ProcStatCPU(pid, hz); err != nil {
			return err
		}
	}
	var out bytes.Buffer
	cmd := exec.Command(wrk[0], wrk[1:]...)
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("running wrk: %w: %s", err, out.String())
	}
	wall := time.Since(start).Seconds()
	if pid > 0 {
		after, err := result.ProcStatCPU(pid, hz)
		if err != nil {
			return err
		}
		rec.CPUSeconds = after - before
		rec.CPUUtil = rec.CPUSeconds / wall
	}
	var w wrkResult
	if filepath.Base(wrk[0]) == "h2load" {
		w, err = parseH2load(out.String())
		if err == nil && h2log != "" {
			w.p99Us, err = h2loadP99(h2log)
		}
	} else {
		w, err = parseWrk(out.String())
	}
	if err != nil {
		return err
	}
	rec.Requests, rec.RPS, rec.Non2xx, rec.SocketErrors = w.requests, w.rps, w.non2xx, w.socketErrors
	rec.P99Us = w.p99Us
	rec.Failed = w.non2xx + w.socketErrors
	if pid > 0 && w.requests > 0 {
		rec.CPUMicrosReq = rec.CPUSeconds * 1e6 / float64(w.requests)
	}
	return nil
}

type wrkResult struct {
	requests     int64
	rps          float64
	non2xx       int64
	socketErrors int64
	p99Us        float64 // 0 when not reported
}

var (
	reRequests = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	reRPS      = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	reNon2xx   = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s+(\d+)`)
	reSocket   = regexp.MustCompile(`(?m)^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	reP99      = regexp.MustCompile(`(?m)^\s*99%\s+([0-9.]+)(us|ms|s)\s*$`)
)

// parseWrk reads wrk 4.x's summary. wrk prints the "Non-2xx" and "Socket
// errors" lines only when they are non-zero.
func parseWrk(s string) (wrkResult, error) {
	var w wrkResult
	m := reRequests.FindStringSubmatch(s)
	if m == nil {
		return w, fmt.Errorf("parsing wrk output: no request count in %q", s)
	}
	w.requests, _ = strconv.ParseInt(m[1], 10, 64)
	if m := reRPS.FindStringSubmatch(s); m != nil {
		w.rps, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := reNon2xx.FindStringSubmatch(s); m != nil {
		w.non2xx, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reSocket.FindStringSubmatch(s); m != nil {
		for _, v := range m[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			w.socketErrors += n
		}
	}
	if m := reP99.FindStringSubmatch(s); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		w.p99Us = v * map[string]float64{"us": 1, "ms": 1e3, "s": 1e6}[m[2]]
	}
	if strings.Contains(s, "unable to connect") {
		return w, fmt.Errorf("wrk could not connect: %q", s)
	}
	return w, nil
}
