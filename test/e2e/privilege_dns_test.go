//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/dns/rfc2136"
	"sluice.dev/sluice/internal/dns/rfc2136/bindtest"
)

// The zone admin's records that TestPrivilege's DNS attacks aim at. The
// admin's A records (victims of forged ownership) and names holding only
// records of types sluice does not manage.
var (
	victimRRs = []string{
		"www.corp.test. 300 IN A 203.0.113.1",
		"shop.corp.test. 300 IN A 203.0.113.2",
	}
	foreignTypeRRs = []string{
		"mx.corp.test. 300 IN MX 10 mail.example.net.",
		"srv.corp.test. 300 IN SRV 0 0 443 target.example.net.",
		"caa.corp.test. 300 IN CAA 0 issue \"ca.example.net\"",
		"deleg.corp.test. 300 IN NS ns1.example.net.",
	}
)

// dnsAttack is the DNS part of TestPrivilege: BIND, the attacker's
// TXT-only key, the sampler reading BIND.
type dnsAttack struct {
	e        *env
	bind     *bindtest.Server
	admin    *rfc2136.Provider // the zone admin's key (and sluice's)
	attacker *rfc2136.Provider // TXT updates only
	forger   *dns.Keys         // the attacker's own signing key
	s        *sampler
}

func newDNSAttack(e *env, bind *bindtest.Server) *dnsAttack {
	e.t.Helper()
	zones := []string{corpZone, publicZone}
	admin, err := rfc2136.New(rfc2136.Options{Server: bind.Addr, Zones: zones, KeyName: bindtest.KeyName, Secret: bind.Secret})
	if err != nil {
		e.t.Fatal(err)
	}
	attacker, err := rfc2136.New(rfc2136.Options{Server: bind.Addr, Zones: zones, KeyName: bindtest.TXTOnlyKeyName, Secret: bind.TXTOnlySecret})
	if err != nil {
		e.t.Fatal(err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		e.t.Fatal(err)
	}
	forger, err := dns.NewKeys(secret)
	if err != nil {
		e.t.Fatal(err)
	}
	return &dnsAttack{e: e, bind: bind, admin: admin, attacker: attacker, forger: forger}
}

// forged is an ownership record of sluice's owner ID for name, stamped
// unwanted long ago: with a signature of the attacker's key, or none.
func (d *dnsAttack) forged(name string, signed bool) *dns.Record {
	o := dns.Owner{ID: "e2e", Ingress: dns.Ref{Namespace: appNS, Name: "web", UID: "forged"}, UnwantedSince: time.Unix(1, 0)}
	if signed {
		o = d.forger.Sign(name, o)
	}
	return &dns.Record{Name: dns.OwnerName(name), Type: dns.TypeTXT, TTL: 60, Values: []string{o.Format()}}
}

// plant writes, before sluice runs, the admin's records and the
// attacker's forged ownership records for the admin's names; it checks
// that the attacker's key cannot write an A record (or the attack would
// not be TXT-only). From here on the sampler watches all of them.
func (d *dnsAttack) plant() {
	t := d.e.t
	t.Helper()
	for _, rr := range append(slices.Clone(victimRRs), foreignTypeRRs...) {
		if err := d.bind.Update(corpZone, rr); err != nil {
			t.Fatalf("planting %q: %v", rr, err)
		}
	}
	ctx := context.Background()
	z := dns.Zone{ID: corpZone, Name: corpZone}
	errs := d.attacker.Apply(ctx, z, []dns.Batch{{Name: "evil." + corpZone, Changes: []dns.Change{{New: &dns.Record{
		Name: "evil." + corpZone, Type: dns.TypeA, TTL: 60, Values: []string{"198.51.100.66"}}}}}})
	if len(errs) == 0 || errs[0] == nil {
		t.Fatal("the TXT-only key wrote an A record: BIND's update-policy is not the attack's")
	}
	batches := []dns.Batch{
		{Name: "www." + corpZone, Changes: []dns.Change{{New: d.forged("www."+corpZone, true)}}},
		{Name: "shop." + corpZone, Changes: []dns.Change{{New: d.forged("shop."+corpZone, false)}}},
	}
	if err := errors.Join(d.attacker.Apply(ctx, z, batches)...); err != nil {
		t.Fatalf("the TXT-only key could not forge ownership records: %v", err)
	}
	d.s = newSampler(d.bind)
	t.Cleanup(d.s.stop)
	watched := d.watched()
	d.s.watchForeign(func() ([]string, error) {
		recs, err := bindRecords(d.bind, watched)
		// The apex's SOA serial changes with every update: not a record
		// of the admin's that sluice could touch.
		return slices.DeleteFunc(recs, func(r string) bool { return strings.Contains(r, " SOA ") }), err
	})
	if n, want := d.s.baselineSize(), len(victimRRs)+len(foreignTypeRRs)+2+1; n != want {
		t.Fatalf("BIND shows %d of the %d planted records (the apex's NS included): foreign_touched could not fail", n, want)
	}
}

// watched are the names whose records are the admin's or the attacker's:
// the victims, their forged ownership records, the names of foreign
// types and their ownership names, and the apex.
func (d *dnsAttack) watched() []string {
	var names []string
	for _, rr := range append(slices.Clone(victimRRs), foreignTypeRRs...) {
		n := strings.TrimSuffix(strings.Fields(rr)[0], ".")
		names = append(names, n, dns.OwnerName(n))
	}
	return append(names, corpZone, dns.OwnerName(corpZone))
}

// cases runs the DNS attack cases; each fails on a name that vanished
// while wanted or a sample where the watched records were not as
// planted, and on its own checks.
func (d *dnsAttack) cases(cs *cases) {
	e, s := d.e, d.s
	run := func(name string, body func() string) {
		cs.runNoted(name, func() string {
			s.reset()
			note := body()
			wrong, touched := s.counts()
			if wrong > 0 || touched > 0 {
				e.t.Errorf("%s: %d names vanished while wanted (%v); %d samples found the admin's records touched (last: %v)",
					name, wrong, s.vanishedNames(), touched, s.lastChanged())
			}
			return fmt.Sprintf("wrongly_deleted=%d foreign_touched=%d %s", wrong, touched, note)
		})
	}
	run("dns-forged-txt", func() string {
		// sluice publishes its own host; an Ingress also claims shop, the
		// admin's name with an unsigned forged record.
		start := time.Now()
		e.create(dnsIngress("mine", "sluice", "mine."+corpZone), dnsIngress("claim", "sluice", "shop."+corpZone))
		publish := s.resolves(e, "mine."+corpZone, "127.0.0.1", start)
		s.want("mine." + corpZone)
		// The attacker replaces sluice's own ownership record of mine
		// with one that says it has been unwanted since 1970.
		d.replaceOwner("mine." + corpZone)
		// sluice finds both names foreign (no key of its own verifies
		// their ownership records) and says so, on the Ingresses.
		for _, ing := range []string{"claim", "mine"} {
			e.eventually(60*time.Second, "a ForeignRecord Event on "+ing, func(ctx context.Context) (bool, error) {
				return e.hasEvent(ctx, ing, dns.ProblemForeignRecord), nil
			})
		}
		time.Sleep(3 * dnsDelay) // many passes, well past the delete delay
		return fmt.Sprintf("forged=3 publish=%.2fs", publish.Seconds())
	})
	run("dns-foreign-types", func() string {
		var names []string
		for _, rr := range foreignTypeRRs {
			names = append(names, strings.TrimSuffix(strings.Fields(rr)[0], "."))
		}
		e.create(dnsIngress("foreign-types", "sluice", names...))
		e.eventually(60*time.Second, "a ForeignRecord Event", func(ctx context.Context) (bool, error) {
			return e.hasEvent(ctx, "foreign-types", dns.ProblemForeignRecord), nil
		})
		time.Sleep(3 * dnsDelay)
		published := d.published(names...)
		d.delete(appNS, "foreign-types")
		return fmt.Sprintf("names=%d published=%d", len(names), published)
	})
	run("dns-namespace-domains", func() string {
		// app may publish only in corp.test, team-b only below public.test.
		start := time.Now()
		e.create(dnsIngress("stolen", "sluice", "stolen."+publicZone), tenantIngress(teamB, "b", "b."+publicZone))
		publish := s.resolves(e, "b."+publicZone, "127.0.0.1", start)
		s.want("b." + publicZone)
		e.eventually(60*time.Second, "a HostNotAllowed Event", func(ctx context.Context) (bool, error) {
			return e.hasEvent(ctx, "stolen", dns.ProblemHostNotAllowed), nil
		})
		time.Sleep(3 * dnsDelay)
		refused := d.published("stolen." + publicZone)
		if refused > 0 {
			e.t.Errorf("dns-namespace-domains: stolen.%s published for namespace %s", publicZone, appNS)
		}
		return fmt.Sprintf("allowed_published=1 refused_published=%d publish=%.2fs", refused, publish.Seconds())
	})
	run("dns-apex", func() string {
		e.create(dnsIngress("apex", "sluice", corpZone))
		e.eventually(60*time.Second, "an ApexNotAllowed Event", func(ctx context.Context) (bool, error) {
			return e.hasEvent(ctx, "apex", dns.ProblemApexNotAllowed), nil
		})
		time.Sleep(3 * dnsDelay)
		published := d.published(corpZone)
		d.delete(appNS, "apex")
		return fmt.Sprintf("apex_published=%d", published)
	})
}

// replaceOwner has the attacker replace the ownership record sluice wrote
// for name by a forged one, signed with the attacker's key.
func (d *dnsAttack) replaceOwner(name string) {
	t := d.e.t
	t.Helper()
	ctx := context.Background()
	z := dns.Zone{ID: corpZone, Name: corpZone}
	recs, err := d.admin.Records(ctx, z)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(recs, func(r dns.Record) bool {
		return strings.EqualFold(strings.TrimSuffix(r.Name, "."), dns.OwnerName(name)) && r.Type == dns.TypeTXT
	})
	if i < 0 {
		t.Fatalf("sluice wrote no ownership record for %s", name)
	}
	if err := errors.Join(d.attacker.Apply(ctx, z, []dns.Batch{{Name: name, Changes: []dns.Change{{Old: &recs[i], New: d.forged(name, true)}}}})...); err != nil {
		t.Fatalf("the attacker could not replace the ownership record of %s: %v", name, err)
	}
}

// published counts the names that have an A record or a CNAME in BIND.
func (d *dnsAttack) published(names ...string) int {
	d.e.t.Helper()
	n := 0
	for _, name := range names {
		got, err := values(d.bind, name)
		if err != nil {
			d.e.t.Fatal(err)
		}
		if len(got) > 0 {
			n++
			d.e.t.Errorf("%s published: %v", name, got)
		}
	}
	return n
}

func (d *dnsAttack) delete(ns, name string) {
	d.e.t.Helper()
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := d.e.cl.Delete(context.Background(), ing); err != nil {
		d.e.t.Fatal(err)
	}
}

// tenantIngress is dnsIngress in namespace ns.
func tenantIngress(ns, name string, hosts ...string) *networkingv1.Ingress {
	ing := dnsIngress(name, "sluice", hosts...)
	ing.Namespace = ns
	return ing
}
