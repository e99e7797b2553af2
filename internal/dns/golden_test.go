package dns_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files of the plan tests")

// planCase is a testdata/plan/*.json file.
type planCase struct {
	Comment     string   `json:"comment"`
	Zones       []string `json:"zones"`
	Aliases     bool     `json:"aliases"`
	Policy      string   `json:"policy"`
	DeleteDelay string   `json:"deleteDelay"`
	// Keys names the test keys the controller holds, the first signing
	// (default ["k1"]); TXT values ending in ";sig=@KEY" are signed with
	// test key KEY ("kx": a key the controller does not hold).
	Keys             []string         `json:"keys"`
	AdoptUnsigned    bool             `json:"adoptUnsigned"`
	AllowApex        bool             `json:"allowApex"`
	NamespaceDomains []string         `json:"namespaceDomains"`
	UnwantedSeen     map[string]int64 `json:"unwantedSeen"`
	Sources          []struct {
		Host      string `json:"host"`
		Ingress   string `json:"ingress"`
		Known     bool   `json:"known"`
		Addresses []struct {
			IP           string `json:"ip"`
			Hostname     string `json:"hostname"`
			HostedZoneID string `json:"hostedZoneID"`
		} `json:"addresses"`
	} `json:"sources"`
	Current []struct {
		Name   string   `json:"name"`
		Type   string   `json:"type"`
		TTL    int64    `json:"ttl"`
		Values []string `json:"values"`
	} `json:"current"`
}

// planNow is the plans' clock: 1796000000 in Unix seconds.
var planNow = time.Unix(1796000000, 0)

func ref(s string) dns.Ref {
	ns, name, _ := strings.Cut(s, "/")
	return dns.Ref{Namespace: ns, Name: name, UID: "uid-" + ns + "-" + name}
}

// TestPlanGolden runs Desired and MakePlan on every testdata/plan/*.json
// and compares the wants, problems, statuses and batches with the
// .golden file beside it (go test -run TestPlanGolden -update rewrites).
func TestPlanGolden(t *testing.T) {
	golden.Run(t, "testdata/plan/*.json", *update, func(t *testing.T, gc golden.Case) string {
		data, err := os.ReadFile(gc.Input)
		if err != nil {
			t.Fatal(err)
		}
		var c planCase
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatalf("parsing %s: %v", gc.Input, err)
		}
		return runPlan(t, c)
	})
}

// testKey is the secret of test key name.
func testKey(name string) []byte {
	return []byte(strings.Repeat(name, 32)[:32])
}

