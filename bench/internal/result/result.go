// Package result is the record format shared by the benchmark tools under
// bench/. Each measuring tool (throughput, latency, idleconns, ctlplane,
// translate) prints one Record as a JSON line; scripts/bench.sh appends the
// lines to raw.jsonl; bench/report reads them back, takes medians and writes
// bench/results/latest.{md,json} and cpu.png.
//
// Data flow: measuring tool → Record (JSON line) → raw.jsonl → report.
package result

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sluice.dev/sluice/bench/internal/goruntime"
	"sort"
	"strconv"
	"strings"
)

// Phases a Record belongs to.
const (
	PhaseThroughput = "throughput" // wrk at fixed concurrency, CPU per request
	// PhaseLatency is an open-loop run at a fixed rate. Variant says which
	// rate: VariantCommon (or "", older records) is the rate every proxy
	// runs at; a number is a share in percent of the proxy's own max
	// req/s ("25", "50"). The direct runs (Proxy "direct") have no
	// variant: they are matched to a proxy's run by Round and Rate.
	PhaseLatency   = "latency"
	PhaseIdle      = "idle"      // RSS per idle keep-alive connection
	PhaseControl   = "control"   // sluice control plane end to end
	PhaseTranslate = "translate" // pure translation in-process
	// PhaseRow is one of the extra rows (TLS, HTTP/2, large bodies), named
	// by Variant: "https", "tls-new", "tls-resumed", "h2", "body-10k",
	// "body-1m".
	PhaseRow = "row"
	// PhaseSweep is an open-loop run at a share of the proxy's own max
	// req/s; Variant is the share in percent ("25", "50", "75", "90").
	PhaseSweep = "sweep"
	// PhaseCost is a control-plane cost at a size (bench/cost): Variant
	// VariantDNSPlan or VariantController.
	PhaseCost = "cost"
	// PhaseScale is a translate or control record (Variant says which)
	// at one of the sizes of the cost rows, retagged by `report --tag`.
	PhaseScale = "scale"
)

// Variants of PhaseCost.
const (
	VariantDNSPlan    = "dns-plan"
	VariantController = "controller"
)

// VariantCommon marks the open-loop run at the rate common to every proxy.
const VariantCommon = "common"

// HDRPercentiles are the percentiles of Record.HDRUs, for the
// latency-by-percentile (HDR-style) plot.
var HDRPercentiles = []float64{50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 100}

