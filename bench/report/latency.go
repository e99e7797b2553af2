package main

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"sluice.dev/sluice/bench/internal/result"
)

// SweepPoint is one proxy's p99 at one share of its own max req/s (median
// over rounds).
type SweepPoint struct {
	Proxy    string  `json:"proxy"`
	SharePct int     `json:"share_pct"`
	Rate     int     `json:"rate"`
	P99Us    float64 `json:"p99_us"`
	Unsent   int64   `json:"unsent"`
	Failed   int64   `json:"failed"`
}

// hdrMedian is the median over rounds of each HDR percentile.
func hdrMedian(rounds map[int]result.Record) []float64 {
	var out []float64
	for i := range result.HDRPercentiles {
		var xs []float64
		for _, r := range rounds {
			if i < len(r.HDRUs) {
				xs = append(xs, r.HDRUs[i])
			}
		}
		m := median(xs)
		if m == nil {
			return nil
		}
		out = append(out, *m)
	}
	return out
}

func summarizeSweep(recs []result.Record) []SweepPoint {
	type key struct {
		proxy string
		share int
	}
	p99 := map[key][]float64{}
	rates := map[key][]float64{}
	pts := map[key]*SweepPoint{}
	for _, r := range recs {
		// The open-loop phase's runs at a share of the own max (25%,
		// 50%) are points of the sweep too.
		sweep := r.Phase == result.PhaseSweep || r.Phase == result.PhaseLatency && r.Proxy != "direct"
		if !sweep || r.Error != "" {
			continue
		}
		share, err := strconv.Atoi(r.Variant)
		if err != nil {
			continue
		}
		k := key{r.Proxy, share}
		if pts[k] == nil {
			pts[k] = &SweepPoint{Proxy: r.Proxy, SharePct: share}
		}
		p99[k] = append(p99[k], r.P99Us)
		rates[k] = append(rates[k], float64(r.Rate))
		pts[k].Unsent += r.Unsent
		pts[k].Failed += r.Failed
	}
	var out []SweepPoint
	for k, pt := range pts {
		pt.P99Us = *median(p99[k])
		pt.Rate = int(*median(rates[k]))
		out = append(out, *pt)
	}
	order := map[string]int{}
	for i, p := range proxies {
		order[p] = i
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Proxy != out[j].Proxy {
			return order[out[i].Proxy] < order[out[j].Proxy]
		}
		return out[i].SharePct < out[j].SharePct
	})
	return out
}

