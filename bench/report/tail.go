package main

import (
	"fmt"
	"image"
	"strconv"
	"strings"

	"sluice.dev/sluice/bench/internal/result"
)

// tailFloorUs is the least added latency a ratio divides by: the added
// latency of a fast proxy can be near zero or negative (the direct run's
// load tool and backend share one core), and a ratio against that would
// say nothing.
const tailFloorUs = 100

// TailLoad is one load of the tail table: the open-loop runs at the
// common rate, or at a share of each proxy's own max req/s.
type TailLoad struct {
	// Load is "common" or a share in percent ("25", "50").
	Load    string      `json:"load"`
	Proxies []TailProxy `json:"proxies"`
}

// TailProxy is one proxy's latency added over the direct path at one
// load: its percentile minus the direct run's at the same rate in the same
// round, median over rounds. Nil when not measured.
type TailProxy struct {
	Name     string   `json:"name"`
	Rate     int      `json:"rate"`
	P50Us    *float64 `json:"p50_added_us,omitempty"`
	P99Us    *float64 `json:"p99_added_us,omitempty"`
	P999Us   *float64 `json:"p999_added_us,omitempty"`
	DirectUs *float64 `json:"direct_p99_us,omitempty"`
	// Ratio*HAProxy are this proxy's added percentiles over HAProxy's at
	// the same load (against at least tailFloorUs).
	P50RatioHAProxy  *float64 `json:"p50_ratio_vs_haproxy,omitempty"`
	P99RatioHAProxy  *float64 `json:"p99_ratio_vs_haproxy,omitempty"`
	P999RatioHAProxy *float64 `json:"p999_ratio_vs_haproxy,omitempty"`
	P99RatioNginx    *float64 `json:"p99_ratio_vs_nginx,omitempty"`
	Unsent           int64    `json:"unsent"`
	Failed           int64    `json:"failed"`
	Rounds           int      `json:"rounds"`
}

// commonRate is the rate of the common-rate runs: the rate of any proxy's
// record with VariantCommon (or no variant, as older runs wrote), else
// zero.
func commonRate(recs []result.Record) int {
	for _, r := range recs {
		if r.Phase == result.PhaseLatency && r.Proxy != "direct" && r.Error == "" &&
			(r.Variant == "" || r.Variant == result.VariantCommon) {
			return r.Rate
		}
	}
	return 0
}

// atCommon says whether an open-loop record counts as a run at the common
// rate: a run marked so, a direct run at that rate, or a share run whose
// rate happens to be it (the slowest proxy's share of its own max, which
// bench.sh runs only once).
func atCommon(r result.Record, common int) bool {
	switch {
	case r.Phase != result.PhaseLatency:
		return false
	case r.Variant == "" || r.Variant == result.VariantCommon:
		return r.Proxy != "direct" || common == 0 || r.Rate == common
	}
	return common > 0 && r.Rate == common
}

// summarizeTail takes the added percentiles at every load of the open-loop
// phase: the common rate first, then the shares of the own max in
// ascending order.
func summarizeTail(recs []result.Record) []TailLoad {
	common := commonRate(recs)
	type key struct {
		proxy string
		round int
		rate  int
	}
	direct := map[key]result.Record{}
	shares := map[int]bool{}
	for _, r := range recs {
		if r.Phase != result.PhaseLatency || r.Error != "" {
			continue
		}
		if r.Proxy == "direct" {
			direct[key{"direct", r.Round, r.Rate}] = r
			continue
		}
		if n, err := strconv.Atoi(r.Variant); err == nil {
			shares[n] = true
		}
	}
	loads := []string{}
	if common > 0 {
		loads = append(loads, result.VariantCommon)
	}
	for n := 1; n <= 100; n++ {
		if shares[n] {
			loads = append(loads, strconv.Itoa(n))
		}
	}
	var out []TailLoad
	for _, load := range loads {
		tl := TailLoad{Load: load}
		var by map[string]*TailProxy
		tl.Proxies, by = perProxy(func(name string) (TailProxy, bool) {
			if name == "direct" {
				return TailProxy{}, false
			}
			tp := TailProxy{Name: name}
			var d50, d99, d999, base, rates []float64
			for _, r := range recs {
				if r.Phase != result.PhaseLatency || r.Proxy != name {
					continue
				}
				if load == result.VariantCommon && !atCommon(r, common) || load != result.VariantCommon && r.Variant != load {
					continue
				}
				tp.Rounds++
				tp.Unsent += r.Unsent
				tp.Failed += r.Failed
				if r.Error != "" {
					tp.Failed++
					continue
				}
				rates = append(rates, float64(r.Rate))
				d, ok := direct[key{"direct", r.Round, r.Rate}]
				if !ok {
					continue
				}
				d50 = append(d50, r.P50Us-d.P50Us)
				d99 = append(d99, r.P99Us-d.P99Us)
				if r.P999Us > 0 && d.P999Us > 0 {
					d999 = append(d999, r.P999Us-d.P999Us)
				}
				base = append(base, d.P99Us)
			}
			if tp.Rounds == 0 {
				return tp, false
			}
			if m := median(rates); m != nil {
				tp.Rate = int(*m)
			}
			tp.P50Us, tp.P99Us, tp.P999Us, tp.DirectUs = median(d50), median(d99), median(d999), median(base)
			return tp, true
		})
		if len(tl.Proxies) == 0 {
			continue
		}
		for i := range tl.Proxies {
			p := &tl.Proxies[i]
			if h := by["haproxy"]; h != nil {
				p.P50RatioHAProxy = tailRatio(p.P50Us, h.P50Us)
				p.P99RatioHAProxy = tailRatio(p.P99Us, h.P99Us)
				p.P999RatioHAProxy = tailRatio(p.P999Us, h.P999Us)
			}
			if n := by["nginx"]; n != nil {
				p.P99RatioNginx = tailRatio(p.P99Us, n.P99Us)
			}
		}
		out = append(out, tl)
	}
	return out
}

