// Command translate measures sluice's control plane in-process: the time to
// translate N Ingresses (default 10,000, two paths each ≈ 20,000 routes) into
// a compiled routing table (translate.Build + route.New), and the heap the
// table retains per route. It prints one result.Record.
//
// Data flow: corpus → translate.Build → route.New (here, timed) → JSON line →
// raw.jsonl → report.
//
//	translate --ingresses 10000 --runs 5
package main

import (
	"flag"
	"fmt"
	"runtime"
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
	flag.Parse()
	rec := result.Record{Phase: result.PhaseTranslate, Proxy: "sluice", Ingresses: *n}
	if err := measure(&rec, *n, *runs); err != nil {
		rec.Error = err.Error()
	}
	result.Print(rec)
}

func measure(rec *result.Record, n, runs int) error {
	if runs < 1 {
		return fmt.Errorf("--runs must be at least 1, not %d", runs)
	}
	o := corpus.Options{Ingresses: n, BackendPort: 8080}
	heap0 := heapAfterGC()
	in := corpus.All(o)
	heap1 := heapAfterGC()
	rec.InputHeapPerIng = float64(heap1-heap0) / float64(len(in.Ingresses))

	build := func() (*route.Table, []translate.Problem) {
		cfg, problems := translate.Build(in, translate.Options{})
		return route.New(cfg), problems
	}
	t, problems := build() // warm-up, and the table whose heap is counted
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
