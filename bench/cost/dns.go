package main

import (
	"fmt"
	"net/netip"
	"runtime"
	"time"

	"sluice.dev/sluice/bench/internal/result"
	"sluice.dev/sluice/internal/dns"
)

// measureDNS times the planner over n hosts of one zone, each with its own
// Ingress and the load balancer's IPv4 address: the first sync (empty
// zone) and the steady sync (the zone holds what the first planned).
func measureDNS(rec *result.Record, n, runs int) error {
	if n < 1 || runs < 1 {
		return fmt.Errorf("--records and --runs must be positive")
	}
	zone := dns.Zone{ID: "bench.example", Name: "bench.example"}
	keys, err := dns.NewKeys([]byte("sluice-bench-ownership-key-0123456789"))
	if err != nil {
		return err
	}
	addr := netip.MustParseAddr("192.0.2.10").String()
	srcs := make([]dns.Source, n)
	for i := range srcs {
		srcs[i] = dns.Source{
			Host:      fmt.Sprintf("app-%06d.bench.example", i),
			Ingress:   dns.Ref{Namespace: fmt.Sprintf("team-%03d", i%100), Name: fmt.Sprintf("app-%06d", i)},
			Addresses: []dns.Address{{IP: addr}},
			Known:     true,
		}
	}
	at := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	opts := dns.PlanOptions{OwnerID: "bench", Keys: keys, Policy: dns.PolicySync, TTL: 60, DeleteDelay: 2 * time.Minute, Now: at}
	// SOA and NS at the apex, as every zone has.
	apex := []dns.Record{
		{Name: zone.Name, Type: "SOA", TTL: 3600, Values: []string{"ns1.bench.example hostmaster.bench.example 1 7200 3600 1209600 3600"}},
		{Name: zone.Name, Type: "NS", TTL: 3600, Values: []string{"ns1.bench.example"}},
	}
	plan := func(current []dns.Record) (dns.Plan, int) {
		wants, problems := dns.Desired(srcs, dns.DesiredOptions{Zones: []dns.Zone{zone}, TTL: 60})
		return dns.MakePlan(wants, current, opts), len(problems)
	}

	var first dns.Plan
	var firstWall, firstCPU []float64
	for i := 0; i < runs; i++ {
		runtime.GC()
		c := now()
		p, problems := plan(apex)
		w, cpu := c.since()
		if problems > 0 {
			return fmt.Errorf("planning %d hosts: %d problems", n, problems)
		}
		firstWall, firstCPU, first = append(firstWall, w), append(firstCPU, cpu), p
	}
	if len(first.Batches) != n {
		return fmt.Errorf("first sync of %d hosts planned %d batches", n, len(first.Batches))
	}
	// The zone after the first sync: what it planned, applied.
	current := append([]dns.Record(nil), apex...)
	for _, b := range first.Batches {
		for _, ch := range b.Changes {
			if ch.New != nil {
				current = append(current, *ch.New)
				rec.Changes++
			}
		}
	}
	var steadyWall, steadyCPU []float64
	for i := 0; i < runs; i++ {
		runtime.GC()
		c := now()
		p, _ := plan(current)
		w, cpu := c.since()
		if len(p.Batches) != 0 {
			return fmt.Errorf("steady sync of %d hosts planned %d batches, want none", n, len(p.Batches))
		}
		steadyWall, steadyCPU = append(steadyWall, w), append(steadyCPU, cpu)
	}
	rec.SyncMs, rec.SyncCPUMs = medianOf(firstWall), medianOf(firstCPU)
	rec.SteadyMs, rec.SteadyCPUMs = medianOf(steadyWall), medianOf(steadyCPU)
	rec.HeapKiB = heapKiB()
	runtime.KeepAlive(current)
	return nil
}
