package goruntime

import (
	"strings"
	"testing"
)

const before = `# TYPE go_gc_cycles_total_gc_cycles_total counter
go_gc_cycles_total_gc_cycles_total 10
# TYPE go_cpu_classes_gc_total_cpu_seconds_total counter
go_cpu_classes_gc_total_cpu_seconds_total 1.5
# TYPE go_cpu_classes_gc_mark_assist_cpu_seconds_total counter
go_cpu_classes_gc_mark_assist_cpu_seconds_total 0.25
# TYPE go_sched_goroutines_created_goroutines_total counter
go_sched_goroutines_created_goroutines_total 100
# TYPE go_sched_latencies_seconds histogram
go_sched_latencies_seconds_bucket{le="1e-06"} 50
go_sched_latencies_seconds_bucket{le="1e-05"} 90
go_sched_latencies_seconds_bucket{le="0.001"} 99
go_sched_latencies_seconds_bucket{le="+Inf"} 100
go_sched_latencies_seconds_sum 0.01
go_sched_latencies_seconds_count 100
# TYPE go_sched_pauses_total_gc_seconds histogram
go_sched_pauses_total_gc_seconds_bucket{le="1e-05"} 20
go_sched_pauses_total_gc_seconds_bucket{le="0.0001"} 20
go_sched_pauses_total_gc_seconds_bucket{le="+Inf"} 20
go_sched_pauses_total_gc_seconds_sum 0.0001
go_sched_pauses_total_gc_seconds_count 20
`

// after: 4 more cycles; 1000 more scheduling waits, 980 ≤ 1 µs, 10 more
// ≤ 10 µs, 10 more ≤ 1 ms; 8 more pauses, 7 ≤ 10 µs, 1 ≤ 100 µs.
const after = `# TYPE go_gc_cycles_total_gc_cycles_total counter
go_gc_cycles_total_gc_cycles_total 14
# TYPE go_cpu_classes_gc_total_cpu_seconds_total counter
go_cpu_classes_gc_total_cpu_seconds_total 2
# TYPE go_cpu_classes_gc_mark_assist_cpu_seconds_total counter
go_cpu_classes_gc_mark_assist_cpu_seconds_total 0.5
# TYPE go_sched_goroutines_created_goroutines_total counter
go_sched_goroutines_created_goroutines_total 164
# TYPE go_sched_latencies_seconds histogram
go_sched_latencies_seconds_bucket{le="1e-06"} 1030
go_sched_latencies_seconds_bucket{le="1e-05"} 1080
go_sched_latencies_seconds_bucket{le="0.001"} 1099
go_sched_latencies_seconds_bucket{le="+Inf"} 1100
go_sched_latencies_seconds_sum 0.02
go_sched_latencies_seconds_count 1100
# TYPE go_sched_pauses_total_gc_seconds histogram
go_sched_pauses_total_gc_seconds_bucket{le="1e-05"} 27
go_sched_pauses_total_gc_seconds_bucket{le="0.0001"} 28
go_sched_pauses_total_gc_seconds_bucket{le="+Inf"} 28
go_sched_pauses_total_gc_seconds_sum 0.0002
go_sched_pauses_total_gc_seconds_count 28
`

func TestDelta(t *testing.T) {
	b, err := Parse(strings.NewReader(before))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Parse(strings.NewReader(after))
	if err != nil {
		t.Fatal(err)
	}
	got := Delta(b, a)
	want := Stats{
		GCCycles: 4, GCCPUSeconds: 0.5, AssistCPUSeconds: 0.25,
		GCPauses: 8, GCPauseP99Us: 100, GCPauseMaxUs: 100,
		SchedWaits: 1000, SchedLatencyP50Us: 1, SchedLatencyP99Us: 10, SchedLatencyMaxUs: 1000,
		GoroutinesCreated: 64,
	}
	if got != want {
		t.Errorf("Delta:\n got %+v\nwant %+v", got, want)
	}
}

func TestDeltaMismatchedBuckets(t *testing.T) {
	a, _ := Parse(strings.NewReader(after))
	b := Snapshot{Hists: map[string]Hist{nameSchedLatency: {Bounds: []float64{1}, Counts: []uint64{1}}}}
	if got := Delta(b, a); got.SchedWaits != 0 || got.SchedLatencyP99Us != 0 {
		t.Errorf("mismatched buckets gave %+v, want no scheduling figures", got)
	}
}

func TestQuantileEmpty(t *testing.T) {
	if q := (Hist{}).quantile(0.99); q != 0 {
		t.Errorf("empty histogram quantile = %v, want 0", q)
	}
}
