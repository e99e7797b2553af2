package rfc2136

import (
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"

	model "sluice.dev/sluice/internal/dns"
)

func TestNewRejects(t *testing.T) {
	for name, o := range map[string]Options{
		"no port":        {Server: "127.0.0.1", Zones: []string{"example.com"}},
		"no zone":        {Server: "127.0.0.1:53"},
		"bad zone":       {Server: "127.0.0.1:53", Zones: []string{"exa mple..com"}},
		"bad alg":        {Server: "127.0.0.1:53", Zones: []string{"example.com"}, Algorithm: "md5"},
		"key, no secret": {Server: "127.0.0.1:53", Zones: []string{"example.com"}, KeyName: "k"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	p, err := New(Options{Server: "127.0.0.1:53", Zones: []string{"Example.COM."}, KeyName: "K", Secret: "c2VjcmV0"})
	if err != nil || p.zones[0].Name != "example.com" || p.opts.Algorithm != dns.HmacSHA256 || p.opts.KeyName != "k." {
		t.Fatalf("New = %+v, %v", p, err)
	}
}

// TestRoundTrip: a record set goes to resource records and back unchanged,
// long TXT values split into 255-byte strings.
func TestRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 600)
	for _, r := range []model.Record{
		{Name: "www.example.com", Type: model.TypeA, TTL: 60, Values: []string{"192.0.2.10", "192.0.2.9"}},
		{Name: "www.example.com", Type: model.TypeAAAA, TTL: 60, Values: []string{"2001:db8::1"}},
		{Name: "*.apps.example.com", Type: model.TypeCNAME, TTL: 60, Values: []string{"lb.example.net"}},
		{Name: "sluice-owner.www.example.com", Type: model.TypeTXT, TTL: 60, Values: []string{long}},
	} {
		rrs, err := toRRs(r)
		if err != nil {
			t.Fatalf("toRRs(%v): %v", r, err)
		}
		var wire []dns.RR
		for _, rr := range rrs {
			if txt, ok := rr.(*dns.TXT); ok {
				for _, s := range txt.Txt {
					if len(s) > 255 {
						t.Fatalf("TXT string of %d bytes", len(s))
					}
				}
			}
			// Through the wire format, as AXFR would bring it.
			buf := make([]byte, 4096)
			n, err := dns.PackRR(rr, buf, 0, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			back, _, err := dns.UnpackRR(buf[:n], 0)
			if err != nil {
				t.Fatal(err)
			}
			wire = append(wire, back)
		}
		got := fromRRs(wire)
		if len(got) != 1 || got[0].Name != r.Name || got[0].Type != r.Type || got[0].TTL != r.TTL || strings.Join(got[0].Values, ",") != strings.Join(r.Values, ",") {
			t.Errorf("round trip of %v = %+v", r, got)
		}
	}
	for _, bad := range []model.Record{
		{Name: "a.example.com", Type: model.TypeA, Values: []string{"2001:db8::1"}},
		{Name: "a.example.com", Type: model.TypeAAAA, Values: []string{"192.0.2.1"}},
		{Name: "a.example.com", Type: model.TypeA, Alias: &model.Alias{DNSName: "x"}},
		{Name: "a.example.com", Type: "MX", Values: []string{"x"}},
		{Name: "a.example.com", Type: model.TypeA},
	} {
		if _, err := toRRs(bad); err == nil {
			t.Errorf("toRRs(%+v): no error", bad)
		}
	}
}

// FuzzFromZone: whatever records a zone transfer brings (parsed from zone
// file text here) are grouped without panics, into sets whose names are
// lower case without the trailing dot.
func FuzzFromZone(f *testing.F) {
	for _, s := range []string{
		"www.example.com. 60 IN A 192.0.2.1", "WWW.Example.COM. 60 IN AAAA 2001:db8::1",
		`sluice-owner.www.example.com. 60 IN TXT "heritage=sluice;owner=a" "b\"c"`, "*.apps.example.com. 60 IN CNAME LB.example.net.",
		"example.com. 60 IN MX 10 mail.example.com.", `a.example.com. 60 IN TXT "\000\255"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rr, err := dns.NewRR(s)
		if err != nil || rr == nil {
			return
		}
		for _, r := range fromRRs([]dns.RR{rr, dns.Copy(rr)}) {
			if r.Name != strings.ToLower(r.Name) || strings.HasSuffix(r.Name, ".") || len(r.Values) != 1 {
				t.Fatalf("fromRRs(%q) = %+v", s, r)
			}
		}
	})
}

// TestFromRRsOtherTypes: types sluice does not write come back with their
// type and presentation-form values, so the plan sees whose a name is.
func TestFromRRsOtherTypes(t *testing.T) {
	var rrs []dns.RR
	for _, s := range []string{"mail.example.com. 60 IN MX 20 b.example.net.", "mail.example.com. 60 IN MX 10 a.example.net.",
		"sub.example.com. 300 IN NS ns.sub.example.net.", `example.com. 60 IN CAA 0 issue "letsencrypt.org"`} {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		rrs = append(rrs, rr)
	}
	got := fmt.Sprint(fromRRs(rrs))
	want := `[example.com 60 CAA 0 issue "letsencrypt.org" mail.example.com 60 MX 10 a.example.net. 20 b.example.net. sub.example.com 300 NS ns.sub.example.net.]`
	if got != want {
		t.Errorf("fromRRs = %s\nwant      %s", got, want)
	}
}
