package main

import (
	"math"
	"strings"
	"testing"

	"sluice.dev/sluice/bench/internal/result"
)

// tailRecs: two rounds; HAProxy is the slowest proxy, so its 25% run is
// the common-rate run too (bench.sh runs it once); sluice runs at 25%,
// 50% and the common rate; the direct path runs at each rate.
func tailRecs() []result.Record {
	lat := func(proxy, variant string, round, rate int, p50, p99, p999 float64) result.Record {
		return result.Record{Phase: result.PhaseLatency, Proxy: proxy, Variant: variant, Round: round, Rate: rate,
			P50Us: p50, P90Us: p50, P99Us: p99, P999Us: p999}
	}
	var recs []result.Record
	for round := 1; round <= 2; round++ {
		extra := float64(round-1) * 100 // round 2 is slower by 100 µs everywhere
		recs = append(recs,
			lat("direct", "", round, 900, 100+extra, 300+extra, 600+extra),
			lat("direct", "", round, 1000, 110+extra, 320+extra, 650+extra),
			lat("direct", "", round, 2000, 120+extra, 400+extra, 900+extra),
			lat("haproxy", "25", round, 900, 130+extra, 500+extra, 1000+extra),
			lat("sluice", "25", round, 1000, 150+extra, 800+extra, 2650+extra),
			lat("sluice", "50", round, 2000, 170+extra, 1400+extra, 2900+extra),
			lat("sluice", result.VariantCommon, round, 900, 140+extra, 600+extra, 1600+extra),
		)
	}
	recs[len(recs)-1].Unsent = 7
	return recs
}

func TestSummarizeTail(t *testing.T) {
	loads := summarizeTail(tailRecs())
	if len(loads) != 3 || loads[0].Load != "common" || loads[1].Load != "25" || loads[2].Load != "50" {
		t.Fatalf("loads = %+v, want common, 25, 50", loads)
	}
	eq := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || math.Abs(*got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// The common rate: HAProxy's 25% run counts, against direct at 900.
	hc, sc := tailAt(loads, "common", "haproxy"), tailAt(loads, "common", "sluice")
	if hc == nil || sc == nil {
		t.Fatalf("common rate: haproxy %v sluice %v", hc, sc)
	}
	eq("haproxy common p99", hc.P99Us, 200)
	eq("sluice common p50", sc.P50Us, 40)
	eq("sluice common p99", sc.P99Us, 300)
	eq("sluice common p99.9", sc.P999Us, 1000)
	eq("sluice common p99 ÷ haproxy", sc.P99RatioHAProxy, 1.5)
	eq("sluice common p50 ÷ haproxy (floor 100 µs)", sc.P50RatioHAProxy, 0.4)
	if sc.Rate != 900 || sc.Unsent != 7 || sc.Rounds != 2 {
		t.Errorf("sluice common: rate %d unsent %d rounds %d, want 900 7 2", sc.Rate, sc.Unsent, sc.Rounds)
	}
	// 25% of the own max: each proxy against direct at its own rate.
	s25 := tailAt(loads, "25", "sluice")
	eq("sluice 25% p99", s25.P99Us, 480)
	eq("sluice 25% p99.9", s25.P999Us, 2000)
	eq("sluice 25% p99 ÷ haproxy", s25.P99RatioHAProxy, 2.4)
	eq("sluice 25% direct p99", s25.DirectUs, 370)
	if h50 := tailAt(loads, "50", "haproxy"); h50 != nil {
		t.Errorf("haproxy at 50%%: %+v, want none", h50)
	}
	eq("sluice 50% p99", tailAt(loads, "50", "sluice").P99Us, 1000)
}

func TestTailMainTableAndGoals(t *testing.T) {
	s := summarize(tailRecs())
	if s.Rate != 900 {
		t.Errorf("common rate = %d, want 900", s.Rate)
	}
	var sl *Proxy
	for _, p := range s.Proxies {
		if p.Name == "sluice" {
			sl = p
		}
	}
	// The main table's added p99 is the common-rate run's (median of 300
	// and 300), not the 25% or 50% runs'.
	if sl.P99AddedUs == nil || *sl.P99AddedUs != 300 {
		t.Errorf("sluice p99 added = %v, want 300", sl.P99AddedUs)
	}
	state := map[string]string{}
	for _, g := range s.Goals {
		state[g.What] = g.State + " " + g.Value
	}
	for what, want := range map[string]string{
		"p99 added over the direct path at 25% of each proxy's own max req/s":                      "missed 2.40× HAProxy's",
		"p99 added over the direct path at the common rate (25% of the slowest proxy's max req/s)": "inconclusive 1.50× HAProxy's (requests left unsent: saturated)",
		"HTTP/1.1 keep-alive, CPU µs per request":                                                  "not measured —",
		"HTTP/2 over TLS (h2load 4 × 16), CPU µs per request":                                      "not measured —",
	} {
		if state[what] != want {
			t.Errorf("goal %q = %q, want %q", what, state[what], want)
		}
	}
	md := markdown(s)
	for _, want := range []string{
		"| 25% of own max | sluice | 1000 | 40 µs | 480 µs | 2000 µs | 0.40× | 2.40× | 5.00× | — | 370 µs | 0 | 0 |",
		"| p99 added over the direct path at 25% of each proxy's own max req/s | ≤ 2× HAProxy's | 2.40× HAProxy's | missed |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("latest.md lacks %q:\n%s", want, md)
		}
	}
}

func TestTailGoalInconclusiveWhenSaturated(t *testing.T) {
	recs := tailRecs()
	for i := range recs {
		if recs[i].Proxy == "haproxy" {
			recs[i].Unsent = 3
		}
	}
	for _, g := range summarize(recs).Goals {
		if strings.HasPrefix(g.What, "p99 added") && g.State != "inconclusive" {
			t.Errorf("goal %q with HAProxy saturated: %s %s, want inconclusive", g.What, g.State, g.Value)
		}
	}
}

func TestChangeToLiveGoal(t *testing.T) {
	s := &Summary{ControlTLS: Control{Ingresses: 10000, ChangeToLiveAll: []float64{400, 450, 499, 500, 300, 200, 100, 480, 470, 501}}}
	for _, g := range goals(s) {
		if strings.HasPrefix(g.What, "change → live") && (g.State != "met" || g.Value != "9 of 10") {
			t.Errorf("9 of 10 under 500 ms: %+v", g)
		}
	}
	s.ControlTLS.ChangeToLiveAll = []float64{400, 600, 300}
	for _, g := range goals(s) {
		if strings.HasPrefix(g.What, "change → live") && (g.State != "missed" || g.Value != "2 of 3") {
			t.Errorf("2 of 3 under 500 ms: %+v", g)
		}
	}
}