// tailRatio is v over ref, ref taken as at least tailFloorUs.
func tailRatio(v, ref *float64) *float64 {
	if v == nil || ref == nil {
		return nil
	}
	r := *v / max(*ref, tailFloorUs)
	return &r
}

// loadName says what a tail load is, for the table.
func loadName(load string) string {
	if load == result.VariantCommon {
		return "common rate"
	}
	return load + "% of own max"
}

// tailTable renders the added latency at every load, the proxies side by
// side.
func tailTable(b *strings.Builder, loads []TailLoad) {
	if len(loads) == 0 {
		return
	}
	b.WriteString("\n## Added latency by load (open loop, minus the direct path at the same rate; plot: tail.png)\n\n")
	b.WriteString("Each proxy runs open loop at shares of its own max req/s (phase 1 of the same run) and at one common rate, " +
		"a share of the slowest proxy's max (bench.sh: 25% and 50%, common 25%), so no proxy is near saturation; the direct path (load tool → backend, no proxy) runs at each of these rates " +
		"in the same round, and every figure is the proxy's percentile minus the direct one's, median over rounds. " +
		fmt.Sprintf("Ratios divide by HAProxy's (or nginx's) added latency at the same load, taken as at least %d µs.\n\n", tailFloorUs))
	b.WriteString("| load | proxy | rate req/s | p50 added | p99 added | p99.9 added | p50 ÷ HAProxy | p99 ÷ HAProxy | p99.9 ÷ HAProxy | p99 ÷ nginx | direct p99 | unsent | failed |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, tl := range loads {
		for _, p := range tl.Proxies {
			fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d |\n",
				loadName(tl.Load), p.Name, p.Rate, micros(p.P50Us), micros(p.P99Us), micros(p.P999Us),
				num(p.P50RatioHAProxy, "%.2f×"), num(p.P99RatioHAProxy, "%.2f×"), num(p.P999RatioHAProxy, "%.2f×"),
				num(p.P99RatioNginx, "%.2f×"), micros(p.DirectUs), p.Unsent, p.Failed)
		}
	}
	b.WriteString("\n- unsent: requests the open-loop tool could not send because every connection was still waiting: " +
		"the proxy did not keep up at that rate, and its figures are a queue, not its own delay.\n")
}

// tailAt returns a proxy's tail figures at one load, nil when not
// measured.
func tailAt(loads []TailLoad, load, proxy string) *TailProxy {
	for _, tl := range loads {
		if tl.Load != load {
			continue
		}
		for i := range tl.Proxies {
			if tl.Proxies[i].Name == proxy {
				return &tl.Proxies[i]
			}
		}
	}
	return nil
}

// writeTailChart draws tail.png: the p99 each proxy adds over the direct
// path, grouped by load, side by side. Negative figures (the direct run
// was slower) are drawn as zero.
func writeTailChart(path string, loads []TailLoad) error {
	const (
		w, h                     = 720, 420
		scale                    = 2
		left, right, top, bottom = 70, 30, 70, 60
	)
	img := newChart(w, h, 16, scale, "P99 ADDED OVER DIRECT, MS, BY LOAD")
	black := chartBlack
	maxY := 0.0
	for _, tl := range loads {
		for _, p := range tl.Proxies {
			if p.P99Us != nil {
				maxY = max(maxY, *p.P99Us/1000)
			}
		}
	}
	base := h - bottom
	fill(img, image.Rect(left, base, w-right, base+2), black)
	if maxY <= 0 {
		return savePNG(path, img)
	}
	maxY *= 1.1
	py := func(y float64) int { return base - int(y/maxY*float64(base-top)) }
	yGrid(img, left, w-right, 1, maxY, py)
	slot := (w - left - right) / len(loads)
	for li, tl := range loads {
		x0 := left + li*slot
		label := strings.ToUpper(loadName(tl.Load))
		drawText(img, x0+(slot-textWidth(label, 1))/2, base+14, label, 1, black)
		bw := slot * 3 / 4 / max(len(tl.Proxies), 1)
		for pi, p := range tl.Proxies {
			if p.P99Us == nil {
				continue
			}
			c, ok := lineColors[p.Name]
			if !ok {
				c = black
			}
			x := x0 + slot/8 + pi*bw
			fill(img, image.Rect(x+2, py(max(*p.P99Us/1000, 0)), x+bw-2, base), c)
		}
	}
	for i, name := range []string{"sluice", "haproxy", "nginx"} {
		lx := left + 10 + i*150
		fill(img, image.Rect(lx, top-28, lx+14, top-14), lineColors[name])
		drawText(img, lx+20, top-28, strings.ToUpper(name), scale, black)
	}
	return savePNG(path, img)
}
