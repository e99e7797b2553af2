package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

func TestSelfSignedVerifies(t *testing.T) {
	crt, key := SelfSigned(t, "a.example.com", "b.example.com")
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	for _, name := range []string{"a.example.com", "b.example.com"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "c.example.com", Roots: roots}); err == nil {
		t.Error("c.example.com verified")
	}
	crt2, _ := SelfSigned(t, "a.example.com")
	if string(crt2) == string(crt) {
		t.Error("two calls made the same certificate")
	}
}

// TestAuthority: a certificate Issue makes verifies against the
// authority's PEM for its DNS name and carries its URIs.
func TestAuthority(t *testing.T) {
	a := NewAuthority(t)
	c := a.Issue(t, "app.example.com", "spiffe://example.com/app")
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(a.PEM) {
		t.Fatal("the authority's PEM holds no certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "app.example.com"}); err != nil {
		t.Errorf("verifying: %v", err)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://example.com/app" {
		t.Errorf("URIs = %v", leaf.URIs)
	}
}
