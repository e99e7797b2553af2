package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/internal/translate"
)

// TestBackendTLSPolicySANs: a BackendTLSPolicy with subjectAltNames has
// its backend's certificate verified against those, its hostname being
// the SNI only, with real TLS backends: one whose certificate carries a
// URI SAN (a SPIFFE ID) and a DNS SAN, one with a DNS SAN only, both
// signed by the policy's CA. A matching URI or DNS SAN answers 200 (and
// the backend saw the hostname as SNI); a SAN the certificate lacks, the
// hostname itself when it is not among the SANs, or a URI SAN against the
// DNS-only certificate fails the handshake: 502, never plain HTTP.
func TestBackendTLSPolicySANs(t *testing.T) {
	ca, caKey, caPEM := testCA(t)
	const spiffe = "spiffe://cluster.example.com/ns/team-a/sa/secure"
	backend := func(dns string, uris ...string) int32 {
		var plain atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.TLS == nil {
				plain.Add(1)
				return
			}
			w.Write([]byte(r.TLS.ServerName))
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{leafCert(t, ca, caKey, dns, uris...)}}
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
		srv.StartTLS()
		t.Cleanup(func() {
			srv.Close()
			if n := plain.Load(); n > 0 {
				t.Errorf("%d requests reached backend %s in plain HTTP", n, dns)
			}
		})
		_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
		port, _ := strconv.Atoi(portStr)
		return int32(port)
	}
	withURI := backend("app.internal.example.com", spiffe)
	dnsOnly := backend("dns.internal.example.com")

	p, front, c := front(t, Options{})
	for _, tc := range []struct {
		name   string
		port   int32
		sans   []gatewayv1.SubjectAltName
		status int
	}{
		{"URI SAN matches", withURI, []gatewayv1.SubjectAltName{{Type: "URI", URI: spiffe}}, 200},
		{"DNS SAN matches the URI certificate", withURI, []gatewayv1.SubjectAltName{{Type: "Hostname", Hostname: "app.internal.example.com"}}, 200},
		{"one of two SANs matches", withURI, []gatewayv1.SubjectAltName{{Type: "URI", URI: spiffe + "-other"}, {Type: "Hostname", Hostname: "*.internal.example.com"}}, 200},
		{"URI SAN differs", withURI, []gatewayv1.SubjectAltName{{Type: "URI", URI: spiffe + "-other"}}, 502},
		{"DNS SAN matches the DNS-only certificate", dnsOnly, []gatewayv1.SubjectAltName{{Type: "Hostname", Hostname: "dns.internal.example.com"}}, 200},
		{"URI SAN against the DNS-only certificate", dnsOnly, []gatewayv1.SubjectAltName{{Type: "URI", URI: spiffe}}, 502},
		{"DNS SAN differs", dnsOnly, []gatewayv1.SubjectAltName{{Type: "Hostname", Hostname: "other.internal.example.com"}}, 502},
		// The hostname is in neither certificate: with SANs it is the SNI
		// only; without, it is verified (and fails).
		{"no SANs: the hostname is verified", dnsOnly, nil, 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := backendTLSInput(tc.port, caPEM)
			in.Gateway.BackendTLSPolicies[0].Spec.Validation.Hostname = "sni.example.com"
			in.Gateway.BackendTLSPolicies[0].Spec.Validation.SubjectAltNames = tc.sans
			cfg, problems := translate.Build(in, translate.Options{AllowLoopbackEndpoints: true, AllowEndpointsWithoutPod: true,
				Gateway: &gateway.Options{GatewayClass: "sluice"}})
			if len(problems) > 0 {
				t.Fatalf("problems: %v", problems)
			}
			p.Update(route.New(cfg))
			req, _ := http.NewRequest("GET", front.URL+"/", nil)
			req.Host = "app.example.com"
			r := do(t, c, req)
			if r.status != tc.status || tc.status == 200 && r.body != "sni.example.com" {
				t.Errorf("got %d %q, want %d (SNI sni.example.com)", r.status, r.body, tc.status)
			}
		})
	}
}

// testCA is a CA certificate, its key, and the certificate as PEM.
func testCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// leafCert is a server certificate for DNS name dns and the URIs, signed
// by ca.
func leafCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, dns string, uris ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: dns}, DNSNames: []string{dns},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