// Record is one measurement. Fields that do not apply to a phase are zero and
// omitted from JSON.
type Record struct {
	Phase string `json:"phase"`
	// Proxy is "sluice", "nginx", "haproxy" or "direct" (no proxy).
	Proxy string `json:"proxy,omitempty"`
	// Variant tells apart runs of one phase with different traffic or
	// objects: "" is the plain HTTP case; "tls" (control plane: every
	// Ingress with its own certificate).
	Variant string `json:"variant,omitempty"`
	Round   int    `json:"round,omitempty"`

	// Throughput (wrk).
	Requests     int64   `json:"requests,omitempty"`
	RPS          float64 `json:"rps,omitempty"`
	CPUSeconds   float64 `json:"cpu_seconds,omitempty"`    // proxy utime+stime during the run
	CPUMicrosReq float64 `json:"cpu_us_per_req,omitempty"` // CPUSeconds / Requests
	CPUUtil      float64 `json:"cpu_util,omitempty"`       // CPUSeconds / wall seconds (1 = one core)
	Non2xx       int64   `json:"non_2xx,omitempty"`
	SocketErrors int64   `json:"socket_errors,omitempty"`

	// Latency (open loop).
	Rate int   `json:"rate,omitempty"`
	Sent int64 `json:"sent,omitempty"`
	// Unsent counts scheduled requests the open-loop tool never sent because
	// every connection was still waiting for the target: overload, not an
	// error. They are not in Failed.
	Unsent int64   `json:"unsent,omitempty"`
	P50Us  float64 `json:"p50_us,omitempty"`
	P99Us  float64 `json:"p99_us,omitempty"`
	P90Us  float64 `json:"p90_us,omitempty"`
	P999Us float64 `json:"p999_us,omitempty"`
	// HDRUs is the latency at each of HDRPercentiles (open loop).
	HDRUs []float64 `json:"hdr_us,omitempty"`
	// BodyBytes is the response body size of the run (extra rows).
	BodyBytes int64 `json:"body_bytes,omitempty"`
	// Resumed counts TLS handshakes that resumed a session (tls-resumed).
	Resumed int64            `json:"resumed,omitempty"`
	MaxUs   float64          `json:"max_us,omitempty"`
	ByKind  map[string]int64 `json:"by_kind,omitempty"`
	Samples []string         `json:"errors,omitempty"`

	// Idle connections.
	Conns        int     `json:"conns,omitempty"`
	RSSBeforeKiB int64   `json:"rss_before_kib,omitempty"`
	RSSAfterKiB  int64   `json:"rss_after_kib,omitempty"`
	KiBPerConn   float64 `json:"kib_per_conn,omitempty"`
	// KiBPerConnMarginal is the VmRSS growth per connection from half of
	// the connections (settled) to all of them (idleconns --halves).
	KiBPerConnMarginal float64 `json:"kib_per_conn_marginal,omitempty"`
	// SettleSeconds: how long the reading waited for VmRSS to stop
	// falling; Goroutines, GoStackKiB, GoHeapKiB: the Go runtime's view
	// then (sluice only).
	SettleSeconds float64 `json:"settle_seconds,omitempty"`
	Goroutines    int64   `json:"goroutines,omitempty"`
	GoStackKiB    int64   `json:"go_stack_kib,omitempty"`
	GoHeapKiB     int64   `json:"go_heap_kib,omitempty"`

	// Failed counts requests that did not succeed (any phase).
	Failed int64 `json:"failed"`

	// Control plane.
	Ingresses       int     `json:"ingresses,omitempty"`
	Routes          int     `json:"routes,omitempty"`
	BuildMs         float64 `json:"build_ms,omitempty"`       // translate + compile, in-process (rebuild, as the loop does it)
	FirstBuildMs    float64 `json:"first_build_ms,omitempty"` // the first build of a process (nothing cached)
	HeapPerRouteB   float64 `json:"heap_per_route_bytes,omitempty"`
	InputHeapPerIng float64 `json:"input_heap_per_ingress_bytes,omitempty"`
	StartupMs       float64 `json:"startup_ms,omitempty"`        // process start → last route answers
	ChangeToLiveMs  float64 `json:"change_to_live_ms,omitempty"` // file write → new route answers
	// SourceToLiveMs is the proxy's part of ChangeToLiveMs: its source
	// reporting the change → the new table live (the mean of
	// sluice_table_change_to_live_seconds over the builds the change caused).
	SourceToLiveMs float64 `json:"source_to_live_ms,omitempty"`
	ProcessRSSKiB  int64   `json:"process_rss_kib,omitempty"`

	// Cost as work grows (bench/cost). SyncMs and SyncCPUMs: the first
	// sync (wall and process CPU); SteadyMs and SteadyCPUMs: a sync with
	// nothing to change (median); HeapKiB: the live heap after them;
	// StateHeapKiB: of it, what the measured component keeps beyond its
	// input objects; Changes: records planned or targets registered by
	// the first sync.
	Pods         int     `json:"pods,omitempty"`
	Bindings     int     `json:"bindings,omitempty"`
	DNSRecords   int     `json:"dns_records,omitempty"`
	SyncMs       float64 `json:"sync_ms,omitempty"`
	SyncCPUMs    float64 `json:"sync_cpu_ms,omitempty"`
	SteadyMs     float64 `json:"steady_ms,omitempty"`
	SteadyCPUMs  float64 `json:"steady_cpu_ms,omitempty"`
	HeapKiB      int64   `json:"heap_kib,omitempty"`
	StateHeapKiB int64   `json:"state_heap_kib,omitempty"`
	Changes      int     `json:"changes,omitempty"`

	// Runtime is the Go runtime's view of a fixed-rate run (sluice only,
	// from its /metrics): GC and scheduling latency during the run.
	Runtime *goruntime.Stats `json:"runtime,omitempty"`

	// Error is set when the measurement could not be taken.
	Error string `json:"error,omitempty"`
}

// Print writes r as one JSON line to stdout.
func Print(r Record) {
	b, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintf(os.Stderr, "encoding record: %v\n", err)
		os.Exit(1)
	}
	os.Stdout.Write(append(b, '\n'))
}

// Read decodes JSON lines; blank lines and lines that are not JSON objects
// are skipped (a tool that crashed leaves no valid line).
func Read(r io.Reader) ([]Record, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading records: %w", err)
	}
	var out []Record
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var rec Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, fmt.Errorf("decoding record %q: %w", line, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// Median returns the median of xs (mean of the middle two for an even
// count) and false for an empty slice.
func Median(xs []float64) (float64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

// ProcStatCPU returns utime+stime of a process in seconds, from
// /proc/PID/stat fields 14 and 15 (counted after the parenthesised command
// name, which may contain spaces). ticksPerSecond is the kernel's USER_HZ,
// 100 on Linux.
func ProcStatCPU(pid int, ticksPerSecond float64) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading stat of pid %d: %w", pid, err)
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parsing stat of pid %d: no command name", pid)
	}
	// After ")": field 3 (state) is at index 0, so field n is at n-3.
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("parsing stat of pid %d: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseFloat(f[14-3], 64)
	st, err2 := strconv.ParseFloat(f[15-3], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing stat of pid %d: utime %q stime %q", pid, f[11], f[12])
	}
	return (ut + st) / ticksPerSecond, nil
}

// RSSKiB returns VmRSS of a process in KiB from /proc/PID/status.
func RSSKiB(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading status of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			v = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmRSS %q of pid %d: %w", v, pid, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("reading status of pid %d: no VmRSS", pid)
}
