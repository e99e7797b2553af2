package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"sluice.dev/sluice/bench/internal/result"
)

// settle waits at least o.Settle, then until the proxy's VmRSS has not
// fallen by more than o.SettleSlack KiB over o.SettleQuiet (at most
// o.SettleMax), and returns the last VmRSS. With o.Metrics (a Go proxy),
// the quiet period only counts from the first garbage collection after the
// connections were opened: freed goroutine stacks leave VmRSS only once
// the runtime returns their pages, which it paces by the heap goal a
// collection sets (and it collects at least every 2 minutes). Each sample
// goes to stderr.
func settle(o Options) (int64, error) {
	start := time.Now()
	gcs0 := -1.0
	if o.Metrics != "" {
		vals, err := scrape(o.Metrics)
		if err != nil {
			return 0, err
		}
		gcs0 = vals["go_gc_duration_seconds_count"]
	}
	time.Sleep(o.Settle)
	var samples []sample
	for {
		kib, err := result.RSSKiB(o.PID)
		if err != nil {
			return 0, err
		}
		now := time.Now()
		collected := gcs0 < 0
		gcs := 0.0
		if !collected {
			vals, err := scrape(o.Metrics)
			if err != nil {
				return 0, err
			}
			gcs = vals["go_gc_duration_seconds_count"]
			collected = gcs > gcs0
		}
		fmt.Fprintf(os.Stderr, "idleconns: %5.1fs VmRSS %d KiB collections %.0f\n", now.Sub(start).Seconds(), kib, gcs)
		if !collected {
			samples = samples[:0]
		}
		samples = append(samples, sample{now, kib})
		if collected && settled(samples, o.SettleQuiet, o.SettleSlack) {
			return kib, nil
		}
		if now.Sub(start) >= o.SettleMax {
			return kib, nil
		}
		time.Sleep(time.Second)
	}
}

// sample is one VmRSS reading.
type sample struct {
	at  time.Time
	kib int64
}

// settled reports whether the last of samples is at most slack KiB below
// the latest sample taken at least quiet before it.
func settled(samples []sample, quiet time.Duration, slack int64) bool {
	if len(samples) == 0 {
		return false
	}
	last := samples[len(samples)-1]
	for i := len(samples) - 1; i >= 0; i-- {
		if last.at.Sub(samples[i].at) >= quiet {
			return samples[i].kib-last.kib <= slack
		}
	}
	return false
}

// runtimeView reads the Go runtime's figures from the proxy's Prometheus
// endpoint into rec: go_goroutines, go_memstats_stack_inuse_bytes (the
// runtime/metrics /memory/classes/heap/stacks:bytes) and
// go_memstats_heap_inuse_bytes.
func runtimeView(rec *result.Record, url string) error {
	vals, err := scrape(url)
	if err != nil {
		return err
	}
	rec.Goroutines = int64(vals["go_goroutines"])
	rec.GoStackKiB = int64(vals["go_memstats_stack_inuse_bytes"] / 1024)
	rec.GoHeapKiB = int64(vals["go_memstats_heap_inuse_bytes"] / 1024)
	return nil
}

// scrape reads the unlabelled samples of a Prometheus text endpoint.
func scrape(url string) (map[string]float64, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, fmt.Errorf("reading runtime metrics: %w", err)
	}
	defer resp.Body.Close()
	vals := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			vals[name] = f
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading runtime metrics: %w", err)
	}
	return vals, nil
}
