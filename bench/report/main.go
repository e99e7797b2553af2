// Command report turns the raw measurements of one `make bench` run into the
// published results: medians per proxy with ratios to HAProxy and nginx as a
// markdown table (latest.md), the same numbers plus every raw record as JSON
// (latest.json), and a bar chart of CPU per request (cpu.png).
//
// Data flow: measuring tools → raw.jsonl → report (here) → bench/results/.
//
//	report --raw raw.jsonl --out bench/results --meta "date=..." --meta "machine=..."
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"sluice.dev/sluice/bench/internal/result"
)

// proxies in table order; "direct" is the backend without a proxy.
var proxies = []string{"sluice", "haproxy", "nginx", "direct"}

type metaFlag []string

func (m *metaFlag) String() string     { return strings.Join(*m, ",") }
func (m *metaFlag) Set(s string) error { *m = append(*m, s); return nil }

func main() {
	raw := flag.String("raw", "raw.jsonl", "raw records, one JSON object a line")
	out := flag.String("out", "bench/results", "directory for latest.md, latest.json and cpu.png")
	printWhat := flag.String("print", "", "print one number and write nothing: \"max:PROXY\" (the proxy's median max req/s, from which bench.sh takes the open-loop rates) or \"sluice-ratio\" (sluice's CPU per request over HAProxy's); or \"quick\": the make bench-quick summary")
	var meta metaFlag
	flag.Var(&meta, "meta", "KEY=VALUE shown in the header (repeatable, kept in order)")
	asScale := flag.Bool("as-scale", false, "copy the records on stdin to stdout as scale records (the cost rows' sizes), their phase as variant, and write nothing else")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *asScale {
		if err := retagScale(os.Stdin, os.Stdout); err != nil {
			log.Error("report failed", "error", err)
			os.Exit(1)
		}
		return
	}
	if *printWhat != "" {
		if err := printOne(*raw, *printWhat); err != nil {
			log.Error("report failed", "error", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*raw, *out, meta); err != nil {
		log.Error("report failed", "error", err)
		os.Exit(1)
	}
}

func run(rawPath, out string, meta []string) error {
	f, err := os.Open(rawPath)
	if err != nil {
		return fmt.Errorf("opening raw records: %w", err)
	}
	recs, err := result.Read(f)
	f.Close()
	if err != nil {
		return err
	}
	s := summarize(recs)
	for _, kv := range meta {
		k, v, _ := strings.Cut(kv, "=")
		s.Meta = append(s.Meta, [2]string{k, v})
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}
	md := markdown(s)
	if err := os.WriteFile(filepath.Join(out, "latest.md"), []byte(md), 0o644); err != nil {
		return fmt.Errorf("writing latest.md: %w", err)
	}
	js, err := json.MarshalIndent(struct {
		*Summary
		Raw []result.Record `json:"raw"`
	}{s, recs}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding latest.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "latest.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing latest.json: %w", err)
	}
	if err := writeLatencyCharts(out, s); err != nil {
		return err
	}
	if len(s.Tail) > 0 {
		if err := writeTailChart(filepath.Join(out, "tail.png"), s.Tail); err != nil {
			return err
		}
	}
	if err := writeChart(filepath.Join(out, "cpu.png"), s); err != nil {
		return err
	}
	fmt.Print(md)
	return nil
}

// printOne prints the number scripts/bench.sh needs between phases.
func printOne(rawPath, what string) error {
	f, err := os.Open(rawPath)
	if err != nil {
		return fmt.Errorf("opening raw records: %w", err)
	}
	recs, err := result.Read(f)
	f.Close()
	if err != nil {
		return err
	}
	s := summarize(recs)
	byName := map[string]*Proxy{}
	for _, p := range s.Proxies {
		byName[p.Name] = p
	}
	switch what {
	case "sluice-ratio":
		r := byName["sluice"].RatioHAProxy
		if r == nil {
			fmt.Println(0)
			return nil
		}
		fmt.Printf("%.2f\n", *r)
	case "quick":
		return printQuick(byName, s.Tail)
	case "max:sluice", "max:haproxy", "max:nginx":
		p := byName[strings.TrimPrefix(what, "max:")]
		if p == nil || p.MaxRPS == nil {
			return fmt.Errorf("no max req/s of %s measured", strings.TrimPrefix(what, "max:"))
		}
		fmt.Println(int(*p.MaxRPS))
	default:
		return fmt.Errorf("--print %q: want max:PROXY, sluice-ratio or quick", what)
	}
	return nil
}

// Proxy holds the medians of one proxy. Pointers are nil when not measured.
type Proxy struct {
	Name         string   `json:"name"`
	CPUMicrosReq *float64 `json:"cpu_us_per_req,omitempty"`
	RatioHAProxy *float64 `json:"cpu_ratio_vs_haproxy,omitempty"`
	RatioNginx   *float64 `json:"cpu_ratio_vs_nginx,omitempty"`
	CPUUtil      *float64 `json:"cpu_util_during_max,omitempty"`
	MaxRPS       *float64 `json:"max_rps,omitempty"`
	P50Us        *float64 `json:"p50_us,omitempty"`
	P99Us        *float64 `json:"p99_us,omitempty"`
	P50AddedUs   *float64 `json:"p50_added_us,omitempty"`
	P99AddedUs   *float64 `json:"p99_added_us,omitempty"`
	P90AddedUs   *float64 `json:"p90_added_us,omitempty"`
	P999AddedUs  *float64 `json:"p999_added_us,omitempty"`
	// HDRUs is the median over rounds of the latency at each of
	// result.HDRPercentiles (not minus the direct run).
	HDRUs      []float64 `json:"hdr_us,omitempty"`
	KiBPerConn *float64  `json:"kib_per_idle_conn,omitempty"`
	// KiBPerConnMarginal: VmRSS growth per connection of the second half
	// of the idle connections.
	KiBPerConnMarginal *float64 `json:"kib_per_idle_conn_marginal,omitempty"`
	// RateCPUMicrosReq is the CPU per request during the open-loop run at
	// the fixed rate (the same load for every proxy).
	RateCPUMicrosReq *float64 `json:"cpu_us_per_req_at_rate,omitempty"`
	// Unsent counts open-loop requests never sent because the proxy did not
	// keep up (overload, not errors); Overloaded is set when any round had
	// some or the proxy's max req/s is below the rate.
	Unsent        int64            `json:"latency_unsent"`
	Overloaded    bool             `json:"latency_overloaded"`
	Failed        int64            `json:"failed"`
	FailedByPhase map[string]int64 `json:"failed_by_phase"`
	Errors        []string         `json:"errors,omitempty"`
	Rounds        int              `json:"rounds"`
}

// Control holds the control-plane numbers.
type Control struct {
	Ingresses       int       `json:"ingresses,omitempty"`
	Routes          int       `json:"routes,omitempty"`
	BuildMs         *float64  `json:"build_ms_in_process,omitempty"`
	FirstBuildMs    *float64  `json:"first_build_ms_in_process,omitempty"`
	HeapPerRouteB   *float64  `json:"heap_per_route_bytes,omitempty"`
	StartupMs       *float64  `json:"startup_ms,omitempty"`
	BinaryBuildMs   *float64  `json:"build_ms_in_binary,omitempty"`
	ChangeToLiveMs  *float64  `json:"change_to_live_ms,omitempty"`
	ChangeToLiveAll []float64 `json:"change_to_live_ms_all,omitempty"`
	SourceToLiveMs  *float64  `json:"source_to_live_ms,omitempty"`
	RSSKiB          *float64  `json:"rss_kib,omitempty"`
	Errors          []string  `json:"errors,omitempty"`
}

// Summary is everything latest.md and latest.json show.
type Summary struct {
	Meta      [][2]string `json:"meta"`
	Rate      int         `json:"latency_rate"`
	IdleConns int         `json:"idle_conns"`
	Proxies   []*Proxy    `json:"proxies"`
	Control   Control     `json:"control"`
	// ControlTLS is the control plane with every Ingress having its own
	// certificate (records with Variant "tls").
	ControlTLS Control `json:"control_tls"`
	// Rows are the TLS, HTTP/2 and large-body rows.
	Rows      []Row    `json:"rows,omitempty"`
	RowErrors []string `json:"row_errors,omitempty"`
	// Sweep is p99 at shares of each proxy's own max req/s.
	Sweep []SweepPoint `json:"sweep,omitempty"`
	// Runtime is sluice's Go runtime account of its open-loop runs.
	Runtime []RuntimeRow `json:"runtime,omitempty"`
	// Tail is the latency added over the direct path at the common rate
	// and at shares of each proxy's own max req/s.
	Tail []TailLoad `json:"tail,omitempty"`
	// Scale is the proxy's cost at each number of Ingresses; Cost the DNS
	// planner's and the binding reconciler's at each size.
	Scale []ScaleRow `json:"scale,omitempty"`
	Cost  []CostRow  `json:"cost,omitempty"`
	// Goals are issue 29's goals against this run's figures.
	Goals []Goal `json:"goals,omitempty"`
}

// controlSeries collects one control-plane variant's records.
type controlSeries struct{ build, first, heap, startup, binBuild, change, sourceLive, rss []float64 }

func (cs *controlSeries) add(c *Control, r result.Record) {
	if r.Error != "" {
		c.Errors = append(c.Errors, r.Phase+": "+r.Error)
		return
	}
	if r.Ingresses > 0 {
		c.Ingresses = r.Ingresses
	}
	if r.Routes > 0 {
		c.Routes = r.Routes
	}
	if r.Phase == result.PhaseTranslate {
		cs.build = append(cs.build, r.BuildMs)
		if r.FirstBuildMs > 0 {
			cs.first = append(cs.first, r.FirstBuildMs)
		}
		cs.heap = append(cs.heap, r.HeapPerRouteB)
		return
	}
	cs.startup = append(cs.startup, r.StartupMs)
	if r.BuildMs > 0 {
		cs.binBuild = append(cs.binBuild, r.BuildMs)
	}
	cs.change = append(cs.change, r.ChangeToLiveMs)
	if r.SourceToLiveMs > 0 {
		cs.sourceLive = append(cs.sourceLive, r.SourceToLiveMs)
	}
	cs.rss = append(cs.rss, float64(r.ProcessRSSKiB))
	c.Errors = append(c.Errors, r.Samples...)
}

func (cs *controlSeries) fill(c *Control) {
	c.BuildMs, c.FirstBuildMs, c.HeapPerRouteB = median(cs.build), median(cs.first), median(cs.heap)
	c.StartupMs, c.BinaryBuildMs, c.ChangeToLiveMs, c.RSSKiB = median(cs.startup), median(cs.binBuild), median(cs.change), median(cs.rss)
	c.ChangeToLiveAll = cs.change
	c.SourceToLiveMs = median(cs.sourceLive)
}

func median(xs []float64) *float64 {
	m, ok := result.Median(xs)
	if !ok {
		return nil
	}
	return &m
}

func summarize(recs []result.Record) *Summary {
	s := &Summary{}
	by := map[string]*Proxy{}
	for _, name := range proxies {
		p := &Proxy{Name: name, FailedByPhase: map[string]int64{}}
		by[name] = p
		s.Proxies = append(s.Proxies, p)
	}
	type series struct{ cpu, util, rps, p50, p99, kib, kibMarginal, rateCPU []float64 }
	ser := map[string]*series{}
	lat := map[string]map[int]result.Record{} // proxy → round → record
	rounds := map[string]map[int]bool{}
	var plain, withTLS controlSeries
	s.Rows, s.RowErrors = summarizeRows(recs)
	s.Sweep = summarizeSweep(recs)
	s.Runtime = summarizeRuntime(recs)
	s.Tail = summarizeTail(recs)
	var scaleErrs, costErrs []string
	s.Scale, scaleErrs = summarizeScale(recs)
	s.Cost, costErrs = summarizeCost(recs)
	s.RowErrors = append(s.RowErrors, append(scaleErrs, costErrs...)...)
	common := commonRate(recs)
	for _, r := range recs {
		switch r.Phase {
		case result.PhaseRow, result.PhaseSweep, result.PhaseScale, result.PhaseCost:
			continue // summarized on their own above
		}
		if r.Phase == result.PhaseControl || r.Phase == result.PhaseTranslate {
			if r.Variant == "tls" {
				withTLS.add(&s.ControlTLS, r)
			} else {
				plain.add(&s.Control, r)
			}
			continue
		}
		p, ok := by[r.Proxy]
		if !ok {
			continue
		}
		if rounds[r.Proxy] == nil {
			rounds[r.Proxy] = map[int]bool{}
			ser[r.Proxy] = &series{}
			lat[r.Proxy] = map[int]result.Record{}
		}
		rounds[r.Proxy][r.Round] = true
		se := ser[r.Proxy]
		if r.Error != "" {
			p.Errors = append(p.Errors, fmt.Sprintf("%s round %d: %s", r.Phase, r.Round, r.Error))
			p.FailedByPhase[r.Phase]++
			p.Failed++
			continue
		}
		if r.Failed > 0 {
			p.FailedByPhase[r.Phase] += r.Failed
			p.Failed += r.Failed
			for _, e := range r.Samples {
				p.Errors = append(p.Errors, fmt.Sprintf("%s round %d: %s", r.Phase, r.Round, e))
			}
		}
		switch r.Phase {
		case result.PhaseThroughput:
			se.rps = append(se.rps, r.RPS)
			if r.CPUMicrosReq > 0 {
				se.cpu = append(se.cpu, r.CPUMicrosReq)
				se.util = append(se.util, r.CPUUtil)
			}
		case result.PhaseLatency:
			// The main table's latency columns are the runs at the
			// common rate; the other loads are in s.Tail.
			if !atCommon(r, common) {
				break
			}
			if r.Proxy != "direct" || s.Rate == 0 {
				s.Rate = r.Rate
			}
			p.Unsent += r.Unsent
			if r.CPUMicrosReq > 0 {
				se.rateCPU = append(se.rateCPU, r.CPUMicrosReq)
			}
			se.p50 = append(se.p50, r.P50Us)
			se.p99 = append(se.p99, r.P99Us)
			lat[r.Proxy][r.Round] = r
		case result.PhaseIdle:
			s.IdleConns = max(s.IdleConns, r.Conns)
			se.kib = append(se.kib, r.KiBPerConn)
			if r.KiBPerConnMarginal != 0 {
				se.kibMarginal = append(se.kibMarginal, r.KiBPerConnMarginal)
			}
		}
	}
	for _, p := range s.Proxies {
		p.Rounds = len(rounds[p.Name])
		se := ser[p.Name]
		if se == nil {
			continue
		}
		p.CPUMicrosReq, p.CPUUtil, p.MaxRPS = median(se.cpu), median(se.util), median(se.rps)
		p.P50Us, p.P99Us, p.KiBPerConn = median(se.p50), median(se.p99), median(se.kib)
		p.RateCPUMicrosReq = median(se.rateCPU)
		p.KiBPerConnMarginal = median(se.kibMarginal)
		p.Overloaded = p.Unsent > 0 || (p.MaxRPS != nil && s.Rate > 0 && *p.MaxRPS < float64(s.Rate))
		// Added latency: the proxy's percentile minus the direct run's in
		// the same round, then the median over rounds.
		if p.Name != "direct" {
			var d50, d90, d99, d999 []float64
			for round, r := range lat[p.Name] {
				if d, ok := lat["direct"][round]; ok {
					d50 = append(d50, r.P50Us-d.P50Us)
					d99 = append(d99, r.P99Us-d.P99Us)
					if r.P90Us > 0 && d.P90Us > 0 {
						d90 = append(d90, r.P90Us-d.P90Us)
						d999 = append(d999, r.P999Us-d.P999Us)
					}
				}
			}
			p.P50AddedUs, p.P99AddedUs = median(d50), median(d99)
			p.P90AddedUs, p.P999AddedUs = median(d90), median(d999)
		}
		p.HDRUs = hdrMedian(lat[p.Name])
	}
	for _, p := range s.Proxies {
		if p.CPUMicrosReq == nil {
			continue
		}
		if h := by["haproxy"].CPUMicrosReq; h != nil && *h > 0 {
			v := *p.CPUMicrosReq / *h
			p.RatioHAProxy = &v
		}
		if n := by["nginx"].CPUMicrosReq; n != nil && *n > 0 {
			v := *p.CPUMicrosReq / *n
			p.RatioNginx = &v
		}
	}
	plain.fill(&s.Control)
	withTLS.fill(&s.ControlTLS)
	s.Goals = goals(s)
	return s
}

// printQuick prints make bench-quick's summary: sluice's CPU per request
// and added p99 over HAProxy's.
func printQuick(by map[string]*Proxy, tail []TailLoad) error {
	sl, hp := by["sluice"], by["haproxy"]
	if sl == nil || hp == nil || sl.CPUMicrosReq == nil || hp.CPUMicrosReq == nil || *hp.CPUMicrosReq <= 0 {
		return fmt.Errorf("bench-quick needs the throughput of sluice and HAProxy")
	}
	fmt.Printf("CPU µs/req     sluice %6.1f  HAProxy %6.1f  ratio %.2f×\n", *sl.CPUMicrosReq, *hp.CPUMicrosReq, *sl.CPUMicrosReq / *hp.CPUMicrosReq)
	if sl.P99AddedUs == nil || hp.P99AddedUs == nil {
		fmt.Println("p99 added      not measured")
		return nil
	}
	// The added p99 can be near zero or negative for a fast proxy: the
	// ratio is against at least 0.1 ms.
	ref := max(*hp.P99AddedUs, 100)
	rate := 0
	if t := tailAt(tail, "common", "sluice"); t != nil {
		rate = t.Rate
	}
	fmt.Printf("p99 added (ms) sluice %6.2f  HAProxy %6.2f  ratio %.2f×  (common rate %d req/s)\n", *sl.P99AddedUs/1000, *hp.P99AddedUs/1000, *sl.P99AddedUs/ref, rate)
	if st, ht := tailAt(tail, "25", "sluice"), tailAt(tail, "25", "haproxy"); st != nil && ht != nil && st.P99Us != nil && ht.P99Us != nil {
		fmt.Printf("p99 added (ms) sluice %6.2f  HAProxy %6.2f  ratio %.2f×  (25%% of own max: %d / %d req/s; goal ≤ 2×)\n",
			*st.P99Us/1000, *ht.P99Us/1000, *st.P99RatioHAProxy, st.Rate, ht.Rate)
	}
	if sl.Failed > 0 || hp.Failed > 0 {
		fmt.Printf("failed         sluice %d  HAProxy %d\n", sl.Failed, hp.Failed)
	}
	return nil
}
