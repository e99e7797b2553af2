package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"strings"
)

func num(v *float64, format string) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf(format, *v)
}

// micros formats a duration in µs, switching to ms from 10 ms on.
func micros(v *float64) string {
	switch {
	case v == nil:
		return "—"
	case *v >= 10000 || *v <= -10000:
		return fmt.Sprintf("%.0f ms", *v/1000)
	}
	return fmt.Sprintf("%.0f µs", *v)
}

func markdown(s *Summary) string {
	var b strings.Builder
	date := ""
	for _, kv := range s.Meta {
		if kv[0] == "date" {
			date = kv[1]
		}
	}
	fmt.Fprintf(&b, "# sluice vs HAProxy vs nginx — %s\n\n", date)
	for _, kv := range s.Meta {
		if kv[0] == "date" {
			continue
		}
		fmt.Fprintf(&b, "- **%s**: %s\n", kv[0], kv[1])
	}
	goalsTable(&b, s.Goals)
	b.WriteString("\nMedians of the rounds; each proxy runs alone on core 0 with one worker " +
		"(sluice GOMAXPROCS=1, nginx worker_processes 1, HAProxy nbthread 1); wrk, the open-loop " +
		"load tool and the backend share core 1. Ratios are sluice's (or the row's) CPU per request " +
		"divided by HAProxy's and nginx's.\n\n")
	b.WriteString("| proxy | CPU µs/req | ratio vs HAProxy | ratio vs nginx | max req/s | p50 added | p99 added | KiB per idle conn (all / second half) | failed |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range s.Proxies {
		failed := fmt.Sprint(p.Failed)
		if p.Rounds == 0 {
			failed = "not run"
		}
		p50, p99 := micros(p.P50AddedUs), micros(p.P99AddedUs)
		if p.Name == "direct" {
			p50, p99 = "("+micros(p.P50Us)+")", "("+micros(p.P99Us)+")"
		}
		if p.Overloaded && p.P50Us != nil {
			p50, p99 = p50+" †", p99+" †"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			p.Name, num(p.CPUMicrosReq, "%.1f"), num(p.RatioHAProxy, "%.2f×"), num(p.RatioNginx, "%.2f×"),
			num(p.MaxRPS, "%.0f"), p50, p99, idleCell(p), failed)
	}
	fmt.Fprintf(&b, "\n- CPU µs/req: the proxy process's utime+stime (/proc/PID/stat) during the wrk run (settings above; "+
		"100-byte responses, HTTP/1.1 keep-alive on both sides) divided by the requests wrk completed.\n")
	fmt.Fprintf(&b, "- max req/s: wrk's rate in the same run. `direct` is wrk straight to the backend (the ceiling of core 1).\n")
	fmt.Fprintf(&b, "- p50/p99 added: the proxy's latency percentile minus the direct run's in the same round, open loop at %d req/s "+
		"(the common rate: 25%% of the slowest proxy's max; the other loads are in the table below), latency counted from each request's scheduled start; the `direct` row shows the base in parentheses.\n", s.Rate)
	fmt.Fprintf(&b, "- KiB per idle conn: VmRSS growth of a freshly started proxy after %d keep-alive connections each sent one request and went idle, "+
		"read once VmRSS stopped falling; second half: the growth from half of them (settled) to all of them, per connection of that half, "+
		"which leaves out what the process grows by once whatever the connection count (for sluice, the Go heap goal its GC floor sets).\n", s.IdleConns)
	fmt.Fprintf(&b, "- failed: non-2xx responses + wrk socket errors + failed open-loop requests + idle connections that could not be opened or were closed; must be 0.\n")

	var over []string
	for _, p := range s.Proxies {
		if p.Overloaded && p.P50Us != nil {
			over = append(over, fmt.Sprintf("%s (max %s req/s, %d requests left unsent)", p.Name, num(p.MaxRPS, "%.0f"), p.Unsent))
		}
	}
	negative := false
	for _, p := range s.Proxies {
		if (p.P50AddedUs != nil && *p.P50AddedUs < 0) || (p.P99AddedUs != nil && *p.P99AddedUs < 0) {
			negative = true
		}
	}
	if negative {
		b.WriteString("- Negative added latency: in the direct run the load tool and the backend share core 1 and take turns on it, " +
			"while through a proxy the work spreads over both cores; differences this small are below the resolution of a 2-core setup.\n")
	}
	if len(over) > 0 {
		fmt.Fprintf(&b, "- † overloaded at %d req/s: %s. Its latency is mostly queueing, not the proxy's own delay; unsent requests are not counted as failed.\n", s.Rate, strings.Join(over, "; "))
	}
	b.WriteString("- CPU µs/req at the fixed rate (the same open-loop load for every proxy, so batching effects are equal):")
	for _, p := range s.Proxies {
		if p.RateCPUMicrosReq != nil {
			fmt.Fprintf(&b, " %s %.1f;", p.Name, *p.RateCPUMicrosReq)
		}
	}
	b.WriteString("\n- Proxy CPU use during the max-rate runs (1.00 = one full core; below that the proxy waited for core 1 or for its share of core 0, which other work on this machine also uses):")
	for _, p := range s.Proxies {
		if p.CPUUtil != nil {
			fmt.Fprintf(&b, " %s %.2f;", p.Name, *p.CPUUtil)
		}
	}
	b.WriteString("\n")
	tailTable(&b, s.Tail)
	latencyTables(&b, s)
	c := s.Control
	if c.Ingresses > 0 || len(c.Errors) > 0 {
		controlTable(&b, c, "Control plane")
	}
	if len(s.Rows) > 0 {
		rowsTable(&b, s.Rows)
	}
	costTables(&b, s.Scale, s.Cost)
	if ct := s.ControlTLS; ct.Ingresses > 0 || len(ct.Errors) > 0 {
		controlTable(&b, ct, "Control plane with TLS (every Ingress its own ECDSA P-256 certificate and Secret)")
		for _, e := range ct.Errors {
			c.Errors = append(c.Errors, "TLS: "+e)
		}
	}
	var errs []string
	for _, p := range s.Proxies {
		for _, e := range p.Errors {
			errs = append(errs, p.Name+": "+e)
		}
	}
	for _, e := range c.Errors {
		errs = append(errs, "control plane: "+e)
	}
	for _, e := range s.RowErrors {
		errs = append(errs, "extra rows: "+e)
	}
	if len(errs) > 0 {
		b.WriteString("\n## Errors\n\n")
		counts := map[string]int{}
		var order []string
		for _, e := range errs {
			if counts[e] == 0 {
				order = append(order, e)
			}
			counts[e]++
		}
		for i, e := range order {
			if i == 20 {
				fmt.Fprintf(&b, "- … %d more in latest.json\n", len(order)-20)
				break
			}
			if counts[e] > 1 {
				fmt.Fprintf(&b, "- %s (%d times)\n", e, counts[e])
			} else {
				fmt.Fprintf(&b, "- %s\n", e)
			}
		}
	}
	return b.String()
}

