package proxy

import (
	"net/http"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/internal/testcert"
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
	ca := testcert.NewAuthority(t)
	const spiffe = "spiffe://cluster.example.com/ns/team-a/sa/secure"
	withURI := tlsBackend(t, ca.Issue(t, "app.internal.example.com", spiffe))
	dnsOnly := tlsBackend(t, ca.Issue(t, "dns.internal.example.com"))

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
			in := backendTLSInput(tc.port, ca.PEM)
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
