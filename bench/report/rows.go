package main

import (
	"fmt"
	"strings"

	"sluice.dev/sluice/bench/internal/result"
)

// rowKinds are the extra rows in table order, with what each measures.
var rowKinds = []struct{ variant, what string }{
	{"https", "HTTPS keep-alive (TLS 1.3, ECDSA P-256), wrk -t1 -c64"},
	{"tls-new", "new TLS connection per request (full handshake), 8 at once"},
	{"tls-resumed", "new TLS connection per request, session resumed, 8 at once"},
	{"h2", "HTTP/2 over TLS, h2load 4 connections × 16 streams"},
	{"body-10k", "10 KiB responses, wrk -t1 -c64"},
	{"body-1m", "1 MiB responses, wrk -t1 -c16"},
}

// Row is one extra row: medians per proxy.
type Row struct {
	Variant string     `json:"variant"`
	What    string     `json:"what"`
	Proxies []RowProxy `json:"proxies"`
}

// RowProxy holds one proxy's medians of a Row; nil when not measured.
type RowProxy struct {
	Name         string   `json:"name"`
	CPUMicrosReq *float64 `json:"cpu_us_per_req,omitempty"`
	RatioHAProxy *float64 `json:"cpu_ratio_vs_haproxy,omitempty"`
	RatioNginx   *float64 `json:"cpu_ratio_vs_nginx,omitempty"`
	RPS          *float64 `json:"rps,omitempty"`
	// PerCore is requests (or handshakes) per second per core of proxy
	// CPU, 1e6 / CPUMicrosReq; MiBPerCore the response bytes per second
	// per core for the body rows.
	PerCore    *float64 `json:"per_core,omitempty"`
	MiBPerCore *float64 `json:"mib_per_core,omitempty"`
	P99Us      *float64 `json:"p99_us,omitempty"`
	Resumed    int64    `json:"resumed,omitempty"`
	Failed     int64    `json:"failed"`
}

// summarizeRows takes the medians of the PhaseRow records.
func summarizeRows(recs []result.Record) ([]Row, []string) {
	type key struct{ variant, proxy string }
	type series struct {
		cpu, rps, p99 []float64
		body          int64
		resumed       int64
		failed        int64
	}
	ser := map[key]*series{}
	var errs []string
	for _, r := range recs {
		if r.Phase != result.PhaseRow {
			continue
		}
		k := key{r.Variant, r.Proxy}
		if ser[k] == nil {
			ser[k] = &series{}
		}
		se := ser[k]
		if r.Error != "" {
			errs = append(errs, fmt.Sprintf("%s %s round %d: %s", r.Variant, r.Proxy, r.Round, r.Error))
			se.failed++
			continue
		}
		se.failed += r.Failed
		for _, e := range r.Samples {
			errs = append(errs, fmt.Sprintf("%s %s round %d: %s", r.Variant, r.Proxy, r.Round, e))
		}
		if r.CPUMicrosReq > 0 {
			se.cpu = append(se.cpu, r.CPUMicrosReq)
		}
		se.rps = append(se.rps, r.RPS)
		if r.P99Us > 0 {
			se.p99 = append(se.p99, r.P99Us)
		}
		se.body = r.BodyBytes
		se.resumed += r.Resumed
	}
	var rows []Row
	for _, kind := range rowKinds {
		row := Row{Variant: kind.variant, What: kind.what}
		var by map[string]*RowProxy
		row.Proxies, by = perProxy(func(name string) (RowProxy, bool) {
			se := ser[key{kind.variant, name}]
			if se == nil {
				return RowProxy{}, false
			}
			p := RowProxy{Name: name, CPUMicrosReq: median(se.cpu), RPS: median(se.rps), P99Us: median(se.p99),
				Resumed: se.resumed, Failed: se.failed}
			if p.CPUMicrosReq != nil && *p.CPUMicrosReq > 0 {
				v := 1e6 / *p.CPUMicrosReq
				p.PerCore = &v
				if se.body > 0 {
					m := v * float64(se.body) / (1 << 20)
					p.MiBPerCore = &m
				}
			}
			return p, true
		})
		if len(row.Proxies) == 0 {
			continue
		}
		for i := range row.Proxies {
			p := &row.Proxies[i]
			p.RatioHAProxy = ratio(p.CPUMicrosReq, by["haproxy"])
			p.RatioNginx = ratio(p.CPUMicrosReq, by["nginx"])
		}
		rows = append(rows, row)
	}
	return rows, errs
}

// perProxy is the entries that entry makes, one per proxy (in the order
// of proxies) for which it says ok, and an index of them by proxy name.
func perProxy[P any](entry func(name string) (P, bool)) ([]P, map[string]*P) {
	var out []P
	var names []string
	for _, name := range proxies {
		if p, ok := entry(name); ok {
			out = append(out, p)
			names = append(names, name)
		}
	}
	by := make(map[string]*P, len(out))
	for i := range out {
		by[names[i]] = &out[i]
	}
	return out, by
}

func ratio(cpu *float64, ref *RowProxy) *float64 {
	if cpu == nil || ref == nil || ref.CPUMicrosReq == nil || *ref.CPUMicrosReq <= 0 {
		return nil
	}
	v := *cpu / *ref.CPUMicrosReq
	return &v
}

// rowsTable renders the extra rows.
func rowsTable(b *strings.Builder, rows []Row) {
	b.WriteString("\n## TLS, HTTP/2 and large bodies\n\n")
	b.WriteString("Same pinning as above. \"per core\" is requests (or new connections) per second per core of the proxy's CPU (10⁶ / CPU µs); for the body rows, MiB of responses per second per core.\n\n")
	b.WriteString("| row | proxy | CPU µs/req | vs HAProxy | vs nginx | req/s | per core | p99 | failed |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range rows {
		for _, p := range row.Proxies {
			perCore := num(p.PerCore, "%.0f/s")
			if p.MiBPerCore != nil {
				perCore = num(p.MiBPerCore, "%.0f MiB/s")
			}
			var p99 *float64
			if p.P99Us != nil {
				v := *p.P99Us / 1000
				p99 = &v
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", row.What, p.Name,
				num(p.CPUMicrosReq, "%.1f"), num(p.RatioHAProxy, "%.2f×"), num(p.RatioNginx, "%.2f×"),
				num(p.RPS, "%.0f"), perCore, num(p99, "%.2f ms"), p.Failed)
		}
	}
}