func controlTable(b *strings.Builder, c Control, title string) {
	fmt.Fprintf(b, "\n## %s\n\n| measure | value |\n| --- | ---: |\n", title)
	fmt.Fprintf(b, "| translate + compile %d Ingresses (%d routes) in-process, rebuild as the proxy's loop does it, median of 5 | %s |\n", c.Ingresses, c.Routes, num(c.BuildMs, "%.0f ms"))
	if c.FirstBuildMs != nil {
		fmt.Fprintf(b, "| the same, first build of a process (no parsed certificates kept yet) | %s |\n", num(c.FirstBuildMs, "%.0f ms"))
	}
	fmt.Fprintf(b, "| heap retained by the compiled table, per route | %s |\n", num(c.HeapPerRouteB, "%.0f B"))
	fmt.Fprintf(b, "| `sluice proxy --manifests` start → last of the %d Ingresses answering | %s |\n", c.Ingresses, num(c.StartupMs, "%.0f ms"))
	fmt.Fprintf(b, "| table build inside the binary (sluice_table_build_duration_seconds, mean of the builds up to the first full table) | %s |\n", num(c.BinaryBuildMs, "%.0f ms"))
	all := make([]string, len(c.ChangeToLiveAll))
	for i, v := range c.ChangeToLiveAll {
		all[i] = fmt.Sprintf("%.0f", v)
	}
	fmt.Fprintf(b, "| one Ingress file changed → new host answering (median; all: %s ms) | %s |\n", strings.Join(all, ", "), num(c.ChangeToLiveMs, "%.0f ms"))
	if c.SourceToLiveMs != nil {
		fmt.Fprintf(b, "| of which the proxy's part: the source reporting the change → the new table live (sluice_table_change_to_live_seconds, median); the rest is the file source noticing the write, waiting for the file to hold still over two polls 250 ms apart and reading it | %s |\n", num(c.SourceToLiveMs, "%.0f ms"))
	}
	rss := c.RSSKiB
	if rss != nil {
		v := *rss / 1024
		rss = &v
	}
	fmt.Fprintf(b, "| sluice RSS serving them | %s |\n", num(rss, "%.0f MiB"))
}

