package dns_test

import (
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/internal/dns"
)

func TestOwnerRoundTrip(t *testing.T) {
	cases := []dns.Owner{
		{ID: "prod-eu", Ingress: dns.Ref{Namespace: "app", Name: "web", UID: "0f9c"}},
		{ID: "prod-eu", Ingress: dns.Ref{Namespace: "app", Name: "web", UID: "0f9c"}, UnwantedSince: time.Unix(1796000000, 0)},
	}
	for _, o := range cases {
		got, err := dns.ParseOwner(o.Format())
		if err != nil {
			t.Fatalf("ParseOwner(%q): %v", o.Format(), err)
		}
		if got != o {
			t.Errorf("ParseOwner(%q) = %+v, want %+v", o.Format(), got, o)
		}
	}
}

func TestParseOwnerRejects(t *testing.T) {
	for _, s := range []string{
		"", "v=spf1 -all", "heritage=external-dns,external-dns/owner=default",
		"heritage=sluice", "heritage=sluice;owner=", "heritage=sluice;owner=a;owner=b",
		"heritage=sluice;owner=a;ingress=noslash", "heritage=sluice;owner=a;ingress=/x",
		"heritage=sluice;owner=a;unwanted-since=-5", "heritage=sluice;owner=a;unwanted-since=soon",
		"heritage=sluice;owner=a;junk", "heritage=sluice;owner=a;" + strings.Repeat("x=y;", 2000),
	} {
		if o, err := dns.ParseOwner(s); err == nil {
			t.Errorf("ParseOwner(%q) = %+v, want an error", s, o)
		}
	}
	// Fields a later version may add are ignored.
	if _, err := dns.ParseOwner("heritage=sluice;owner=a;ingress=n/x;uid=u;future=1"); err != nil {
		t.Errorf("unknown field: %v", err)
	}
}

func TestOwnerName(t *testing.T) {
	for name, txt := range map[string]string{
		"www.example.com":    "sluice-owner.www.example.com",
		"example.com":        "sluice-owner.example.com",
		"*.apps.example.com": "sluice-owner._wildcard.apps.example.com",
	} {
		if got := dns.OwnerName(name); got != txt {
			t.Errorf("OwnerName(%q) = %q, want %q", name, got, txt)
		}
		if got, ok := dns.OwnedName(txt); !ok || got != name {
			t.Errorf("OwnedName(%q) = %q, %v; want %q", txt, got, ok, name)
		}
	}
	for _, n := range []string{"www.example.com", "sluice-owner.", "sluice-owner._wildcard.", "sluice-ownerx.a"} {
		if got, ok := dns.OwnedName(n); ok {
			t.Errorf("OwnedName(%q) = %q, want not an ownership name", n, got)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	if _, err := dns.ParsePolicy("upsert"); err == nil {
		t.Error("ParsePolicy(upsert): no error")
	}
	if p, err := dns.ParsePolicy("create-only"); err != nil || p != dns.PolicyCreateOnly {
		t.Errorf("ParsePolicy(create-only) = %q, %v", p, err)
	}
}

// FuzzParseOwner: any TXT text from a zone parses or errors, never
// panics, and what parses formats back to text that parses the same.
func FuzzParseOwner(f *testing.F) {
	for _, s := range []string{
		"heritage=sluice;owner=prod;ingress=app/web;uid=0f9c",
		"heritage=sluice;owner=prod;ingress=app/web;uid=0f9c;unwanted-since=1796000000",
		"v=spf1 -all", "heritage=sluice;owner=a;ingress=a/b/c", "", ";;;", "heritage=sluice;owner=a;unwanted-since=99999999999999999999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := dns.ParseOwner(s)
		if err != nil {
			return
		}
		if strings.ContainsAny(o.ID+o.Ingress.Namespace+o.Ingress.Name+o.Ingress.UID, ";") {
			t.Fatalf("parsed field holds a separator: %+v", o)
		}
		if strings.Contains(o.Ingress.Name, "/") {
			return // "ns/a/b": the name keeps its slash; Format cannot tell, and Ingress names have none
		}
		back, err := dns.ParseOwner(o.Format())
		if err != nil || back != o {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", s, back, err, o)
		}
	})
}