// latencyTables renders the added-latency percentiles and the load sweep.
func latencyTables(b *strings.Builder, s *Summary) {
	have := false
	for _, p := range s.Proxies {
		have = have || p.P90AddedUs != nil
	}
	if have {
		b.WriteString("\n## Added latency by percentile at the common rate (open loop; plot: hdr.png)\n\n")
		b.WriteString("| proxy | p50 | p90 | p99 | p99.9 |\n| --- | ---: | ---: | ---: | ---: |\n")
		for _, p := range s.Proxies {
			if p.Name == "direct" || p.P90AddedUs == nil {
				continue
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", p.Name, micros(p.P50AddedUs), micros(p.P90AddedUs), micros(p.P99AddedUs), micros(p.P999AddedUs))
		}
	}
	defer runtimeTable(b, s.Runtime)
	if len(s.Sweep) == 0 {
		return
	}
	b.WriteString("\n## p99 by load: share of each proxy's own max req/s (plot: sweep.png)\n\n")
	b.WriteString("| proxy | share | rate req/s | p99 (not minus direct) | unsent | failed |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, pt := range s.Sweep {
		v := pt.P99Us
		fmt.Fprintf(b, "| %s | %d%% | %d | %s | %d | %d |\n", pt.Proxy, pt.SharePct, pt.Rate, micros(&v), pt.Unsent, pt.Failed)
	}
}

// line is one series of a line chart.
type line struct {
	name   string
	xs, ys []float64
}

var lineColors = map[string]color.RGBA{
	"sluice":  {31, 119, 180, 255},
	"haproxy": {44, 160, 44, 255},
	"nginx":   {214, 39, 40, 255},
	"direct":  {120, 120, 120, 255},
}

// writeLatencyCharts draws hdr.png (latency by percentile, the x axis
// log-scaled in 1/(1-p) as HDR histograms are) and sweep.png (p99 by share
// of the max rate) when there is data for them.
func writeLatencyCharts(out string, s *Summary) error {
	var hdr []line
	for _, p := range s.Proxies {
		if len(p.HDRUs) != len(result.HDRPercentiles) {
			continue
		}
		l := line{name: p.Name}
		for i, pct := range result.HDRPercentiles[:len(result.HDRPercentiles)-1] { // not the max
			l.xs = append(l.xs, math.Log10(1/(1-pct/100)))
			l.ys = append(l.ys, p.HDRUs[i]/1000)
		}
		hdr = append(hdr, l)
	}
	if len(hdr) > 0 {
		ticks := []tick{{math.Log10(2), "50%"}, {1, "90%"}, {2, "99%"}, {3, "99.9%"}, {4, "99.99%"}}
		if err := lineChart(filepath.Join(out, "hdr.png"), "LATENCY BY PERCENTILE, MS (OPEN LOOP)", ticks, hdr); err != nil {
			return err
		}
	}
	index := map[string]int{}
	var sweep []line
	for _, pt := range s.Sweep {
		i, ok := index[pt.Proxy]
		if !ok {
			i = len(sweep)
			index[pt.Proxy] = i
			sweep = append(sweep, line{name: pt.Proxy})
		}
		sweep[i].xs = append(sweep[i].xs, float64(pt.SharePct))
		sweep[i].ys = append(sweep[i].ys, pt.P99Us/1000)
	}
	if len(sweep) > 0 {
		ticks := []tick{{25, "25%"}, {50, "50%"}, {75, "75%"}, {90, "90%"}}
		if err := lineChart(filepath.Join(out, "sweep.png"), "P99 MS BY SHARE OF OWN MAX REQ/S", ticks, sweep); err != nil {
			return err
		}
	}
	return nil
}

type tick struct {
	x     float64
	label string
}

// lineChart draws lines over x ticks with a linear y axis from 0.
func lineChart(path, title string, ticks []tick, lines []line) error {
	const (
		w, h                     = 720, 420
		scale                    = 2
		left, right, top, bottom = 70, 60, 60, 60
	)
	img := newChart(w, h, 16, scale, title)
	black := chartBlack
	minX, maxX, maxY := ticks[0].x, ticks[len(ticks)-1].x, 0.0
	for _, l := range lines {
		for i := range l.xs {
			minX, maxX, maxY = min(minX, l.xs[i]), max(maxX, l.xs[i]), max(maxY, l.ys[i])
		}
	}
	if maxY <= 0 || maxX <= minX {
		return savePNG(path, img)
	}
	maxY *= 1.1
	px := func(x float64) int { return left + int((x-minX)/(maxX-minX)*float64(w-left-right)) }
	py := func(y float64) int { return h - bottom - int(y/maxY*float64(h-top-bottom)) }
	yGrid(img, left, w-right, 0, maxY, py)
	fill(img, image.Rect(left, h-bottom, w-right, h-bottom+2), black)
	for _, t := range ticks {
		fill(img, image.Rect(px(t.x), h-bottom, px(t.x)+1, h-bottom+6), black)
		drawText(img, px(t.x)-textWidth(t.label, scale)/2, h-bottom+12, t.label, scale, black)
	}
	for li, l := range lines {
		c, ok := lineColors[l.name]
		if !ok {
			c = black
		}
		for i := range l.xs {
			x, y := px(l.xs[i]), py(l.ys[i])
			fill(img, image.Rect(x-3, y-3, x+4, y+4), c)
			if i > 0 {
				drawLine(img, px(l.xs[i-1]), py(l.ys[i-1]), x, y, c)
			}
		}
		lx := left + 10 + li*150
		fill(img, image.Rect(lx, top-18, lx+14, top-4), c)
		drawText(img, lx+20, top-18, strings.ToUpper(l.name), scale, black)
	}
	return savePNG(path, img)
}

// drawLine draws a 2-pixel line from (x0, y0) to (x1, y1).
func drawLine(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	n := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= n; i++ {
		x := x0 + (x1-x0)*i/n
		y := y0 + (y1-y0)*i/n
		fill(img, image.Rect(x, y, x+2, y+2), c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
