package route

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"sluice.dev/sluice/internal/testcert"
)

func keyPair(t *testing.T, names ...string) *tls.Certificate {
	t.Helper()
	c, k := testcert.SelfSigned(t, names...)
	kp, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	if kp.Leaf == nil {
		if kp.Leaf, err = x509.ParseCertificate(kp.Certificate[0]); err != nil {
			t.Fatal(err)
		}
	}
	return &kp
}

// TestMisdirected: a TLS connection of one tenant never carries a request
// for another tenant's host, nor for a name its certificate does not cover.
func TestMisdirected(t *testing.T) {
	shop := keyPair(t, "shop.example.com", "www.example.com")
	wild := keyPair(t, "*.b.example.com")
	def := keyPair(t, "default.invalid")
	tbl := New(Config{
		Certificates: []Certificate{
			{Hosts: []string{"shop.example.com"}, Source: "a/shop", Cert: shop},
			{Hosts: []string{"*.b.example.com"}, Source: "b/wild", Cert: wild},
		},
		DefaultCertificate: &Certificate{Source: "system/default", Cert: def},
		Owners: []HostOwner{
			{Host: "shop.example.com", Namespace: "a"}, {Host: "www.example.com", Namespace: "a"},
			{Host: "api.example.com", Namespace: "a"}, {Host: "*.b.example.com", Namespace: "b"},
			{Host: "a.b.example.com", Namespace: "a"},
		},
		NoWildcardCertificate: []string{"a.b.example.com"},
	})
	for _, tc := range []struct {
		sni, host string
		want      bool
	}{
		{"shop.example.com", "shop.example.com", false},
		{"shop.example.com", "Shop.Example.com:8443", false},
		{"", "x.b.example.com", false},                // no SNI: routed by Host
		{"shop.example.com", "", false},               // no Host (HTTP/1.0)
		{"shop.example.com", "x.b.example.com", true}, // another owner
		{"x.b.example.com", "shop.example.com", true},
		{"shop.example.com", "www.example.com", false},      // same owner, covered
		{"shop.example.com", "api.example.com", true},       // same owner, not covered
		{"x.b.example.com", "y.b.example.com", false},       // the wildcard covers both
		{"unknown.example.org", "other.example.org", false}, // default certificate, no owners
		{"unknown.example.org", "shop.example.com", true},   // default certificate, owned host
		{"api.example.com", "www.example.com", false},       // default certificate, same owner
		{"a.b.example.com", "x.b.example.com", true},        // the owner of the name, not of the wildcard
		{"127.0.0.1", "shop.example.com", false},            // an IP is no server name: as without SNI
		{"::1", "shop.example.com", false},
		{"[2001:db8::1]", "x.b.example.com", false},
	} {
		if got := tbl.Misdirected(tc.sni, tc.host); got != tc.want {
			t.Errorf("Misdirected(%q, %q) = %v, want %v", tc.sni, tc.host, got, tc.want)
		}
	}
	if got := tbl.Certificate("a.b.example.com"); got != def {
		t.Error("a.b.example.com (NoWildcardCertificate) got the wildcard certificate, want the default")
	}
	if got := tbl.Certificate("x.b.example.com"); got != wild {
		t.Error("x.b.example.com did not get the wildcard certificate")
	}
	if got, want := tbl.Owner("Y.B.example.com."), "b"; got != want {
		t.Errorf("Owner(wildcard) = %q, want %q", got, want)
	}
	if got := New(Config{}).Misdirected("a.example.com", "b.example.com"); got {
		t.Error("a table without owners or certificates refused a request")
	}
}

func BenchmarkMisdirectedSameHost(b *testing.B) {
	tbl := New(Config{Owners: []HostOwner{{Host: "shop.example.com", Namespace: "a"}}})
	b.ReportAllocs()
	for b.Loop() {
		if tbl.Misdirected("shop.example.com", "shop.example.com:443") {
			b.Fatal("misdirected")
		}
	}
}
