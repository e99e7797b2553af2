package dns_test

import (
	"slices"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/dns"
)

func TestNamespaceDomains(t *testing.T) {
	d := dns.NamespaceDomains{}
	for _, v := range []string{"team-a=a.example.com,*.a.example.com", "team-b=B.Example.com.", "team-a=*.shared.example.com"} {
		ns, pats, err := dns.ParseNamespaceDomains(v)
		if err != nil {
			t.Fatalf("ParseNamespaceDomains(%q): %v", v, err)
		}
		d.Add(ns, pats)
	}
	if !slices.Equal(d["team-b"], []string{"b.example.com"}) || len(d["team-a"]) != 3 {
		t.Fatalf("parsed = %v", d)
	}
	for _, c := range []struct {
		ns, host string
		want     bool
	}{
		{"team-a", "a.example.com", true},
		{"team-a", "x.a.example.com", true},
		{"team-a", "x.y.a.example.com", true},
		{"team-a", "*.a.example.com", true},
		{"team-a", "www.shared.example.com", true},
		{"team-a", "shared.example.com", false},
		{"team-a", "xa.example.com", false},
		{"team-a", "b.example.com", false},
		{"team-a", "*.example.com", false},
		{"team-b", "b.example.com", true},
		{"team-b", "x.b.example.com", false},
		{"team-c", "a.example.com", false},
	} {
		if got := d.Allows(c.ns, c.host); got != c.want {
			t.Errorf("Allows(%s, %s) = %v, want %v", c.ns, c.host, got, c.want)
		}
	}
	var none dns.NamespaceDomains
	if !none.Allows("any", "www.example.com") {
		t.Error("no allow-list refuses a host")
	}
	for _, bad := range []string{"", "team-a", "=a.example.com", "Team=a.example.com", "team-a=", "team-a=com",
		"team-a=a..example.com", "team-a=**.example.com", "team-a=a.*.example.com", "team-a=-a.example.com",
		"team-a=a_b.example.com", "team-a=a.example.com,", "team-a=" + strings.Repeat("a", 64) + ".example.com"} {
		if ns, p, err := dns.ParseNamespaceDomains(bad); err == nil {
			t.Errorf("ParseNamespaceDomains(%q) = %q %v, want an error", bad, ns, p)
		}
	}
}

// FuzzParseNamespaceDomains: any flag value parses or errors, never
// panics; what parses is a namespace and patterns that re-parse the
// same, and a pattern allows the name it names.
func FuzzParseNamespaceDomains(f *testing.F) {
	for _, s := range []string{"team-a=a.example.com,*.a.example.com", "x=y.z", "=", "a=*.", "a=b.c,,d.e", "a=B.C.", "a=*.*.b.c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, pats, err := dns.ParseNamespaceDomains(s)
		if err != nil {
			return
		}
		if ns == "" || len(pats) == 0 {
			t.Fatalf("%q parsed to %q %v", s, ns, pats)
		}
		ns2, pats2, err := dns.ParseNamespaceDomains(ns + "=" + strings.Join(pats, ","))
		if err != nil || ns2 != ns || !slices.Equal(pats, pats2) {
			t.Fatalf("%q: re-parse gave %q %v, %v; want %q %v", s, ns2, pats2, err, ns, pats)
		}
		d := dns.NamespaceDomains{ns: pats}
		for _, p := range pats {
			host := strings.Replace(p, "*.", "x.", 1)
			if !d.Allows(ns, host) || !d.Allows(ns, p) {
				t.Fatalf("pattern %q does not allow %q or itself", p, host)
			}
			if d.Allows(ns+"x", host) {
				t.Fatalf("pattern of %q allows namespace %q", ns, ns+"x")
			}
		}
	})
}
