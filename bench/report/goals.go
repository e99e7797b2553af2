package main

import (
	"fmt"
	"strings"
)

// Goal is one of issue 29's goals against this run's figures.
type Goal struct {
	What  string `json:"what"`
	Goal  string `json:"goal"`
	Value string `json:"value"`
	// State is "met", "missed", "not measured" or "inconclusive" (a
	// proxy was saturated at that load).
	State string `json:"state"`
}

// goals checks the run against the goals of issue 29.
func goals(s *Summary) []Goal {
	var out []Goal
	ratioGoal := func(what, goal string, v *float64, limit float64, unit string) {
		g := Goal{What: what, Goal: goal, Value: "—", State: "not measured"}
		if v != nil {
			g.Value = fmt.Sprintf("%.2f× %s", *v, unit)
			g.State = metOrMissed(*v <= limit)
		}
		out = append(out, g)
	}
	var sl *Proxy
	for _, p := range s.Proxies {
		if p.Name == "sluice" {
			sl = p
		}
	}
	var h1 *float64
	if sl != nil {
		h1 = sl.RatioHAProxy
	}
	ratioGoal("HTTP/1.1 keep-alive, CPU µs per request", "≤ 1.0× HAProxy", h1, 1.0, "HAProxy")
	var h2 *float64
	for _, row := range s.Rows {
		if row.Variant != "h2" {
			continue
		}
		for _, p := range row.Proxies {
			if p.Name == "sluice" {
				h2 = p.RatioNginx
			}
		}
	}
	ratioGoal("HTTP/2 over TLS (h2load 4 × 16), CPU µs per request", "≤ 1.2× nginx", h2, 1.2, "nginx")

	n := "10000"
	if s.ControlTLS.Ingresses > 0 {
		n = fmt.Sprint(s.ControlTLS.Ingresses)
	}
	live := Goal{What: "change → live, " + n + " Ingresses each with its own certificate",
		Goal: "≤ 500 ms in 9 of 10 changes", Value: "—", State: "not measured"}
	if all := s.ControlTLS.ChangeToLiveAll; len(all) > 0 {
		fast := 0
		for _, v := range all {
			if v <= 500 {
				fast++
			}
		}
		live.Value = fmt.Sprintf("%d of %d", fast, len(all))
		live.State = metOrMissed(fast*10 >= len(all)*9)
	}
	out = append(out, live)

	for _, load := range []string{"25", "common"} {
		var v *float64
		st, ht := tailAt(s.Tail, load, "sluice"), tailAt(s.Tail, load, "haproxy")
		if st != nil {
			v = st.P99RatioHAProxy
		}
		what := "p99 added over the direct path at 25% of each proxy's own max req/s"
		if load == "common" {
			what = "p99 added over the direct path at the common rate (25% of the slowest proxy's max req/s)"
		}
		ratioGoal(what, "≤ 2× HAProxy's", v, 2.0, "HAProxy's")
		// A proxy that left requests unsent was saturated: its tail is a
		// queue, and the comparison says nothing.
		if v != nil && (st.Unsent > 0 || ht != nil && ht.Unsent > 0) {
			g := &out[len(out)-1]
			g.Value += " (requests left unsent: saturated)"
			g.State = "inconclusive"
		}
	}
	return out
}

func metOrMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// goalsTable renders the goals.
func goalsTable(b *strings.Builder, gs []Goal) {
	if len(gs) == 0 {
		return
	}
	b.WriteString("\n## Goals (issue 29)\n\n| measure | goal | this run | |\n| --- | --- | ---: | --- |\n")
	for _, g := range gs {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", g.What, g.Goal, g.Value, g.State)
	}
}