// writeChart draws one bar per proxy with its CPU µs per request.
func writeChart(path string, s *Summary) error {
	const (
		w, h   = 720, 420
		scale  = 2
		top    = 70
		bottom = 60
	)
	img := newChart(w, h, 20, scale, "CPU MICROSECONDS PER REQUEST (LOWER IS BETTER)")
	black := chartBlack
	grey := color.RGBA{200, 200, 200, 255}
	colors := map[string]color.RGBA{
		"sluice":  {31, 119, 180, 255},
		"haproxy": {44, 160, 44, 255},
		"nginx":   {214, 39, 40, 255},
	}

	type bar struct {
		name string
		v    float64
	}
	var bars []bar
	maxV := 0.0
	for _, p := range s.Proxies {
		if p.CPUMicrosReq == nil || p.Name == "direct" {
			continue
		}
		bars = append(bars, bar{p.Name, *p.CPUMicrosReq})
		maxV = max(maxV, *p.CPUMicrosReq)
	}
	base := h - bottom
	fill(img, image.Rect(40, base, w-40, base+2), black)
	if len(bars) == 0 || maxV <= 0 {
		msg := "NO DATA"
		drawText(img, (w-textWidth(msg, scale))/2, h/2, msg, scale, black)
		return savePNG(path, img)
	}
	slot := (w - 80) / len(bars)
	bw := slot * 3 / 5
	for i, b := range bars {
		x0 := 40 + i*slot + (slot-bw)/2
		height := int(b.v / maxV * float64(base-top-30))
		c, ok := colors[b.name]
		if !ok {
			c = grey
		}
		fill(img, image.Rect(x0, base-height, x0+bw, base), c)
		label := fmt.Sprintf("%.1f", b.v)
		drawText(img, x0+(bw-textWidth(label, scale))/2, base-height-20, label, scale, black)
		name := strings.ToUpper(b.name)
		drawText(img, x0+(bw-textWidth(name, scale))/2, base+14, name, scale, black)
	}
	return savePNG(path, img)
}

// The colours every chart is drawn with.
var (
	chartWhite = color.RGBA{255, 255, 255, 255}
	chartBlack = color.RGBA{30, 30, 30, 255}
	chartGrid  = color.RGBA{220, 220, 220, 255}
)

// newChart is a w×h white image with title centred at height titleY.
func newChart(w, h, titleY, scale int, title string) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	fill(img, img.Bounds(), chartWhite)
	drawText(img, (w-textWidth(title, scale))/2, titleY, title, scale, chartBlack)
	return img
}

// yGrid draws the horizontal grid lines of a chart whose y axis runs from
// 0 to maxY, between columns x0 and x1, at maxY·i/4 for i from first to
// 4, each labelled left of x0; py is a value's row.
func yGrid(img *image.RGBA, x0, x1, first int, maxY float64, py func(float64) int) {
	for i := first; i <= 4; i++ {
		y := maxY * float64(i) / 4
		fill(img, image.Rect(x0, py(y), x1, py(y)+1), chartGrid)
		label := fmt.Sprintf("%.1f", y)
		drawText(img, x0-8-textWidth(label, 1), py(y)-3, label, 1, chartBlack)
	}
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func savePNG(path string, img image.Image) error {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// idleCell is the KiB per idle connection cell: all of them, and the
// second half's, when measured.
func idleCell(p *Proxy) string {
	if p.KiBPerConnMarginal == nil {
		return num(p.KiBPerConn, "%.1f")
	}
	return num(p.KiBPerConn, "%.1f") + " / " + num(p.KiBPerConnMarginal, "%.1f")
}
