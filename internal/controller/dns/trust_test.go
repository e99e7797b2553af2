package dns_test

import (
	"testing"
	"time"

	"sluice.dev/sluice/internal/dns"
)

// attacker is a key the controller does not hold: someone with write
// access to TXT records who copied the (public) owner ID.
var attacker, _ = dns.NewKeys([]byte("attacker-attacker-attacker-key32"))

func (e *env) setTXT(name string, o dns.Owner) {
	e.p.Set(zone, dns.Record{Name: dns.OwnerName(name), Type: dns.TypeTXT, TTL: 60, Values: []string{o.Format()}})
}

// TestForgedOwnershipIgnored: ownership records written by someone with
// TXT-only write access (our owner ID, a stamp of unwanted-since=1, no
// signature or a wrong one) never make sluice delete or overwrite a name,
// over reconciles well past the delete delay.
func TestForgedOwnershipIgnored(t *testing.T) {
	e := newEnv(t, ingress("web", "www.example.com"), lbBinding("192.0.2.10"))
	forged := dns.Owner{ID: "test", Ingress: dns.Ref{Namespace: "x", Name: "y", UID: "u"}, UnwantedSince: time.Unix(1, 0)}
	for name, o := range map[string]dns.Owner{
		"www.example.com":  attacker.Sign("www.example.com", forged), // wanted: would be overwritten
		"mail.example.com": attacker.Sign("mail.example.com", forged),
		"shop.example.com": forged, // unsigned
	} {
		e.p.Set(zone, dns.Record{Name: name, Type: dns.TypeA, TTL: 300, Values: []string{"203.0.113.5"}})
		e.setTXT(name, o)
	}
	for range 3 {
		e.mustReconcile()
		e.clock.Advance(3 * time.Minute)
	}
	for _, name := range []string{"www.example.com", "mail.example.com", "shop.example.com"} {
		if got := e.a(name); len(got) != 1 || got[0] != "203.0.113.5" {
			t.Errorf("A %s = %v, want untouched", name, got)
		}
		if o := e.owner(name); o == nil || o.ID != "test" || o.UnwantedSince.Unix() != 1 {
			t.Errorf("ownership record of %s = %+v, want untouched", name, o)
		}
	}
	if n := e.rec.Count("*v1.Ingress app/web", dns.ProblemForeignRecord); n != 1 {
		t.Errorf("%d ForeignRecord Events on app/web, want 1: %+v", n, e.rec.Events())
	}
}

// TestSignedStampNeverHastens: a signed unwanted-since stamp far in the
// past (replayed, or from before a restart) does not shorten the delete
// delay: it runs from when this controller first saw the name unwanted.
func TestSignedStampNeverHastens(t *testing.T) {
	e := newEnv(t, lbBinding("192.0.2.10"))
	o := dns.Owner{ID: "test", Ingress: dns.Ref{Namespace: "app", Name: "old", UID: "u"}, UnwantedSince: time.Unix(1, 0)}
	e.p.Set(zone, dns.Record{Name: "old.example.com", Type: dns.TypeA, TTL: 60, Values: []string{"192.0.2.10"}})
	e.setTXT("old.example.com", keys.Sign("old.example.com", o))
	e.mustReconcile()
	e.clock.Advance(2*time.Minute - time.Second)
	e.mustReconcile()
	if e.a("old.example.com") == nil {
		t.Fatal("deleted before a full delete delay after the controller first saw it unwanted")
	}
	e.clock.Advance(time.Second)
	e.mustReconcile()
	if e.a("old.example.com") != nil || e.owner("old.example.com") != nil {
		t.Fatal("not deleted after the delay")
	}
}

// TestNamespaceDomains: a host outside its namespace's domains gets a
// HostNotAllowed Event and no record, and does not hold up the record of
// the namespace that may publish it. (A host that another namespace owns
// is refused earlier, by host ownership: team-b asks for a host nobody
// else has.)
func TestNamespaceDomains(t *testing.T) {
	other := ingress("steal", "shop.example.com")
	other.Namespace = "team-b"
	e := newEnv(t, ingress("web", "www.example.com"), other, lbBinding("192.0.2.10"))
	e.opts.NamespaceDomains = dns.NamespaceDomains{"app": {"www.example.com"}, "team-b": {"*.b.example.com"}}
	e.restart()
	e.mustReconcile()
	if got := e.a("www.example.com"); len(got) != 1 {
		t.Fatalf("A www.example.com = %v, want published for app/web", got)
	}
	if n := e.rec.Count("*v1.Ingress team-b/steal", dns.ProblemHostNotAllowed); n != 1 {
		t.Errorf("%d HostNotAllowed Events on team-b/steal, want 1: %+v", n, e.rec.Events())
	}
	if got := e.a("shop.example.com"); got != nil {
		t.Errorf("A shop.example.com = %v, want none (outside team-b's domains)", got)
	}
	if o := e.owner("www.example.com"); o == nil || o.Ingress.Namespace != "app" {
		t.Errorf("ownership record = %+v, want app's Ingress", o)
	}
}

// TestAdoptUnsigned: the upgrade path. An unsigned ownership record of
// ours is foreign until the controller runs with AdoptUnsigned, which
// re-signs it; afterwards the name is ours without the flag.
func TestAdoptUnsigned(t *testing.T) {
	e := newEnv(t, ingress("web", "www.example.com"), lbBinding("192.0.2.11"))
	e.p.Set(zone, dns.Record{Name: "www.example.com", Type: dns.TypeA, TTL: 60, Values: []string{"192.0.2.10"}})
	e.setTXT("www.example.com", dns.Owner{ID: "test", Ingress: dns.Ref{Namespace: "app", Name: "web", UID: "uid-web"}})
	e.mustReconcile()
	if got := e.a("www.example.com"); got[0] != "192.0.2.10" {
		t.Fatalf("an unsigned record was taken as ours without --dns-adopt-unsigned: A = %v", got)
	}
	e.opts.AdoptUnsigned = true
	e.restart()
	e.mustReconcile()
	if got := e.a("www.example.com"); got[0] != "192.0.2.11" {
		t.Fatalf("adopted name not updated: A = %v", got)
	}
	if o := e.owner("www.example.com"); o == nil || !keys.Verify("www.example.com", *o) {
		t.Fatalf("ownership record not re-signed: %+v", o)
	}
	e.opts.AdoptUnsigned = false
	e.restart()
	e.mustReconcile()
	if n := e.rec.Count("*v1.Ingress app/web", dns.ProblemForeignRecord); n != 0 {
		t.Errorf("the re-signed name is foreign without the flag: %+v", e.rec.Events())
	}
}
