package main

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"sluice.dev/sluice/bench/internal/result"
)

func TestRetagScale(t *testing.T) {
	in := `{"phase":"translate","proxy":"sluice","ingresses":1000,"routes":2001,"build_ms":5,"failed":0}
not json
{"phase":"control","proxy":"sluice","round":1,"ingresses":1000,"startup_ms":300,"process_rss_kib":40960,"failed":0}
`
	var out bytes.Buffer
	if err := retagScale(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	recs, err := result.Read(&out)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Phase != result.PhaseScale || recs[0].Variant != result.PhaseTranslate ||
		recs[1].Variant != result.PhaseControl || recs[1].ProcessRSSKiB != 40960 {
		t.Fatalf("retagged = %+v", recs)
	}
}

func TestScaleAndCostTables(t *testing.T) {
	recs := []result.Record{
		// Phase 3 at 10k: the 10k scale row.
		{Phase: result.PhaseTranslate, Proxy: "sluice", Ingresses: 10000, Routes: 20001, BuildMs: 50, HeapPerRouteB: 280},
		{Phase: result.PhaseControl, Proxy: "sluice", Round: 1, Ingresses: 10000, StartupMs: 1700, BuildMs: 60, ProcessRSSKiB: 10 * 10240, ChangeToLiveMs: 400},
		// With certificates: not a scale row.
		{Phase: result.PhaseControl, Proxy: "sluice", Variant: "tls", Round: 1, Ingresses: 10000, ProcessRSSKiB: 1},
		{Phase: result.PhaseScale, Variant: result.PhaseTranslate, Proxy: "sluice", Ingresses: 1000, Routes: 2001, BuildMs: 4},
		{Phase: result.PhaseScale, Variant: result.PhaseControl, Proxy: "sluice", Round: 1, Ingresses: 1000, StartupMs: 200, ProcessRSSKiB: 20480, ChangeToLiveMs: 300},
		{Phase: result.PhaseScale, Variant: result.PhaseTranslate, Proxy: "sluice", Ingresses: 50000, Error: "out of memory"},
		{Phase: result.PhaseCost, Variant: result.VariantDNSPlan, Proxy: "sluice", DNSRecords: 10000, SyncMs: 90, SyncCPUMs: 80, SteadyMs: 120, SteadyCPUMs: 100, HeapKiB: 6144, ProcessRSSKiB: 51200},
		{Phase: result.PhaseCost, Variant: result.VariantController, Proxy: "sluice", Pods: 1000, Bindings: 50, SteadyCPUMs: 300, HeapKiB: 7168, StateHeapKiB: 2048},
		{Phase: result.PhaseCost, Variant: result.VariantController, Proxy: "sluice", Pods: 5000, Bindings: 50, SteadyCPUMs: 1500, HeapKiB: 20480, StateHeapKiB: 7168},
	}
	s := summarize(recs)
	if len(s.Scale) != 2 || s.Scale[0].Ingresses != 1000 || s.Scale[1].Ingresses != 10000 {
		t.Fatalf("scale = %+v", s.Scale)
	}
	g := growth(s.Scale[1].RSSKiB, s.Scale[0].RSSKiB, 10000, 1000)
	if g == nil || math.Abs(*g-0.5) > 1e-9 {
		t.Errorf("RSS growth 1k → 10k = %v, want 0.5 (5× the RSS for 10× the Ingresses)", g)
	}
	if len(s.Cost) != 3 || s.Cost[0].Variant != result.VariantDNSPlan || s.Cost[2].Size != 5000 {
		t.Fatalf("cost = %+v", s.Cost)
	}
	for _, p := range s.Proxies {
		if p.Name == "sluice" && (p.Rounds != 0 || p.Failed != 0) {
			t.Errorf("cost records counted in the sluice row: %+v", p)
		}
	}
	md := markdown(s)
	for _, want := range []string{
		"| 1000 | 2001 | 4 ms | 4.0 | 1.00× | 20 MiB | — | 1.00× | 200 ms | — | 300 ms |",
		"| 10000 | 20001 | 50 ms | 5.0 | 1.25× | 100 MiB | 9.1 | 0.50× | 1700 ms | 60 ms | 400 ms |",
		"| DNS plan (Desired + MakePlan, one zone) | 10000 records | 90 ms / 80 ms | 120 ms / 100 ms | 10.0 µs | 1.00× | 6.0 MiB | — | 50.0 MiB |",
		"| binding reconciler, 50 bindings | 5000 pods | 0 ms / 0 ms | 0 ms / 1500 ms | 300.0 µs | 1.00× | 20.0 MiB | 7.0 MiB |",
		"50000 Ingresses, translate: out of memory",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("latest.md lacks %q:\n%s", want, md)
		}
	}
}
