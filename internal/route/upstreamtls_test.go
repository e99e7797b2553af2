package route

import (
	"crypto/x509"
	"net/url"
	"testing"
)

// TestDNSNameMatch: equal names, or a wildcard on either side standing
// for exactly one non-empty label of the other; never two wildcards, a
// bare "*." or more labels.
func TestDNSNameMatch(t *testing.T) {
	for _, tc := range []struct {
		have, want string
		match      bool
	}{
		{"a.example.com", "a.example.com", true},
		{"*.example.com", "a.example.com", true},
		{"a.example.com", "*.example.com", true},
		{"*.example.com", "*.example.com", true},
		{"*.example.com", "a.b.example.com", false},
		{"*.example.com", "example.com", false},
		{"*.example.com", ".example.com", false},
		{"*.a.example.com", "*.example.com", false},
		{"*.", "a.", false},
		{"a.example.com", "b.example.com", false},
	} {
		if got := dnsNameMatch(tc.have, tc.want); got != tc.match {
			t.Errorf("dnsNameMatch(%q, %q) = %v, want %v", tc.have, tc.want, got, tc.match)
		}
	}
}

// TestUpstreamTLSKey: configurations that verify differently (another
// SAN, of another type, or none) have different keys.
func TestUpstreamTLSKey(t *testing.T) {
	base := UpstreamTLS{ServerName: "a.example.com", CA: []byte("ca")}
	keys := map[string]string{}
	for name, sans := range map[string][]SubjectAltName{
		"none":     nil,
		"dns":      {{Hostname: "x.example.com"}},
		"uri":      {{URI: "x.example.com"}},
		"two":      {{Hostname: "x.example.com"}, {URI: "spiffe://x/y"}},
		"two-swap": {{URI: "spiffe://x/y"}, {Hostname: "x.example.com"}},
	} {
		c := base
		c.SubjectAltNames = sans
		k := c.Key()
		if other, dup := keys[k]; dup {
			t.Errorf("%s and %s share the key %q", name, other, k)
		}
		keys[k] = name
	}
	var none *UpstreamTLS
	if none.Key() != "" {
		t.Errorf("nil key %q", none.Key())
	}
}

// TestMatchSubjectAltNames: a URI matches URI SANs only, a hostname DNS
// SANs only (case-insensitively in the certificate), never the common
// name.
func TestMatchSubjectAltNames(t *testing.T) {
	u, _ := url.Parse("spiffe://x.example.com/app")
	cert := &x509.Certificate{DNSNames: []string{"App.Example.com"}, URIs: []*url.URL{u}}
	cert.Subject.CommonName = "cn.example.com"
	for _, tc := range []struct {
		sans  []SubjectAltName
		match bool
	}{
		{[]SubjectAltName{{Hostname: "app.example.com"}}, true},
		{[]SubjectAltName{{URI: "spiffe://x.example.com/app"}}, true},
		{[]SubjectAltName{{URI: "app.example.com"}}, false},
		{[]SubjectAltName{{Hostname: "x.example.com"}}, false},
		{[]SubjectAltName{{Hostname: "cn.example.com"}}, false},
		{[]SubjectAltName{{Hostname: "cn.example.com"}, {URI: "spiffe://x.example.com/app"}}, true},
		{nil, false},
	} {
		if got := MatchSubjectAltNames(cert, tc.sans); got != tc.match {
			t.Errorf("%v: match = %v, want %v", tc.sans, got, tc.match)
		}
	}
}
