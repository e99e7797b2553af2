//go:build integration

package dns_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ct "sluice.dev/sluice/internal/controller/controllertest"
	dnsctl "sluice.dev/sluice/internal/controller/dns"
	"sluice.dev/sluice/internal/controller/ingressstatus"
	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/dns/rfc2136"
	"sluice.dev/sluice/internal/dns/rfc2136/bindtest"
)

// TestBINDForgedOwnership runs the reconciler against a real BIND 9 whose
// zone also grants a TXT-only key (`grant txt-only zonesub TXT`, an ACME
// DNS-01 solver's key). With it, an attacker copies sluice's public owner
// ID into ownership records: signed with a key sluice does not hold, or
// unsigned, all stamped unwanted-since=1, for names whose A records are
// the zone admin's. Over several reconciles past the delete delay sluice
// deletes none of them and overwrites none of them (also not for a host
// an Ingress of ours claims), leaves an MX-only name alone, and still
// publishes its own host.
func TestBINDForgedOwnership(t *testing.T) {
	ctx := context.Background()
	s := bindtest.Start(t, zone)
	admin, err := rfc2136.New(rfc2136.Options{Server: s.Addr, Zones: []string{zone}, KeyName: bindtest.KeyName, Secret: s.Secret})
	if err != nil {
		t.Fatal(err)
	}
	txtOnly, err := rfc2136.New(rfc2136.Options{Server: s.Addr, Zones: []string{zone}, KeyName: bindtest.TXTOnlyKeyName, Secret: s.TXTOnlySecret})
	if err != nil {
		t.Fatal(err)
	}
	z := dns.Zone{ID: zone, Name: zone}

	// The zone admin's records.
	adminRecords := []dns.Record{
		{Name: "www.example.com", Type: dns.TypeA, TTL: 300, Values: []string{"203.0.113.1"}},
		{Name: "api.example.com", Type: dns.TypeA, TTL: 300, Values: []string{"203.0.113.2"}},
		{Name: "shop.example.com", Type: dns.TypeA, TTL: 300, Values: []string{"203.0.113.3"}},
		{Name: "mail.example.com", Type: "MX", TTL: 300, Values: []string{"10 mx.example.net."}},
	}
	var batches []dns.Batch
	for i := range adminRecords {
		if adminRecords[i].Type == "MX" {
			continue // the provider writes only sluice's types: MX goes in below
		}
		batches = append(batches, dns.Batch{Name: adminRecords[i].Name, Changes: []dns.Change{{New: &adminRecords[i]}}})
	}
	if err := errors.Join(admin.Apply(ctx, z, batches)...); err != nil {
		t.Fatalf("writing the admin's records: %v", err)
	}
	if err := s.Update(zone, "mail.example.com. 300 IN MX 10 mx.example.net."); err != nil {
		t.Fatalf("writing the admin's MX record: %v", err)
	}

	// The attacker: the TXT-only key cannot write an A record...
	errs := txtOnly.Apply(ctx, z, []dns.Batch{{Name: "evil.example.com", Changes: []dns.Change{{New: &dns.Record{
		Name: "evil.example.com", Type: dns.TypeA, TTL: 60, Values: []string{"198.51.100.66"}}}}}})
	if errs[0] == nil {
		t.Fatal("the TXT-only key wrote an A record: the zone's update-policy is not what the test needs")
	}
	// ...but can write ownership records with sluice's owner ID.
	forged := dns.Owner{ID: "test", Ingress: dns.Ref{Namespace: "app", Name: "web", UID: "uid-web"}, UnwantedSince: time.Unix(1, 0)}
	forgedTXT := map[string]string{
		"www.example.com":  attacker.Sign("www.example.com", forged).Format(),  // valid format, wrong HMAC
		"shop.example.com": attacker.Sign("shop.example.com", forged).Format(), // claimed by an Ingress of ours too
		"api.example.com":  forged.Format(),                                    // unsigned
	}
	batches = nil
	for name, v := range forgedTXT {
		batches = append(batches, dns.Batch{Name: name, Changes: []dns.Change{{New: &dns.Record{
			Name: dns.OwnerName(name), Type: dns.TypeTXT, TTL: 60, Values: []string{v}}}}})
	}
	if err := errors.Join(txtOnly.Apply(ctx, z, batches)...); err != nil {
		t.Fatalf("the TXT-only key could not write TXT records: %v", err)
	}
	before, err := admin.Records(ctx, z)
	if err != nil {
		t.Fatal(err)
	}

	// sluice: its own host, a host an attacker's TXT claims, an MX-only
	// host; a short delete delay, and a clock moved past it between
	// reconciles.
	clock := ct.NewClock()
	c := ct.NewClient(interceptor.Funcs{}, ingress("web", "app.example.com", "shop.example.com", "mail.example.com"), lbBinding("192.0.2.10"))
	r, err := dnsctl.New(dnsctl.Options{Client: c, Provider: admin, OwnerID: "test", Keys: keys, TTL: time.Second,
		DeleteDelay: 2 * time.Second, Serving: ingressstatus.ServingOptions{Namespace: ct.Namespace}, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	const passes = 4
	for range passes {
		if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		clock.Advance(time.Minute)
	}

	after, err := admin.Records(ctx, z)
	if err != nil {
		t.Fatal(err)
	}
	wronglyDeleted, foreignTouched := 0, 0
	for _, b := range before {
		if b.Name == "app.example.com" || b.Name == dns.OwnerName("app.example.com") || b.Type == "SOA" {
			continue
		}
		i := slices.IndexFunc(after, func(a dns.Record) bool { return a.Name == b.Name && a.Type == b.Type })
		switch {
		case i < 0:
			wronglyDeleted++
			t.Errorf("%s %s was deleted", b.Name, b.Type)
		case !slices.Equal(after[i].Values, b.Values):
			foreignTouched++
			t.Errorf("%s %s changed: %v → %v", b.Name, b.Type, b.Values, after[i].Values)
		}
	}
	for _, a := range after {
		if (a.Name == "mail.example.com" || a.Name == dns.OwnerName("mail.example.com")) && a.Type != "MX" {
			foreignTouched++
			t.Errorf("sluice wrote %s %s beside the admin's MX record", a.Name, a.Type)
		}
	}
	if i := slices.IndexFunc(after, func(a dns.Record) bool { return a.Name == "app.example.com" && a.Type == dns.TypeA }); i < 0 {
		t.Error("sluice did not publish its own host app.example.com")
	}
	t.Logf("integration dns-forged-txt: passes=%d wrongly_deleted=%d foreign_touched=%d", passes, wronglyDeleted, foreignTouched)
}

// TestBINDGatewayRoute runs the reconciler against a real BIND 9 with a
// Programmed Gateway and an HTTPRoute attached to it: the route's host
// gets an A record pointing at the Gateway's status.addresses and an
// ownership record naming the route, as a resolver asking BIND sees;
// once the route is deleted the record is removed after the delete
// delay (not before), and the Gateway's own listener hostname stays.
func TestBINDGatewayRoute(t *testing.T) {
	ctx := context.Background()
	s := bindtest.Start(t, zone)
	p, err := rfc2136.New(rfc2136.Options{Server: s.Addr, Zones: []string{zone}, KeyName: bindtest.KeyName, Secret: s.Secret})
	if err != nil {
		t.Fatal(err)
	}
	c, routes := gatewayClient(t, gatewayClass(), gw([]string{"gw.example.com", ""}, "192.0.2.20"), httpRoute("team", "shop", 10, "shop.example.com"))
	clock := ct.NewClock()
	r, err := dnsctl.New(dnsctl.Options{Client: c, Provider: p, OwnerID: "test", Keys: keys, TTL: time.Second,
		DeleteDelay: 2 * time.Second, Serving: ingressstatus.ServingOptions{Namespace: ct.Namespace}, Routes: routes, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	reconcileOnce := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}
	a := func(name string) []string {
		t.Helper()
		rrs, err := s.Query(name, mdns.TypeA)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, rr := range rrs {
			if x, ok := rr.(*mdns.A); ok {
				out = append(out, x.A.String())
			}
		}
		return out
	}
	owner := func(name string) string {
		t.Helper()
		rrs, err := s.Query(dns.OwnerName(name), mdns.TypeTXT)
		if err != nil {
			t.Fatal(err)
		}
		for _, rr := range rrs {
			if x, ok := rr.(*mdns.TXT); ok {
				return strings.Join(x.Txt, "")
			}
		}
		return ""
	}

	reconcileOnce()
	if got := a("shop.example.com"); !slices.Equal(got, []string{"192.0.2.20"}) {
		t.Fatalf("BIND answers A shop.example.com = %v, want [192.0.2.20]", got)
	}
	if got := a("gw.example.com"); !slices.Equal(got, []string{"192.0.2.20"}) {
		t.Fatalf("BIND answers A gw.example.com = %v, want [192.0.2.20]", got)
	}
	if o := owner("shop.example.com"); !strings.Contains(o, ";httproute=team/shop;uid=uid-shop;") {
		t.Fatalf("ownership record of shop.example.com = %q, want it to name the route", o)
	}

	if err := c.Delete(ctx, httpRoute("team", "shop", 10)); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	kept := len(a("shop.example.com"))
	clock.Advance(time.Minute)
	reconcileOnce()
	removed := len(a("shop.example.com")) == 0 && owner("shop.example.com") == ""
	if kept != 1 || !removed {
		t.Fatalf("after the route was deleted: A records before the delay %d (want 1), removed after it %v", kept, removed)
	}
	if got := a("gw.example.com"); !slices.Equal(got, []string{"192.0.2.20"}) {
		t.Fatalf("the Gateway's own host went too: A gw.example.com = %v", got)
	}
	t.Logf("integration dns-gateway-route: published=1 kept_before_delay=%d removed_after_delay=%v", kept, removed)
}
