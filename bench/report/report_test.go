package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/bench/internal/goruntime"
	"sluice.dev/sluice/bench/internal/result"
)

func TestSummarize(t *testing.T) {
	recs := []result.Record{
		{Phase: result.PhaseThroughput, Proxy: "haproxy", Round: 1, RPS: 100, CPUMicrosReq: 10},
		{Phase: result.PhaseThroughput, Proxy: "haproxy", Round: 2, RPS: 300, CPUMicrosReq: 30},
		{Phase: result.PhaseThroughput, Proxy: "haproxy", Round: 3, RPS: 200, CPUMicrosReq: 20},
		{Phase: result.PhaseThroughput, Proxy: "nginx", Round: 1, RPS: 100, CPUMicrosReq: 40},
		{Phase: result.PhaseThroughput, Proxy: "sluice", Round: 1, RPS: 100, CPUMicrosReq: 30, Failed: 2, Non2xx: 2},
		{Phase: result.PhaseLatency, Proxy: "direct", Round: 1, Rate: 50, P50Us: 100, P99Us: 1000, P90Us: 500, P999Us: 3000,
			HDRUs: []float64{100, 200, 500, 600, 1000, 1500, 3000, 3500, 4000, 5000}},
		{Phase: result.PhaseLatency, Proxy: "direct", Round: 2, Rate: 50, P50Us: 200, P99Us: 2000},
		{Phase: result.PhaseLatency, Proxy: "sluice", Round: 1, Rate: 50, P50Us: 150, P99Us: 1500, P90Us: 800, P999Us: 9000,
			HDRUs: []float64{150, 300, 800, 900, 1500, 2500, 9000, 9500, 9900, 10000}},
		{Phase: result.PhaseSweep, Variant: "25", Proxy: "sluice", Round: 1, Rate: 25, P99Us: 700},
		{Phase: result.PhaseSweep, Variant: "90", Proxy: "sluice", Round: 1, Rate: 90, P99Us: 4000},
		{Phase: result.PhaseSweep, Variant: "25", Proxy: "haproxy", Round: 1, Rate: 30, P99Us: 500},
		{Phase: result.PhaseLatency, Proxy: "sluice", Round: 2, Rate: 50, P50Us: 260, P99Us: 2700},
		{Phase: result.PhaseIdle, Proxy: "sluice", Round: 1, Conns: 9000, KiBPerConn: 4.5},
		{Phase: result.PhaseIdle, Proxy: "nginx", Round: 1, Error: "boom", Failed: 0},
		{Phase: result.PhaseTranslate, Proxy: "sluice", Ingresses: 10, Routes: 21, BuildMs: 3, HeapPerRouteB: 200},
		{Phase: result.PhaseControl, Proxy: "sluice", Round: 1, Ingresses: 10, StartupMs: 50, ChangeToLiveMs: 7},
		{Phase: result.PhaseTranslate, Proxy: "sluice", Variant: "tls", Ingresses: 10, Routes: 21, BuildMs: 9, FirstBuildMs: 90},
		{Phase: result.PhaseControl, Proxy: "sluice", Variant: "tls", Round: 1, Ingresses: 10, StartupMs: 500, ChangeToLiveMs: 70, SourceToLiveMs: 20},
	}
	s := summarize(recs)
	by := map[string]*Proxy{}
	for _, p := range s.Proxies {
		by[p.Name] = p
	}
	eq := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || math.Abs(*got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	eq("haproxy cpu", by["haproxy"].CPUMicrosReq, 20)
	eq("haproxy rps", by["haproxy"].MaxRPS, 200)
	eq("sluice ratio vs haproxy", by["sluice"].RatioHAProxy, 1.5)
	eq("sluice ratio vs nginx", by["sluice"].RatioNginx, 0.75)
	eq("sluice p50 added", by["sluice"].P50AddedUs, 55)  // median of 50 and 60
	eq("sluice p99 added", by["sluice"].P99AddedUs, 600) // median of 500 and 700
	eq("sluice idle", by["sluice"].KiBPerConn, 4.5)
	if by["sluice"].Failed != 2 || by["nginx"].Failed != 1 || by["haproxy"].Failed != 0 {
		t.Errorf("failed: sluice %d nginx %d haproxy %d, want 2 1 0", by["sluice"].Failed, by["nginx"].Failed, by["haproxy"].Failed)
	}
	if s.Rate != 50 || s.IdleConns != 9000 || s.Control.Routes != 21 {
		t.Errorf("rate %d idle %d routes %d", s.Rate, s.IdleConns, s.Control.Routes)
	}
	eq("change to live", s.Control.ChangeToLiveMs, 7)
	eq("sluice p90 added", by["sluice"].P90AddedUs, 300)
	eq("sluice p99.9 added", by["sluice"].P999AddedUs, 6000)
	if len(by["sluice"].HDRUs) != len(result.HDRPercentiles) || by["haproxy"].HDRUs != nil {
		t.Errorf("HDR: sluice %v, haproxy %v", by["sluice"].HDRUs, by["haproxy"].HDRUs)
	}
	if len(s.Sweep) != 3 || s.Sweep[0].Proxy != "sluice" || s.Sweep[0].SharePct != 25 || s.Sweep[1].P99Us != 4000 || s.Sweep[2].Proxy != "haproxy" {
		t.Errorf("sweep = %+v", s.Sweep)
	}
	if by["sluice"].Failed != 2 {
		t.Errorf("sweep records counted in the sluice row: failed %d", by["sluice"].Failed)
	}
	eq("TLS rebuild", s.ControlTLS.BuildMs, 9)
	eq("TLS first build", s.ControlTLS.FirstBuildMs, 90)
	eq("TLS change to live", s.ControlTLS.ChangeToLiveMs, 70)
	eq("TLS source to live", s.ControlTLS.SourceToLiveMs, 20)
	if s.Control.SourceToLiveMs != nil {
		t.Errorf("plain source to live = %v, want none (no record has it)", *s.Control.SourceToLiveMs)
	}
	if s.Control.FirstBuildMs != nil {
		t.Errorf("plain first build = %v, want none", *s.Control.FirstBuildMs)
	}

	dir := t.TempDir()
	raw := filepath.Join(dir, "raw.jsonl")
	f, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		b, _ := jsonLine(r)
		f.Write(b)
	}
	f.Close()
	if err := run(raw, dir, []string{"date=today", "machine=test"}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "latest.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"— today", "| sluice | 30.0 | 1.50× | 0.75× | 100 | 55 µs | 600 µs | 4.5 | 2 |", "nginx: idle round 1: boom"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("latest.md lacks %q:\n%s", want, md)
		}
	}
	for _, name := range []string{"latest.json", "cpu.png", "hdr.png", "sweep.png", "tail.png"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", name, err)
		}
	}
}

