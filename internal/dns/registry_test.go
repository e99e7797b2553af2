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
		{ID: "prod-eu", Ingress: dns.Ref{Namespace: "app", Name: "web", UID: "0f9c"}, Sig: "v1:abc"},
		{ID: "prod-eu", Ingress: dns.Ref{Namespace: "team", Name: "r", UID: "1a", Kind: dns.KindHTTPRoute}, Sig: "v1:abc"},
		{ID: "prod-eu", Ingress: dns.Ref{Namespace: "team", Name: "g", UID: "1b", Kind: dns.KindGRPCRoute}},
		{ID: "prod-eu", Ingress: dns.Ref{Namespace: "infra", Name: "gw", UID: "1c", Kind: dns.KindGateway}, UnwantedSince: time.Unix(1796000000, 0)},
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
		"heritage=sluice;owner=a;httproute=noslash", "heritage=sluice;owner=a;ingress=n/x;httproute=n/x;uid=u",
		"heritage=sluice;owner=a;gateway=n/x;grpcroute=n/y;uid=u",
	} {
		if o, err := dns.ParseOwner(s); err == nil {
			t.Errorf("ParseOwner(%q) = %+v, want an error", s, o)
		}
	}
	// Fields a later version may add are ignored.
	if _, err := dns.ParseOwner("heritage=sluice;owner=a;ingress=n/x;uid=u;future=1"); err != nil {
		t.Errorf("unknown field: %v", err)
	}
	// The text form of a route's record names its kind.
	o := dns.Owner{ID: "a", Ingress: dns.Ref{Namespace: "team", Name: "r", UID: "u", Kind: dns.KindHTTPRoute}}
	if got, want := o.Format(), "heritage=sluice;owner=a;httproute=team/r;uid=u"; got != want {
		t.Errorf("Format() = %q, want %q", got, want)
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

var fuzzKeys, _ = dns.NewKeys([]byte("fuzz-key-fuzz-key-fuzz-key-fuzz-"))

// FuzzParseOwner: any TXT text from a zone parses or errors, never
// panics, and what parses formats back to text that parses the same.
func FuzzParseOwner(f *testing.F) {
	for _, s := range []string{
		"heritage=sluice;owner=prod;ingress=app/web;uid=0f9c",
		"heritage=sluice;owner=prod;ingress=app/web;uid=0f9c;unwanted-since=1796000000",
		"heritage=sluice;owner=prod;ingress=app/web;uid=0f9c;unwanted-since=1;sig=v1:2F8u9zQWkcLzmYqS7hD1tFqQdE_0-1f0N9b3JXQm8mE",
		"heritage=sluice;owner=prod;ingress=app/web;uid=0f9c;sig=;sig=x",
		"v=spf1 -all", "heritage=sluice;owner=a;ingress=a/b/c", "", ";;;", "heritage=sluice;owner=a;unwanted-since=99999999999999999999",
		"heritage=sluice;owner=prod;httproute=team/r;uid=1a", "heritage=sluice;owner=prod;gateway=infra/gw;uid=1c;ingress=a/b",
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
		// Whatever the text says, only a key's own signature verifies.
		if fuzzKeys.Verify("www.example.com", o) && o != fuzzKeys.Sign("www.example.com", o) {
			t.Fatalf("%q verifies with a signature the key did not make", s)
		}
	})
}

// TestSignVerify: a signature verifies for exactly the name and fields
// it was made for, with any key of the ring, and not with another key.
func TestSignVerify(t *testing.T) {
	k1, k2 := []byte(strings.Repeat("1", 32)), []byte(strings.Repeat("2", 32))
	ring, err := dns.NewKeys(k2, k1)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := dns.NewKeys(k1)
	o := dns.Owner{ID: "prod", Ingress: dns.Ref{Namespace: "app", Name: "web", UID: "u1"}}
	byOld := old.Sign("www.example.com", o)
	if !ring.Verify("www.example.com", byOld) {
		t.Error("a record signed by the previous key does not verify")
	}
	byNew := ring.Sign("www.example.com", o)
	if byNew.Sig == byOld.Sig || old.Verify("www.example.com", byNew) {
		t.Error("the first key of the ring does not sign")
	}
	back, err := dns.ParseOwner(byNew.Format())
	if err != nil || back != byNew || !ring.Verify("www.example.com", back) {
		t.Fatalf("signed record does not round-trip: %+v, %v", back, err)
	}
	tampered := map[string]func(dns.Owner) (string, dns.Owner){
		"name":           func(o dns.Owner) (string, dns.Owner) { return "api.example.com", o },
		"owner":          func(o dns.Owner) (string, dns.Owner) { o.ID = "prod2"; return "www.example.com", o },
		"namespace":      func(o dns.Owner) (string, dns.Owner) { o.Ingress.Namespace = "ap"; return "www.example.com", o },
		"ingress":        func(o dns.Owner) (string, dns.Owner) { o.Ingress.Name = "web2"; return "www.example.com", o },
		"uid":            func(o dns.Owner) (string, dns.Owner) { o.Ingress.UID = "u2"; return "www.example.com", o },
		"kind":           func(o dns.Owner) (string, dns.Owner) { o.Ingress.Kind = dns.KindHTTPRoute; return "www.example.com", o },
		"unwanted-since": func(o dns.Owner) (string, dns.Owner) { o.UnwantedSince = time.Unix(1, 0); return "www.example.com", o },
		"field boundary": func(o dns.Owner) (string, dns.Owner) {
			o.Ingress.Namespace, o.Ingress.Name = "appw", "eb"
			return "www.example.com", o
		},
		"no signature": func(o dns.Owner) (string, dns.Owner) { o.Sig = ""; return "www.example.com", o },
		"bad base64":   func(o dns.Owner) (string, dns.Owner) { o.Sig = "v1:!!"; return "www.example.com", o },
		"other scheme": func(o dns.Owner) (string, dns.Owner) { o.Sig = "v2" + o.Sig[2:]; return "www.example.com", o },
	}
	for what, f := range tampered {
		if name, o := f(byNew); ring.Verify(name, o) {
			t.Errorf("a signature verifies after changing the %s", what)
		}
	}
	var none *dns.Keys
	if none.Verify("www.example.com", byNew) || none.Sign("www.example.com", o).Sig != "" {
		t.Error("nil Keys verify or sign")
	}
}

func TestParseKeyFile(t *testing.T) {
	k, err := dns.ParseKeyFile([]byte("# current\n" + "MTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTE=\n\n  MjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjI=  \n"))
	if err != nil || k.Len() != 2 {
		t.Fatalf("ParseKeyFile = %d keys, %v; want 2", k.Len(), err)
	}
	for _, bad := range []string{"", "# only a comment\n", "not base64!\n", "c2hvcnQ=\n", strings.Repeat("MTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTE=\n", 17)} {
		if _, err := dns.ParseKeyFile([]byte(bad)); err == nil {
			t.Errorf("ParseKeyFile(%q): no error", bad)
		}
	}
}