func testKeys(t *testing.T, names ...string) *dns.Keys {
	t.Helper()
	var secrets [][]byte
	for _, n := range names {
		secrets = append(secrets, testKey(n))
	}
	k, err := dns.NewKeys(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signed replaces a trailing ";sig=@KEY" of the TXT value v of record
// name by the signature of test key KEY.
func signed(t *testing.T, name, v string) string {
	t.Helper()
	rest, key, ok := strings.Cut(v, ";sig=@")
	if !ok {
		return v
	}
	owned, ok := dns.OwnedName(name)
	if !ok {
		t.Fatalf("%s is no ownership record name", name)
	}
	o, err := dns.ParseOwner(rest)
	if err != nil {
		t.Fatalf("test TXT value %q: %v", v, err)
	}
	return testKeys(t, key).Sign(owned, o).Format()
}

func runPlan(t *testing.T, c planCase) string {
	t.Helper()
	var zones []dns.Zone
	for _, z := range c.Zones {
		zones = append(zones, dns.Zone{ID: z, Name: z})
	}
	var srcs []dns.Source
	for _, s := range c.Sources {
		src := dns.Source{Host: s.Host, Ingress: ref(s.Ingress), Known: s.Known}
		for _, a := range s.Addresses {
			src.Addresses = append(src.Addresses, dns.Address{IP: a.IP, Hostname: a.Hostname, HostedZoneID: a.HostedZoneID})
		}
		srcs = append(srcs, src)
	}
	var current []dns.Record
	for _, r := range c.Current {
		rec := dns.Record{Name: r.Name, Type: r.Type, TTL: r.TTL}
		for _, v := range r.Values {
			if r.Type == dns.TypeTXT {
				v = signed(t, r.Name, v)
			}
			rec.Values = append(rec.Values, v)
		}
		current = append(current, rec)
	}
	if len(c.Keys) == 0 {
		c.Keys = []string{"k1"}
	}
	keys := testKeys(t, c.Keys...)
	var nsd dns.NamespaceDomains
	for _, v := range c.NamespaceDomains {
		ns, pats, err := dns.ParseNamespaceDomains(v)
		if err != nil {
			t.Fatal(err)
		}
		if nsd == nil {
			nsd = dns.NamespaceDomains{}
		}
		nsd.Add(ns, pats)
	}
	seen := map[string]time.Time{}
	for n, u := range c.UnwantedSeen {
		seen[n] = time.Unix(u, 0)
	}
	delay := 120 * time.Second
	if c.DeleteDelay != "" {
		d, err := time.ParseDuration(c.DeleteDelay)
		if err != nil {
			t.Fatal(err)
		}
		delay = d
	}
	policy := dns.PolicySync
	if c.Policy != "" {
		p, err := dns.ParsePolicy(c.Policy)
		if err != nil {
			t.Fatal(err)
		}
		policy = p
	}
	wants, problems := dns.Desired(srcs, dns.DesiredOptions{Zones: zones, TTL: 60, Aliases: c.Aliases,
		AllowApex: c.AllowApex, Namespaces: nsd})
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n## wants\n", c.Comment)
	for _, w := range wants {
		fmt.Fprintf(&b, "%s zone=%s owner=%s keep=%v ingresses=%v\n", w.Name, w.Zone.Name, w.Owner, w.Keep, w.Ingresses)
		for _, r := range w.Records {
			fmt.Fprintf(&b, "  %s\n", r)
		}
	}
	b.WriteString("\n## problems\n")
	for _, p := range problems {
		fmt.Fprintf(&b, "%s %s %v: %s\n", p.Kind, p.Host, p.Ingress, p.Message)
	}
	for _, z := range zones {
		var zw []dns.Want
		for _, w := range wants {
			if w.Zone == z {
				zw = append(zw, w)
			}
		}
		var zc []dns.Record
		for _, r := range current {
			if got, ok := dns.ZoneFor(r.Name, zones); ok && got == z {
				zc = append(zc, r)
			}
		}
		plan := dns.MakePlan(zw, zc, dns.PlanOptions{OwnerID: "test", Keys: keys, Policy: policy,
			AdoptUnsigned: c.AdoptUnsigned, TTL: 60, DeleteDelay: delay, UnwantedSeen: seen, Now: planNow})
		fmt.Fprintf(&b, "\n## zone %s: statuses\n", z.Name)
		for _, s := range plan.Statuses {
			fmt.Fprintf(&b, "%s %s owner=%s", s.Name, s.State, s.Owner)
			if !s.DeleteAt.IsZero() {
				fmt.Fprintf(&b, " deleteAt=%d", s.DeleteAt.Unix())
			}
			if s.Message != "" {
				fmt.Fprintf(&b, ": %s", s.Message)
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "## zone %s: batches\n", z.Name)
		for _, bt := range plan.Batches {
			fmt.Fprintf(&b, "%s\n", bt.Name)
			for _, ch := range bt.Changes {
				switch {
				case ch.Old == nil:
					fmt.Fprintf(&b, "  + %s\n", ch.New)
				case ch.New == nil:
					fmt.Fprintf(&b, "  - %s\n", ch.Old)
				default:
					fmt.Fprintf(&b, "  ~ %s\n    → %s\n", ch.Old, ch.New)
				}
			}
		}
	}
	return b.String()
}
