// Command throughput runs wrk against one proxy (or the backend directly) and
// reads the proxy process's CPU time (utime+stime from /proc/PID/stat) before
// and after, so it reports both the requests per second wrk reached and the
// proxy's CPU microseconds per request. It prints one result.Record.
//
// Data flow: scripts/bench.sh → throughput → wrk → proxy → backend;
// throughput → JSON line → raw.jsonl → report.
//
//	throughput --proxy nginx --pid 1234 --round 1 -- wrk -t1 -c64 -d10s http://127.0.0.1:24082/
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
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
	flag.Parse()
	rec := result.Record{Phase: result.PhaseThroughput, Proxy: *proxy, Round: *round}
	if err := run(&rec, *pid, *hz, flag.Args()); err != nil {
		rec.Error = err.Error()
		rec.Failed = -1
	}
	result.Print(rec)
}

func run(rec *result.Record, pid int, hz float64, wrk []string) error {
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
	w, err := parseWrk(out.String())
	if err != nil {
		return err
	}
	rec.Requests, rec.RPS, rec.Non2xx, rec.SocketErrors = w.requests, w.rps, w.non2xx, w.socketErrors
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
}

var (
	reRequests = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	reRPS      = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	reNon2xx   = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s+(\d+)`)
	reSocket   = regexp.MustCompile(`(?m)^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
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
	if strings.Contains(s, "unable to connect") {
		return w, fmt.Errorf("wrk could not connect: %q", s)
	}
	return w, nil
}
