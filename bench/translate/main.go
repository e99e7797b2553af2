// Command translate measures sluice's control plane in-process: the time to
// translate N Ingresses (default 10,000, two paths each ≈ 20,000 routes) into
// a compiled routing table (translate.Build + route.New), and the heap the
// table retains per route. It prints one result.Record.
//
// Data flow: corpus → translate.Build → route.New (here, timed) → JSON line →
// raw.jsonl → report.
//
// With --tls every Ingress has its own certificate (ECDSA P-256) in its own
// Secret; the record's Variant is "tls". Generating the certificates is not
// timed.
//
//	translate --ingresses 10000 --runs 5 [--tls]
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"time"

	"sluice.dev/sluice/bench/internal/corpus"
	"sluice.dev/sluice/bench/internal/result"
	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/internal/translate"
)

func main() {
	n := flag.Int("ingresses", 10000, "generated Ingresses (two routes each)")
	runs := flag.Int("runs", 5, "timed builds; the median is reported")
	withTLS := flag.Bool("tls", false, "give every Ingress its own certificate and Secret")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the timed rebuilds to this file")
	flag.BoolVar(&noCache, "no-cache", false, "parse every certificate on every build (translate.Build without a KeyPairCache), for comparison")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		profile = f
	}
	rec := result.Record{Phase: result.PhaseTranslate, Proxy: "sluice", Ingresses: *n}
	if *withTLS {
		rec.Variant = "tls"
	}
	if err := measure(&rec, *n, *runs, *withTLS); err != nil {
		rec.Error = err.Error()
	}
	result.Print(rec)
}

// profile receives the CPU profile of the timed builds; nil for none.
var profile *os.File

// noCache builds without a KeyPairCache.
var noCache bool

func measure(rec *result.Record, n, runs int, withTLS bool) error {
	if runs < 1 {
		return fmt.Errorf("--runs must be at least 1, not %d", runs)
	}
	o := corpus.Options{Ingresses: n, BackendPort: 8080}
	if withTLS {
		ca, err := corpus.NewCA()
		if err != nil {
			return err
		}
		o.TLS = ca
	}
	heap0 := heapAfterGC()
	in, err := corpus.All(o)
	if err != nil {
		return err
	}
	heap1 := heapAfterGC()
	rec.InputHeapPerIng = float64(heap1-heap0) / float64(len(in.Ingresses))

	// Like the proxy's rebuild loop: parsed certificates are kept between
	// builds, so only the first build parses them (FirstBuildMs).
	cache := translate.NewKeyPairCache()
	if noCache {
		cache = nil
	}
	build := func() (*route.Table, []translate.Problem) {
		cfg, problems := translate.BuildCached(in, translate.Options{AllowLoopbackEndpoints: true}, cache)
		return route.New(cfg), problems
	}
	start := time.Now()
	t, problems := build() // warm-up, and the table whose heap is counted
	rec.FirstBuildMs = float64(time.Since(start)) / float64(time.Millisecond)
	if len(problems) > 0 {
		p := problems[0]
		return fmt.Errorf("translation reported %d problems, first: %s %s/%s %s: %s",
			len(problems), p.Kind, p.Namespace, p.Name, p.Reason, p.Message)
	}
	for _, vh := range t.Config().VirtualHosts {
		rec.Routes += len(vh.Routes)
	}
	if rec.Routes == 0 {
		return fmt.Errorf("translation of %d ingresses produced no routes", len(in.Ingresses))
	}
	heap2 := heapAfterGC()
	rec.HeapPerRouteB = float64(heap2-heap1) / float64(rec.Routes)
	runtime.KeepAlive(t)
	t = nil

	var times []float64
	if profile != nil {
		if err := pprof.StartCPUProfile(profile); err != nil {
			return fmt.Errorf("starting profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	for i := 0; i < runs; i++ {
		runtime.GC()
		start := time.Now()
		t, _ := build()
		times = append(times, float64(time.Since(start))/float64(time.Millisecond))
		runtime.KeepAlive(t)
	}
	sort.Float64s(times)
	rec.BuildMs, _ = result.Median(times)
	runtime.KeepAlive(in)
	return nil
}

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
