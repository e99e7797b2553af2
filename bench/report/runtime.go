package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sluice.dev/sluice/bench/internal/goruntime"
	"sluice.dev/sluice/bench/internal/result"
)

// RuntimeRow is the Go runtime's account of one open-loop run of sluice
// (phase 2 at the common rate or a share of its own max, or a phase 6
// share): what its tail could
// come from.
type RuntimeRow struct {
	Run   string          `json:"run"` // "common rate" or "NN% of max"
	Round int             `json:"round"`
	Rate  int             `json:"rate"`
	P99Us float64         `json:"p99_us"` // the run's p99, not minus direct
	Sent  int64           `json:"sent"`
	Stats goruntime.Stats `json:"stats"`
	// CPUSeconds is the proxy's CPU during the run (phase 2 only).
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
}

// summarizeRuntime collects the runs that carry runtime statistics, the
// common-rate ones first, then by share and round.
func summarizeRuntime(recs []result.Record) []RuntimeRow {
	var out []RuntimeRow
	for _, r := range recs {
		if r.Runtime == nil || r.Error != "" {
			continue
		}
		row := RuntimeRow{Run: "common rate", Round: r.Round, Rate: r.Rate, P99Us: r.P99Us, Sent: r.Sent, Stats: *r.Runtime, CPUSeconds: r.CPUSeconds}
		if _, err := strconv.Atoi(r.Variant); err == nil {
			row.Run = r.Variant + "% of max"
		}
		out = append(out, row)
	}
	share := func(r RuntimeRow) int {
		n, _ := strconv.Atoi(strings.TrimSuffix(r.Run, "% of max"))
		return n // 0 for the common rate
	}
	sort.SliceStable(out, func(i, j int) bool {
		if a, b := share(out[i]), share(out[j]); a != b {
			return a < b
		}
		return out[i].Round < out[j].Round
	})
	return out
}

// runtimeTable renders where sluice's time went during the open-loop runs.
func runtimeTable(b *strings.Builder, rows []RuntimeRow) {
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n## Where sluice's tail comes from (Go runtime during each open-loop run)\n\n")
	b.WriteString("Read from sluice's /metrics before and after each run (runtime/metrics; histogram figures are bucket upper bounds). " +
		"Scheduling latency is how long a runnable goroutine waited for the one thread (GOMAXPROCS=1); GC pauses are stop-the-world pauses.\n\n")
	b.WriteString("| run | round | rate req/s | p99 | GC cycles | GC CPU | of it assist | GC pause p99 / max | sched wait p50 / p99 / max | goroutines started per request |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		st := r.Stats
		gcCPU := fmt.Sprintf("%.0f ms", st.GCCPUSeconds*1000)
		if r.CPUSeconds > 0 {
			gcCPU += fmt.Sprintf(" (%.1f%% of CPU)", 100*st.GCCPUSeconds/r.CPUSeconds)
		}
		perReq := "—"
		if r.Sent > 0 {
			perReq = fmt.Sprintf("%.3f", float64(st.GoroutinesCreated)/float64(r.Sent))
		}
		p99 := r.P99Us
		fmt.Fprintf(b, "| %s | %d | %d | %s | %d | %s | %.0f ms | %s / %s | %s / %s / %s | %s |\n",
			r.Run, r.Round, r.Rate, micros(&p99), st.GCCycles, gcCPU, st.AssistCPUSeconds*1000,
			usBound(st.GCPauseP99Us), usBound(st.GCPauseMaxUs),
			usBound(st.SchedLatencyP50Us), usBound(st.SchedLatencyP99Us), usBound(st.SchedLatencyMaxUs), perReq)
	}
}

// usBound prints a histogram bucket bound given in µs.
func usBound(us float64) string {
	switch {
	case us == 0:
		return "—"
	case us >= 1000:
		return fmt.Sprintf("≤%.1f ms", us/1000)
	}
	return fmt.Sprintf("≤%.0f µs", us)
}
