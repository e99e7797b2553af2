package dnstest_test

import (
	"context"
	"errors"
	"testing"

	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/dns/dnstest"
)

func a(name string, ips ...string) *dns.Record {
	return &dns.Record{Name: name, Type: dns.TypeA, TTL: 60, Values: ips}
}

func TestMemoryCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	m := dnstest.New("example.com")
	z := dns.Zone{ID: "example.com", Name: "example.com"}
	errs := m.Apply(ctx, z, []dns.Batch{
		{Name: "a", Changes: []dns.Change{{New: a("a.example.com", "192.0.2.1")}}},
		{Name: "b", Changes: []dns.Change{{Old: a("b.example.com", "192.0.2.1"), New: a("b.example.com", "192.0.2.2")}}},   // b is not there
		{Name: "c", Changes: []dns.Change{{New: a("c.example.com", "192.0.2.1")}, {New: a("c.example.com", "192.0.2.3")}}}, // second create of one set
	})
	if errs[0] != nil || !errors.Is(errs[1], dns.ErrConflict) || !errors.Is(errs[2], dns.ErrConflict) {
		t.Fatalf("errs = %v, want nil, conflict, conflict", errs)
	}
	if m.Get("example.com", "c.example.com", dns.TypeA) != nil {
		t.Error("a failed batch left a record behind: batches must be atomic")
	}
	m.Set("example.com", *a("a.example.com", "203.0.113.9")) // someone else writes
	errs = m.Apply(ctx, z, []dns.Batch{{Name: "a", Changes: []dns.Change{{Old: a("a.example.com", "192.0.2.1")}}}})
	if !errors.Is(errs[0], dns.ErrConflict) {
		t.Fatalf("delete of a changed set: %v, want conflict", errs[0])
	}
	if r := m.Get("example.com", "a.example.com", dns.TypeA); r == nil || r.Values[0] != "203.0.113.9" {
		t.Fatalf("the other writer's record = %+v", r)
	}
	cname := &dns.Record{Name: "a.example.com", Type: dns.TypeCNAME, TTL: 60, Values: []string{"lb.example.net"}}
	if errs := m.Apply(ctx, z, []dns.Batch{{Name: "a", Changes: []dns.Change{{New: cname}}}}); errs[0] == nil {
		t.Fatal("a CNAME beside an A record was accepted")
	}
	m.Fail(errors.New("down"))
	if _, err := m.Records(ctx, z); err == nil {
		t.Fatal("Records of a failing provider: no error")
	}
}
