// Package goruntime reads a Go process's runtime metrics from its
// Prometheus endpoint before and after a benchmark run and says where the
// time of a tail went during it: garbage collection (cycles, CPU, assist,
// stop-the-world pauses) and scheduling latency (how long runnable
// goroutines waited for a thread). The bench's fixed-rate run records it
// for sluice; the histograms are the runtime's own (/sched/latencies,
// /sched/pauses/total/gc), so quantiles are bucket upper bounds.
package goruntime

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric names (client_golang's names for the runtime/metrics of
// sluice's Go collector, cmd/sluice).
const (
	nameSchedLatency = "go_sched_latencies_seconds"
	nameGCPauses     = "go_sched_pauses_total_gc_seconds"
	nameGCCycles     = "go_gc_cycles_total_gc_cycles_total"
	nameGCCPU        = "go_cpu_classes_gc_total_cpu_seconds_total"
	nameAssistCPU    = "go_cpu_classes_gc_mark_assist_cpu_seconds_total"
	nameGoroutines   = "go_sched_goroutines_created_goroutines_total"
)

// Snapshot is one reading of the metrics that matter here.
type Snapshot struct {
	Counters map[string]float64
	Hists    map[string]Hist
}

// Hist is a cumulative histogram: Counts[i] observations ≤ Bounds[i].
type Hist struct {
	Bounds []float64
	Counts []uint64
}

// Stats is what happened between two snapshots.
type Stats struct {
	GCCycles          int64   `json:"gc_cycles"`
	GCCPUSeconds      float64 `json:"gc_cpu_seconds"`
	AssistCPUSeconds  float64 `json:"gc_assist_cpu_seconds"`
	GCPauses          int64   `json:"gc_pauses"`
	GCPauseP99Us      float64 `json:"gc_pause_p99_us"`
	GCPauseMaxUs      float64 `json:"gc_pause_max_us"`
	SchedWaits        int64   `json:"sched_waits"`
	SchedLatencyP50Us float64 `json:"sched_latency_p50_us"`
	SchedLatencyP99Us float64 `json:"sched_latency_p99_us"`
	SchedLatencyMaxUs float64 `json:"sched_latency_max_us"`
	// GoroutinesCreated during the run.
	GoroutinesCreated int64 `json:"goroutines_created"`
}

// Scrape reads url (a Prometheus text endpoint on loopback).
func Scrape(url string) (Snapshot, error) {
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		return Snapshot{}, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return Snapshot{}, fmt.Errorf("scraping %s: %s", url, res.Status)
	}
	return Parse(res.Body)
}

// Parse reads a snapshot from the Prometheus text format.
func Parse(r io.Reader) (Snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Snapshot{}, fmt.Errorf("parsing metrics: %w", err)
	}
	s := Snapshot{Counters: map[string]float64{}, Hists: map[string]Hist{}}
	for name, f := range fams {
		if len(f.GetMetric()) != 1 {
			continue // the runtime's metrics have no labels
		}
		m := f.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			s.Counters[name] = m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			s.Hists[name] = histOf(m.GetHistogram())
		}
	}
	return s, nil
}

func histOf(h *dto.Histogram) Hist {
	var out Hist
	for _, b := range h.GetBucket() {
		out.Bounds = append(out.Bounds, b.GetUpperBound())
		out.Counts = append(out.Counts, b.GetCumulativeCount())
	}
	// The +Inf bucket is implicit in the text format: the sample count.
	if n := len(out.Bounds); n == 0 || !math.IsInf(out.Bounds[n-1], 1) {
		out.Bounds = append(out.Bounds, math.Inf(1))
		out.Counts = append(out.Counts, h.GetSampleCount())
	}
	return out
}

// Delta returns what happened from before to after (the same process).
func Delta(before, after Snapshot) Stats {
	c := func(name string) float64 { return after.Counters[name] - before.Counters[name] }
	st := Stats{
		GCCycles:          int64(math.Round(c(nameGCCycles))),
		GCCPUSeconds:      c(nameGCCPU),
		AssistCPUSeconds:  c(nameAssistCPU),
		GoroutinesCreated: int64(math.Round(c(nameGoroutines))),
	}
	if d, ok := sub(after.Hists[nameGCPauses], before.Hists[nameGCPauses]); ok {
		st.GCPauses = int64(d.total())
		st.GCPauseP99Us, st.GCPauseMaxUs = d.quantile(0.99)*1e6, d.quantile(1)*1e6
	}
	if d, ok := sub(after.Hists[nameSchedLatency], before.Hists[nameSchedLatency]); ok {
		st.SchedWaits = int64(d.total())
		st.SchedLatencyP50Us = d.quantile(0.50) * 1e6
		st.SchedLatencyP99Us = d.quantile(0.99) * 1e6
		st.SchedLatencyMaxUs = d.quantile(1) * 1e6
	}
	return st
}

// sub is a−b bucket by bucket; false when the two do not have the same
// buckets (or a is missing).
func sub(a, b Hist) (Hist, bool) {
	if len(a.Bounds) == 0 {
		return Hist{}, false
	}
	if len(b.Bounds) == 0 {
		return a, true
	}
	if len(a.Bounds) != len(b.Bounds) {
		return Hist{}, false
	}
	d := Hist{Bounds: a.Bounds, Counts: make([]uint64, len(a.Counts))}
	for i := range a.Counts {
		if a.Bounds[i] != b.Bounds[i] || a.Counts[i] < b.Counts[i] {
			return Hist{}, false
		}
		d.Counts[i] = a.Counts[i] - b.Counts[i]
	}
	return d, true
}

func (h Hist) total() uint64 {
	if len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// quantile returns the upper bound of the bucket holding quantile q (0 for
// an empty histogram). The last finite bound stands for +Inf.
func (h Hist) quantile(q float64) float64 {
	n := h.total()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	for i, c := range h.Counts {
		if c >= rank {
			if math.IsInf(h.Bounds[i], 1) && i > 0 {
				return h.Bounds[i-1]
			}
			return h.Bounds[i]
		}
	}
	return h.Bounds[len(h.Bounds)-1]
}
