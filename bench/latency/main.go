// Command latency sends requests at a fixed rate (open loop, test/load) to a
// proxy or straight to the backend and reports p50, p99 and max latency,
// measured from each request's scheduled start, so a stalled proxy shows up
// as latency instead of a slower send rate. The report subtracts the direct
// run's percentiles to get the latency each proxy adds.
//
// Data flow: scripts/bench.sh → latency → load.Run → proxy → backend;
// latency → JSON line → raw.jsonl → report.
//
//	latency --proxy haproxy --round 1 --url http://127.0.0.1:24083/ --rate 10000 --duration 10s
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sluice.dev/sluice/bench/internal/result"
	"sluice.dev/sluice/test/load"
)

func main() {
	proxy := flag.String("proxy", "", "name of the proxy under test (sluice, nginx, haproxy, direct)")
	round := flag.Int("round", 0, "round number, recorded as is")
	url := flag.String("url", "", "target base URL (loopback)")
	host := flag.String("host", "bench.local", "Host header")
	rate := flag.Int("rate", 1000, "requests per second")
	duration := flag.Duration("duration", 10*time.Second, "how long to send")
	maxInFlight := flag.Int("max-in-flight", 1000, "concurrent requests before new ones are dropped (and counted as failed)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rec := result.Record{Phase: result.PhaseLatency, Proxy: *proxy, Round: *round, Rate: *rate}
	res, err := load.Run(ctx, load.Options{
		Target:            *url,
		Host:              *host,
		Rate:              *rate,
		Duration:          *duration,
		KeepAliveFraction: 1,
		MaxInFlight:       *maxInFlight,
		Timeout:           5 * time.Second,
	})
	if err != nil {
		rec.Error = err.Error()
	}
	rec.Sent, rec.Failed = res.Sent, res.Failed
	rec.ByKind, rec.Samples = res.ByKind, res.Errors
	rec.P50Us = float64(res.Latencies.P50) / float64(time.Microsecond)
	rec.P99Us = float64(res.Latencies.P99) / float64(time.Microsecond)
	rec.MaxUs = float64(res.Latencies.Max) / float64(time.Microsecond)
	result.Print(rec)
}
