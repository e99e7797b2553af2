package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"sluice.dev/sluice/bench/internal/result"
)

// ScaleRow is the proxy's cost at one number of Ingresses (medians).
type ScaleRow struct {
	Ingresses int `json:"ingresses"`
	Routes    int `json:"routes,omitempty"`
	// RebuildMs: translate + compile in-process, as the rebuild loop does
	// it (bench/translate); HeapPerRouteB: heap the table keeps per route.
	RebuildMs     *float64 `json:"rebuild_ms,omitempty"`
	HeapPerRouteB *float64 `json:"heap_per_route_bytes,omitempty"`
	// StartupMs, BinaryBuildMs, RSSKiB, ChangeToLiveMs: the binary on the
	// manifests (bench/ctlplane).
	StartupMs      *float64 `json:"startup_ms,omitempty"`
	BinaryBuildMs  *float64 `json:"build_ms_in_binary,omitempty"`
	RSSKiB         *float64 `json:"rss_kib,omitempty"`
	ChangeToLiveMs *float64 `json:"change_to_live_ms,omitempty"`
}

// CostRow is one bench/cost measurement (medians over its records).
type CostRow struct {
	Variant     string   `json:"variant"`
	Size        int      `json:"size"` // records or pods
	Bindings    int      `json:"bindings,omitempty"`
	SyncMs      *float64 `json:"sync_ms,omitempty"`
	SyncCPUMs   *float64 `json:"sync_cpu_ms,omitempty"`
	SteadyMs    *float64 `json:"steady_ms,omitempty"`
	SteadyCPUMs *float64 `json:"steady_cpu_ms,omitempty"`
	HeapKiB     *float64 `json:"heap_kib,omitempty"`
	StateKiB    *float64 `json:"state_heap_kib,omitempty"`
	RSSKiB      *float64 `json:"rss_kib,omitempty"`
}

// retagScale copies records from in to out as PhaseScale records, the
// original phase (translate, control) as their variant: the sizes of the
// cost rows stay apart from phase 3's control-plane table.
func retagScale(in io.Reader, out io.Writer) error {
	recs, err := result.Read(in)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	for _, r := range recs {
		r.Variant = r.Phase
		r.Phase = result.PhaseScale
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encoding record: %w", err)
		}
		w.Write(append(b, '\n'))
	}
	return w.Flush()
}

