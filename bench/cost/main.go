// Command cost measures how two of sluice's control-plane costs grow with
// the work, in-process, and prints one result.Record per measurement:
//
//   - dns: the DNS planner (dns.Desired + dns.MakePlan, what the DNS
//     controller runs per zone and sync) over N hosts: a first sync into
//     an empty zone (N names created) and a steady sync of a zone already
//     holding every record, signed (nothing to change).
//   - controller: the LoadBalancerBinding reconciler over P pods across B
//     bindings (P/B pods each, one HAProxy backend each, the fake provider
//     and controller-runtime's fake client standing in for the API cache):
//     the first sync (every target registered, then seen healthy) and a
//     steady pass (nothing to change), process CPU and wall time, the live
//     heap after them and the reconciler's own part of it.
//
// Data flow: generated objects → dns planner / binding reconciler (here,
// timed) → JSON line → raw.jsonl → report ("Cost as work grows").
//
//	cost dns --records 10000
//	cost controller --pods 5000 --bindings 50
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"sluice.dev/sluice/bench/internal/result"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cost dns|controller [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("cost "+os.Args[1], flag.ExitOnError)
	runs := fs.Int("runs", 5, "timed passes; the median is reported")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole measurement to this file")
	start := func() {
		if *cpuProfile == "" {
			return
		}
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "cost: starting the CPU profile:", err)
			os.Exit(1)
		}
	}
	defer pprof.StopCPUProfile()
	var rec result.Record
	var err error
	switch os.Args[1] {
	case "dns":
		n := fs.Int("records", 10000, "hosts, one A record (and its ownership TXT record) each")
		fs.Parse(os.Args[2:])
		start()
		rec = result.Record{Phase: result.PhaseCost, Variant: result.VariantDNSPlan, Proxy: "sluice", DNSRecords: *n}
		err = measureDNS(&rec, *n, *runs)
	case "controller":
		pods := fs.Int("pods", 1000, "ingress pods, spread evenly over the bindings")
		bindings := fs.Int("bindings", 50, "LoadBalancerBindings, one HAProxy backend each")
		fs.Parse(os.Args[2:])
		start()
		rec = result.Record{Phase: result.PhaseCost, Variant: result.VariantController, Proxy: "sluice", Pods: *pods, Bindings: *bindings}
		err = measureController(&rec, *pods, *bindings, *runs)
	default:
		fmt.Fprintf(os.Stderr, "cost: unknown measurement %q: want dns or controller\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		rec.Error = err.Error()
	}
	if rss, err := result.RSSKiB(os.Getpid()); err == nil {
		rec.ProcessRSSKiB = rss
	}
	result.Print(rec)
}

// clock reads wall and process CPU time together.
type clock struct {
	wall time.Time
	cpu  time.Duration
}

func now() clock {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return clock{wall: time.Now(), cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
}

// since returns the wall and CPU milliseconds from c to now.
func (c clock) since() (wallMs, cpuMs float64) {
	n := now()
	return ms(n.wall.Sub(c.wall)), ms(n.cpu - c.cpu)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// heapKiB returns the live heap after a full collection.
func heapKiB() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc) / 1024
}

// medianOf returns the median of xs (0 for none).
func medianOf(xs []float64) float64 {
	m, _ := result.Median(xs)
	return m
}
