//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"sluice.dev/sluice/test/load"
)

// histogram is one scraped histogram: cumulative bucket counts by upper bound.
type histogram struct {
	count   uint64
	bounds  []float64
	buckets []uint64
}

var latencyMetrics = []string{
	"sluice_controller_register_latency_seconds",
	"sluice_controller_healthy_latency_seconds",
	"sluice_controller_drain_latency_seconds",
}

// scrape reads the controller's latency histograms; missing ones are empty
// (the controller may be down).
func (e *env) scrape() map[string]histogram {
	out := map[string]histogram{}
	e.mu.Lock()
	addr := e.ctlAddr
	e.mu.Unlock()
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return out
	}
	for _, name := range latencyMetrics {
		mf := mfs[name]
		if mf == nil || len(mf.GetMetric()) == 0 {
			continue
		}
		out[name] = toHistogram(mf.GetMetric()[0].GetHistogram())
	}
	return out
}

func toHistogram(h *dto.Histogram) histogram {
	var r histogram
	r.count = h.GetSampleCount()
	for _, b := range h.GetBucket() {
		r.bounds = append(r.bounds, b.GetUpperBound())
		r.buckets = append(r.buckets, b.GetCumulativeCount())
	}
	return r
}

// delta is after minus before; a restarted controller (counts went down)
// contributes only what it observed since.
func delta(before, after histogram) histogram {
	if after.count < before.count || len(before.buckets) != len(after.buckets) {
		return after
	}
	d := histogram{count: after.count - before.count, bounds: after.bounds}
	for i := range after.buckets {
		d.buckets = append(d.buckets, after.buckets[i]-before.buckets[i])
	}
	return d
}

// quantile estimates q like PromQL's histogram_quantile.
func (h histogram) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * float64(h.count)
	lower, prev := 0.0, uint64(0)
	for i, c := range h.buckets {
		if float64(c) >= rank {
			if c == prev {
				return h.bounds[i]
			}
			return lower + (h.bounds[i]-lower)*(rank-float64(prev))/float64(c-prev)
		}
		lower, prev = h.bounds[i], c
	}
	return lower
}

func fmtSeconds(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fs", v)
}

// loadTotal adds up consecutive load runs.
type loadTotal struct {
	sent, failed int64
	byKind       map[string]int64
	errors       []string
}

func (l *loadTotal) add(r load.Result) {
	l.sent += r.Sent
	l.failed += r.Failed
	for k, n := range r.ByKind {
		l.byKind[k] += n
	}
	if len(l.errors) < 10 {
		l.errors = append(l.errors, r.Errors...)
	}
}

func (l *loadTotal) kinds() string {
	var parts []string
	for k, n := range l.byKind {
		parts = append(parts, fmt.Sprintf("%s=%d", strings.TrimPrefix(k, "status_"), n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// cases runs named scenarios under load and collects their summary lines.
type cases struct {
	e       *env
	only    []string // from SLUICE_E2E_CASES; empty: every case
	results []caseResult
}

func newCases(e *env) *cases {
	c := &cases{e: e}
	if v := os.Getenv("SLUICE_E2E_CASES"); v != "" {
		c.only = strings.Split(v, ",")
	}
	return c
}

// run measures action as case name. A strict case fails the test on any
// failed request; the others (comparisons) only report theirs.
func (c *cases) run(name string, strict bool, action func()) {
	c.record(name, strict, action, nil)
}

// runWith is run with extra: after the measurement, it returns more summary
// fields ("min_zone_healthy=1") for the case's line.
func (c *cases) runWith(name string, strict bool, extra func() string, action func()) {
	c.record(name, strict, action, extra)
}

// runNoted is run for an action that returns more fields (key=value ...)
// for its summary line.
func (c *cases) runNoted(name string, strict bool, action func() string) {
	var note string
	c.record(name, strict, func() { note = action() }, func() string { return note })
}

// record measures action as case name; note, if not nil, gives the extra
// fields of its summary line once the measurement ended.
func (c *cases) record(name string, strict bool, action func(), note func() string) {
	if !c.wants(name) {
		return
	}
	r := c.e.measure(name, action)
	if note != nil {
		r.note = note()
	}
	c.results = append(c.results, r)
	c.e.t.Log(r.String())
	if r.load.failed > 0 {
		msg := fmt.Sprintf("%s: %d of %d requests failed (%s); first errors: %s", name, r.load.failed, r.load.sent, r.load.kinds(), strings.Join(r.load.errors, " | "))
		if strict {
			c.e.t.Error(msg)
		} else {
			c.e.t.Log(msg)
		}
	}
}

// wants reports whether SLUICE_E2E_CASES selects the case.
func (c *cases) wants(name string) bool {
	return len(c.only) == 0 || slices.Contains(c.only, name)
}

// report prints the summary lines and appends them to SLUICE_E2E_SUMMARY.
func (c *cases) report() {
	var lines []string
	for _, r := range c.results {
		lines = append(lines, r.String())
	}
	writeSummary(lines)
}

// writeSummary prints summary lines and appends them to SLUICE_E2E_SUMMARY.
func writeSummary(lines []string) {
	if len(lines) == 0 {
		return
	}
	summary := strings.Join(lines, "\n") + "\n"
	fmt.Print(summary)
	if path := os.Getenv("SLUICE_E2E_SUMMARY"); path != "" {
		fh, err := os.OpenFile(filepath.Clean(path), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			_, _ = fh.WriteString(summary)
			_ = fh.Close()
		}
	}
}

// caseResult is what one scenario measured.
type caseResult struct {
	name                     string
	load                     loadTotal
	register, healthy, drain histogram
	note                     string // more fields of the summary line
}

func (r caseResult) String() string {
	s := fmt.Sprintf("e2e %s: requests=%d failed=%d register_p50=%s healthy_p50=%s drained_p50=%s",
		r.name, r.load.sent, r.load.failed, fmtSeconds(r.register.quantile(0.5)),
		fmtSeconds(r.healthy.quantile(0.5)), fmtSeconds(r.drain.quantile(0.5)))
	if r.note != "" {
		s += " " + r.note
	}
	return s
}

// rate is the fixed request rate through HAProxy.
const rate = 500

// measure runs action under fixed-rate load (in 5 s slices until action
// returns, then one more slice so that the last pods' exits are covered)
// and reports the load and the controller's latencies meanwhile.
func (e *env) measure(name string, action func()) caseResult {
	e.t.Helper()
	before := e.scrape()
	res := caseResult{name: name, load: loadTotal{byKind: map[string]int64{}}}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tail := 1
		for {
			o := load.Options{
				Target: fmt.Sprintf("http://127.0.0.1:%d", e.lbPort), Host: appHost,
				Rate: rate, Duration: 5 * time.Second, KeepAliveFraction: 0.5,
				// A stall of the shared machine is latency, not a lost
				// request: leave room for several seconds of it.
				Timeout: 15 * time.Second, MaxInFlight: 10000,
			}
			if e.loadOpts != nil {
				e.loadOpts(&o)
			}
			r, err := load.Run(context.Background(), o)
			if err != nil {
				e.t.Errorf("load: %v", err)
				return
			}
			res.load.add(r)
			select {
			case <-done:
				if tail == 0 {
					return
				}
				tail--
			default:
			}
		}
	}()
	action()
	close(done)
	wg.Wait()
	after := e.scrape()
	res.register = delta(before[latencyMetrics[0]], after[latencyMetrics[0]])
	res.healthy = delta(before[latencyMetrics[1]], after[latencyMetrics[1]])
	res.drain = delta(before[latencyMetrics[2]], after[latencyMetrics[2]])
	return res
}
