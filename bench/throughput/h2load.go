package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var (
	reH2Finished = regexp.MustCompile(`(?m)^finished in [0-9.]+m?s, ([0-9.]+) req/s`)
	reH2Requests = regexp.MustCompile(`(?m)^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	reH2Status   = regexp.MustCompile(`(?m)^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
)

// parseH2load reads h2load's summary (nghttp2 1.52): requests done, req/s,
// failures, and responses that were not 2xx.
func parseH2load(s string) (wrkResult, error) {
	var w wrkResult
	m := reH2Requests.FindStringSubmatch(s)
	if m == nil {
		return w, fmt.Errorf("parsing h2load output: no request count in %q", s)
	}
	n := make([]int64, len(m))
	for i, v := range m[1:] {
		n[i+1], _ = strconv.ParseInt(v, 10, 64)
	}
	w.requests = n[3] // done
	w.socketErrors = n[5] + n[6] + n[7]
	if m := reH2Finished.FindStringSubmatch(s); m != nil {
		w.rps, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := reH2Status.FindStringSubmatch(s); m != nil {
		for _, v := range m[2:] {
			x, _ := strconv.ParseInt(v, 10, 64)
			w.non2xx += x
		}
	}
	if w.requests == 0 {
		return w, fmt.Errorf("h2load completed no request: %q", s)
	}
	return w, nil
}

// h2loadP99 returns the 99th percentile of the request times in h2load's
// --log-file: tab-separated start (µs since the epoch), status, and µs until
// the end of the response.
func h2loadP99(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("opening h2load log: %w", err)
	}
	defer f.Close()
	var us []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) < 3 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[2], 64); err == nil {
			us = append(us, v)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading h2load log: %w", err)
	}
	if len(us) == 0 {
		return 0, fmt.Errorf("h2load log %s has no requests", path)
	}
	sort.Float64s(us)
	return us[int(math.Ceil(0.99*float64(len(us))))-1], nil
}