// summarizeScale takes the medians per number of Ingresses; phase 3's
// plain records fill the size they were taken at when no scale record has
// it (bench.sh does not run that size twice).
func summarizeScale(recs []result.Record) ([]ScaleRow, []string) {
	type series struct{ rebuild, heap, startup, build, rss, live []float64 }
	ser := map[int]*series{}
	routes := map[int]int{}
	var errs []string
	add := func(phase string, r result.Record) {
		if r.Error != "" {
			errs = append(errs, fmt.Sprintf("%d Ingresses, %s: %s", r.Ingresses, phase, r.Error))
			return
		}
		se := ser[r.Ingresses]
		if se == nil {
			se = &series{}
			ser[r.Ingresses] = se
		}
		if r.Routes > 0 {
			routes[r.Ingresses] = r.Routes
		}
		switch phase {
		case result.PhaseTranslate:
			se.rebuild = append(se.rebuild, r.BuildMs)
			se.heap = append(se.heap, r.HeapPerRouteB)
		case result.PhaseControl:
			se.startup = append(se.startup, r.StartupMs)
			if r.BuildMs > 0 {
				se.build = append(se.build, r.BuildMs)
			}
			se.rss = append(se.rss, float64(r.ProcessRSSKiB))
			if r.ChangeToLiveMs > 0 {
				se.live = append(se.live, r.ChangeToLiveMs)
			}
		}
	}
	scaled := map[int]bool{}
	for _, r := range recs {
		if r.Phase == result.PhaseScale {
			scaled[r.Ingresses] = true
			add(r.Variant, r)
		}
	}
	if len(scaled) == 0 {
		return nil, errs
	}
	for _, r := range recs {
		if (r.Phase == result.PhaseTranslate || r.Phase == result.PhaseControl) && r.Variant == "" && !scaled[r.Ingresses] && r.Ingresses > 0 {
			add(r.Phase, r)
		}
	}
	var out []ScaleRow
	for n, se := range ser {
		out = append(out, ScaleRow{Ingresses: n, Routes: routes[n], RebuildMs: median(se.rebuild), HeapPerRouteB: median(se.heap),
			StartupMs: median(se.startup), BinaryBuildMs: median(se.build), RSSKiB: median(se.rss), ChangeToLiveMs: median(se.live)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ingresses < out[j].Ingresses })
	return out, errs
}

// summarizeCost takes the medians of the bench/cost records per variant
// and size.
func summarizeCost(recs []result.Record) ([]CostRow, []string) {
	type key struct {
		variant        string
		size, bindings int
	}
	type series struct{ sync, syncCPU, steady, steadyCPU, heap, state, rss []float64 }
	ser := map[key]*series{}
	var errs []string
	for _, r := range recs {
		if r.Phase != result.PhaseCost {
			continue
		}
		k := key{r.Variant, r.DNSRecords + r.Pods, r.Bindings}
		if r.Error != "" {
			errs = append(errs, fmt.Sprintf("%s at %d: %s", r.Variant, k.size, r.Error))
			continue
		}
		se := ser[k]
		if se == nil {
			se = &series{}
			ser[k] = se
		}
		se.sync, se.syncCPU = append(se.sync, r.SyncMs), append(se.syncCPU, r.SyncCPUMs)
		se.steady, se.steadyCPU = append(se.steady, r.SteadyMs), append(se.steadyCPU, r.SteadyCPUMs)
		se.heap, se.rss = append(se.heap, float64(r.HeapKiB)), append(se.rss, float64(r.ProcessRSSKiB))
		if r.StateHeapKiB != 0 {
			se.state = append(se.state, float64(r.StateHeapKiB))
		}
	}
	var out []CostRow
	for k, se := range ser {
		out = append(out, CostRow{Variant: k.variant, Size: k.size, Bindings: k.bindings, SyncMs: median(se.sync), SyncCPUMs: median(se.syncCPU),
			SteadyMs: median(se.steady), SteadyCPUMs: median(se.steadyCPU), HeapKiB: median(se.heap), StateKiB: median(se.state), RSSKiB: median(se.rss)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Variant != out[j].Variant {
			return out[i].Variant > out[j].Variant // dns-plan before controller
		}
		return out[i].Size < out[j].Size
	})
	return out, errs
}

// perUnit returns v / n scaled by f (nil when v is).
func perUnit(v *float64, n int, f float64) *float64 {
	if v == nil || n <= 0 {
		return nil
	}
	x := *v / float64(n) * f
	return &x
}

// marginal is the cost per unit of the work added since the smallest
// size, (v − v0) / (n − n0): it leaves out what the process costs
// whatever the work (runtime, buffers, the GC's heap floor). Nil for the
// smallest size itself.
func marginal(v, v0 *float64, n, n0 int) *float64 {
	if v == nil || v0 == nil || n <= n0 {
		return nil
	}
	x := (*v - *v0) / float64(n-n0)
	return &x
}

// growth is how much more a cost is than at the smallest size, over how
// much more work there is: 1.00× is linear, below it sublinear.
func growth(v, v0 *float64, n, n0 int) *float64 {
	if v == nil || v0 == nil || *v0 <= 0 || n0 <= 0 {
		return nil
	}
	x := (*v / *v0) / (float64(n) / float64(n0))
	return &x
}

// costTables renders the cost-as-work-grows rows.
func costTables(b *strings.Builder, scale []ScaleRow, cost []CostRow) {
	if len(scale) == 0 && len(cost) == 0 {
		return
	}
	b.WriteString("\n## Cost as work grows\n\n")
	b.WriteString("sluice only (nginx and HAProxy have no control plane here). \"growth\" is the cost's increase over the smallest size divided by the work's: " +
		"1.00× grows linearly, below 1 sublinearly (fixed costs), above 1 faster than the work.\n")
	if len(scale) > 0 {
		b.WriteString("\n| Ingresses | routes | rebuild in-process | µs per Ingress | growth | proxy RSS | KiB per added Ingress | growth | start → serving | build in the binary | change → live |\n")
		b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		s0 := scale[0]
		for _, s := range scale {
			rss := s.RSSKiB
			var rssMiB *float64
			if rss != nil {
				v := *rss / 1024
				rssMiB = &v
			}
			fmt.Fprintf(b, "| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Ingresses, s.Routes,
				num(s.RebuildMs, "%.0f ms"), num(perUnit(s.RebuildMs, s.Ingresses, 1000), "%.1f"), num(growth(s.RebuildMs, s0.RebuildMs, s.Ingresses, s0.Ingresses), "%.2f×"),
				num(rssMiB, "%.0f MiB"), num(marginal(rss, s0.RSSKiB, s.Ingresses, s0.Ingresses), "%.1f"), num(growth(rss, s0.RSSKiB, s.Ingresses, s0.Ingresses), "%.2f×"),
				num(s.StartupMs, "%.0f ms"), num(s.BinaryBuildMs, "%.0f ms"), num(s.ChangeToLiveMs, "%.0f ms"))
		}
		b.WriteString("\n- rebuild in-process: translate + compile every Ingress (two routes each) as the proxy's rebuild loop does it (bench/translate, GOMAXPROCS=1, median of 3); " +
			"proxy RSS, start → serving, build in the binary and change → live: `sluice proxy --manifests` on the same Ingresses as files (bench/ctlplane, one change; the 10k row is phase 3's); " +
			"KiB per added Ingress: the RSS growth from the smallest size, per Ingress added.\n")
	}
	if len(cost) > 0 {
		b.WriteString("\n| measure | size | first sync (wall / CPU) | steady sync (wall / CPU) | steady CPU per unit | growth | live heap | of it, own state | process RSS |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		first := map[string]CostRow{}
		for _, c := range cost {
			if _, ok := first[c.Variant]; !ok {
				first[c.Variant] = c
			}
			what, unit := "DNS plan (Desired + MakePlan, one zone)", "records"
			if c.Variant == result.VariantController {
				what, unit = fmt.Sprintf("binding reconciler, %d bindings", c.Bindings), "pods"
			}
			kib := func(v *float64) string { return num(perUnit(v, 1024, 1), "%.1f MiB") }
			c0 := first[c.Variant]
			fmt.Fprintf(b, "| %s | %d %s | %s / %s | %s / %s | %s | %s | %s | %s | %s |\n", what, c.Size, unit,
				num(c.SyncMs, "%.0f ms"), num(c.SyncCPUMs, "%.0f ms"), num(c.SteadyMs, "%.0f ms"), num(c.SteadyCPUMs, "%.0f ms"),
				num(perUnit(c.SteadyCPUMs, c.Size, 1000), "%.1f µs"), num(growth(c.SteadyCPUMs, c0.SteadyCPUMs, c.Size, c0.Size), "%.2f×"),
				kib(c.HeapKiB), kib(c.StateKiB), kib(c.RSSKiB))
		}
		b.WriteString("\n- DNS plan (bench/cost dns): dns.Desired + dns.MakePlan over one zone, one A record and its signed ownership TXT record per host; " +
			"first sync: an empty zone (every name created), steady: the zone holding what the first sync planned (nothing to change); medians of 3.\n")
		b.WriteString("- binding reconciler (bench/cost controller): one pass reconciles every binding once; first sync: register every pod, the fake provider's health check, a second pass; " +
			"steady: a pass with nothing to change (median of 3). The pods are served as the informer cache serves them (label match, deep copy), bindings and nodes by controller-runtime's fake client, " +
			"the provider is the in-memory fake; own state: the live heap the reconciler (with the fake provider's targets) adds to its input objects. In-process, GOMAXPROCS=1.\n")
	}
}
