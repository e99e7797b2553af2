//go:build integration

package rfc2136_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	mdns "github.com/miekg/dns"

	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/dns/rfc2136"
	"sluice.dev/sluice/internal/dns/rfc2136/bindtest"
)

func provider(t *testing.T, s *bindtest.Server, secret string) *rfc2136.Provider {
	t.Helper()
	p, err := rfc2136.New(rfc2136.Options{Server: s.Addr, Zones: []string{"example.com", "example.org"}, KeyName: bindtest.KeyName, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func find(recs []dns.Record, name, typ string) *dns.Record {
	i := slices.IndexFunc(recs, func(r dns.Record) bool { return r.Name == name && r.Type == typ })
	if i < 0 {
		return nil
	}
	return &recs[i]
}

// TestBIND drives the provider against a real BIND 9: signed AXFR,
// batched signed UPDATEs with compare-and-swap prerequisites, conflicts,
// the split of a failed UPDATE into batches, a wrong key and a server
// that is down.
func TestBIND(t *testing.T) {
	ctx := context.Background()
	s := bindtest.Start(t, "example.com", "example.org")
	p := provider(t, s, s.Secret)
	zones, err := p.Zones(ctx)
	if err != nil || len(zones) != 2 {
		t.Fatalf("Zones = %v, %v", zones, err)
	}
	com := zones[0]

	recs, err := p.Records(ctx, com)
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	if r := find(recs, "ns.example.com", dns.TypeA); r == nil || r.Values[0] != "127.0.0.1" {
		t.Fatalf("AXFR: ns.example.com A = %+v in %+v", r, recs)
	}

	long := "heritage=sluice;owner=test;ingress=app/" + strings.Repeat("n", 250) + ";uid=u1"
	a := &dns.Record{Name: "www.example.com", Type: dns.TypeA, TTL: 60, Values: []string{"192.0.2.10", "192.0.2.9"}}
	aaaa := &dns.Record{Name: "www.example.com", Type: dns.TypeAAAA, TTL: 60, Values: []string{"2001:db8::1"}}
	txt := &dns.Record{Name: "sluice-owner.www.example.com", Type: dns.TypeTXT, TTL: 60, Values: []string{long}}
	cname := &dns.Record{Name: "*.apps.example.com", Type: dns.TypeCNAME, TTL: 60, Values: []string{"lb.example.net"}}
	errs := p.Apply(ctx, com, []dns.Batch{
		{Name: "www.example.com", Changes: []dns.Change{{New: a}, {New: aaaa}, {New: txt}}},
		{Name: "*.apps.example.com", Changes: []dns.Change{{New: cname}}},
	})
	if errors.Join(errs...) != nil {
		t.Fatalf("Apply: %v", errs)
	}
	recs, err = p.Records(ctx, com)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []*dns.Record{a, aaaa, txt, cname} {
		got := find(recs, want.Name, want.Type)
		if got == nil || !slices.Equal(got.Values, want.Values) || got.TTL != want.TTL {
			t.Errorf("after Apply, %s %s = %+v, want %+v", want.Name, want.Type, got, want)
		}
	}
	if rrs, err := s.Query("x.apps.example.com", mdns.TypeA); err != nil || len(rrs) == 0 {
		t.Errorf("the wildcard does not resolve: %v %v", rrs, err)
	}

	// Someone else changes www's A set: our update, planned from the old
	// set, is refused (CAS), and a good batch in the same Apply still goes
	// through (the failed UPDATE is split).
	other := &dns.Record{Name: "www.example.com", Type: dns.TypeA, TTL: 60, Values: []string{"203.0.113.1"}}
	if errs := p.Apply(ctx, com, []dns.Batch{{Name: "www", Changes: []dns.Change{{Old: a, New: other}}}}); errs[0] != nil {
		t.Fatalf("the other writer: %v", errs[0])
	}
	mine := &dns.Record{Name: "www.example.com", Type: dns.TypeA, TTL: 60, Values: []string{"192.0.2.11"}}
	api := &dns.Record{Name: "api.example.com", Type: dns.TypeA, TTL: 60, Values: []string{"192.0.2.12"}}
	errs = p.Apply(ctx, com, []dns.Batch{
		{Name: "www.example.com", Changes: []dns.Change{{Old: a, New: mine}}},
		{Name: "api.example.com", Changes: []dns.Change{{New: api}}},
		{Name: "*.apps.example.com", Changes: []dns.Change{{New: cname}}}, // exists already: NXRRSET prerequisite fails
	})
	if !errors.Is(errs[0], dns.ErrConflict) || errs[1] != nil || !errors.Is(errs[2], dns.ErrConflict) {
		t.Fatalf("Apply with conflicts = %v, want conflict, nil, conflict", errs)
	}
	recs, _ = p.Records(ctx, com)
	if got := find(recs, "www.example.com", dns.TypeA); got == nil || got.Values[0] != "203.0.113.1" {
		t.Errorf("the other writer's record = %+v, want untouched", got)
	}
	if find(recs, "api.example.com", dns.TypeA) == nil {
		t.Error("the good batch was held up by the conflicting ones")
	}

	// Delete with CAS: the whole set and the TXT go.
	errs = p.Apply(ctx, com, []dns.Batch{{Name: "www.example.com", Changes: []dns.Change{{Old: other}, {Old: aaaa}, {Old: txt}}}})
	if errs[0] != nil {
		t.Fatalf("delete: %v", errs[0])
	}
	recs, _ = p.Records(ctx, com)
	for _, typ := range []string{dns.TypeA, dns.TypeAAAA} {
		if r := find(recs, "www.example.com", typ); r != nil {
			t.Errorf("www.example.com %s still there: %+v", typ, r)
		}
	}

	// The other zone is separate.
	org := zones[1]
	if errs := p.Apply(ctx, org, []dns.Batch{{Name: "www.example.org", Changes: []dns.Change{{New: &dns.Record{Name: "www.example.org", Type: dns.TypeA, TTL: 30, Values: []string{"192.0.2.20"}}}}}}); errs[0] != nil {
		t.Fatalf("example.org: %v", errs[0])
	}

	// A wrong key is refused, for reading and writing.
	bad := provider(t, s, "c2VjcmV0LXRoYXQtaXMtd3Jvbmc=")
	if _, err := bad.Records(ctx, com); err == nil {
		t.Error("AXFR with a wrong key succeeded")
	}
	if errs := bad.Apply(ctx, com, []dns.Batch{{Name: "api.example.com", Changes: []dns.Change{{Old: api}}}}); errs[0] == nil || errors.Is(errs[0], dns.ErrConflict) {
		t.Errorf("UPDATE with a wrong key: %v, want a non-conflict error", errs[0])
	}

	// The server is down: errors, not panics or hangs.
	s.Stop()
	if _, err := p.Records(ctx, com); err == nil {
		t.Error("Records with the server down: no error")
	}
	if errs := p.Apply(ctx, com, []dns.Batch{{Name: "api.example.com", Changes: []dns.Change{{Old: api}}}}); errs[0] == nil {
		t.Error("Apply with the server down: no error")
	}
	s.Restart()
	recs, err = p.Records(ctx, com)
	if err != nil || find(recs, "api.example.com", dns.TypeA) == nil {
		t.Errorf("after a restart the zone (journal) lost api.example.com: %v", err)
	}
}