func jsonLine(r result.Record) ([]byte, error) {
	b, err := json.Marshal(r)
	return append(b, '\n'), err
}

func TestRuntimeTable(t *testing.T) {
	st := goruntime.Stats{GCCycles: 3, GCCPUSeconds: 0.05, AssistCPUSeconds: 0.01, GCPauses: 6, GCPauseP99Us: 64, GCPauseMaxUs: 128,
		SchedWaits: 1000, SchedLatencyP50Us: 1, SchedLatencyP99Us: 256, SchedLatencyMaxUs: 2048, GoroutinesCreated: 50}
	recs := []result.Record{
		{Phase: result.PhaseSweep, Variant: "90", Proxy: "sluice", Round: 1, Rate: 900, P99Us: 4000, Sent: 100, Runtime: &st},
		{Phase: result.PhaseLatency, Proxy: "sluice", Round: 2, Rate: 500, P99Us: 1500, Sent: 1000, CPUSeconds: 0.5, Runtime: &st},
		{Phase: result.PhaseLatency, Proxy: "haproxy", Round: 1, Rate: 500, P99Us: 900},
	}
	rows := summarizeRuntime(recs)
	if len(rows) != 2 || rows[0].Run != "common rate" || rows[1].Run != "90% of max" {
		t.Fatalf("rows = %+v, want the common-rate run, then the 90%% share", rows)
	}
	var b strings.Builder
	runtimeTable(&b, rows)
	for _, want := range []string{
		"| common rate | 2 | 500 | 1500 µs | 3 | 50 ms (10.0% of CPU) | 10 ms | ≤64 µs / ≤128 µs | ≤1 µs / ≤256 µs / ≤2.0 ms | 0.050 |",
		"| 90% of max | 1 | 900 | 4000 µs | 3 | 50 ms | 10 ms |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
