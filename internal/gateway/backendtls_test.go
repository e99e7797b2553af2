package gateway

import (
	"crypto/x509"
	"net"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/route"
)

// FuzzBackendTLS builds a BackendTLSPolicy of fuzzed fields (namespace,
// target, sectionName, hostname, CA reference and ConfigMap contents,
// well-known CAs) beside a route to a Service: Build must not panic, a
// policy reaches only Services of its own namespace, and a backend it
// makes TLS without Invalid has a DNS hostname and either a CA that
// parses or the system roots (wellKnownCACertificates System).
func FuzzBackendTLS(f *testing.F) {
	cert, _ := testKeyPair()
	f.Add("team-a", "Service", "app", "http", "app.example.com", "", "ConfigMap", "ca", string(cert), "")
	f.Add("team-a", "Service", "app", "", "app.example.com", "", "", "", "", "System")
	f.Add("team-b", "Service", "app", "", "x", "", "ConfigMap", "ca", string(cert), "")
	f.Add("team-a", "Service", "app", "", "*.example.com", "", "Secret", "ca", "-----BEGIN CERTIFICATE-----\n", "example.com/x")
	f.Add("team-a", "Gateway", "app", "admin", "A..b", "core", "ConfigMap", "missing", "", "System")
	f.Fuzz(func(t *testing.T, polNS, targetKind, target, section, hostname, refGroup, refKind, refName, caData, wellKnown string) {
		pol := &gatewayv1.BackendTLSPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: polNS, Name: "p"},
			Spec: gatewayv1.BackendTLSPolicySpec{
				TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{
					LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: gatewayv1.Kind(targetKind), Name: gatewayv1.ObjectName(target)},
				}},
				Validation: gatewayv1.BackendTLSPolicyValidation{Hostname: gatewayv1.PreciseHostname(hostname)},
			},
		}
		if section != "" {
			pol.Spec.TargetRefs[0].SectionName = ptr(gatewayv1.SectionName(section))
		}
		if refKind != "" {
			pol.Spec.Validation.CACertificateRefs = []gatewayv1.LocalObjectReference{{Group: gatewayv1.Group(refGroup), Kind: gatewayv1.Kind(refKind), Name: gatewayv1.ObjectName(refName)}}
		}
		if wellKnown != "" {
			pol.Spec.Validation.WellKnownCACertificates = ptr(gatewayv1.WellKnownCACertificatesType(wellKnown))
		}
		in := Input{
			GatewayClasses: []*gatewayv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "sluice"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: ControllerName}}},
			Gateways: []*gatewayv1.Gateway{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "sluice",
				Listeners: []gatewayv1.Listener{{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80,
					AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr(gatewayv1.NamespacesFromAll)}}}}}}},
			HTTPRoutes: []*gatewayv1.HTTPRoute{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r"}, Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web", Namespace: ptr(gatewayv1.Namespace("infra"))}}},
				Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
					Name: "app", Port: ptr(gatewayv1.PortNumber(80))}}}}}},
			}}},
			Services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}},
			ConfigMaps: []*corev1.ConfigMap{
				{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ca"}, Data: map[string]string{CAKey: caData}},
				{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "ca"}, Data: map[string]string{CAKey: caData}},
			},
			BackendTLSPolicies: []*gatewayv1.BackendTLSPolicy{pol},
		}
		res := Build(in, Options{})
		checkInvariants(t, in, res)
		for _, r := range res.Rules {
			tls := r.Backend.TLS
			if tls == nil {
				continue
			}
			if polNS != "team-a" {
				t.Fatalf("a policy of namespace %q reaches a Service of team-a: %+v", polNS, tls)
			}
			if tls.Invalid != "" {
				continue
			}
			if len(validation.IsDNS1123Subdomain(tls.Hostname)) > 0 {
				t.Errorf("hostname %q served", tls.Hostname)
			}
			if tls.CA == nil && wellKnown != "System" || tls.CA != nil && !x509.NewCertPool().AppendCertsFromPEM(tls.CA) {
				t.Errorf("CA %q served (wellKnown %q)", tls.CA, wellKnown)
			}
			if refKind != "" && refKind != "ConfigMap" || strings.Contains(tls.CASource, "team-b") {
				t.Errorf("CA from %q served", tls.CASource)
			}
		}
	})
}

// FuzzSubjectAltNames checks a BackendTLSPolicy's subjectAltNames of
// fuzzed types and values (two entries): no panic; either a message and
// no names, or names the proxies can use as they are: a lower-case DNS
// name (a leading "*." allowed, never an IP address) or an absolute URI
// of printable ASCII with a host, in its url.URL.String form, never
// duplicated.
func FuzzSubjectAltNames(f *testing.F) {
	f.Add("Hostname", "app.example.com", "", "URI", "", "spiffe://cluster.example.com/ns/a/sa/b")
	f.Add("Hostname", "*.Example.com", "", "Hostname", "*.example.com", "")
	f.Add("Hostname", "10.0.0.1", "", "URI", "", "https://[2001:db8::1]:8443/x")
	f.Add("URI", "", "urn:x:y", "URI", "", "spiffe:///a")
	f.Add("URI", "", "spiffe://a b/c", "IPAddress", "x", "")
	f.Add("URI", "x", "https://example.com:99999/%zz", "", "", "")
	f.Fuzz(func(t *testing.T, type1, host1, uri1, type2, host2, uri2 string) {
		in := []gatewayv1.SubjectAltName{
			{Type: gatewayv1.SubjectAltNameType(type1), Hostname: gatewayv1.Hostname(host1), URI: gatewayv1.AbsoluteURI(uri1)},
			{Type: gatewayv1.SubjectAltNameType(type2), Hostname: gatewayv1.Hostname(host2), URI: gatewayv1.AbsoluteURI(uri2)},
		}
		sans, msg := subjectAltNames(in)
		if msg != "" {
			if sans != nil {
				t.Fatalf("refused (%s) yet names %v", msg, sans)
			}
			return
		}
		if len(sans) == 0 || len(sans) > 2 {
			t.Fatalf("accepted with %d names: %v", len(sans), sans)
		}
		seen := map[route.SubjectAltName]bool{}
		for _, s := range sans {
			if seen[s] {
				t.Errorf("duplicate %v", s)
			}
			seen[s] = true
			switch {
			case s.Hostname != "" && s.URI != "", s.Hostname == "" && s.URI == "":
				t.Errorf("not exactly one of hostname and URI: %+v", s)
			case s.Hostname != "":
				name := strings.TrimPrefix(s.Hostname, "*.")
				if s.Hostname != strings.ToLower(s.Hostname) || len(validation.IsDNS1123Subdomain(name)) > 0 || net.ParseIP(name) != nil {
					t.Errorf("hostname %q accepted", s.Hostname)
				}
			default:
				u, err := url.Parse(s.URI)
				if err != nil || u.Scheme == "" || u.Host == "" || u.String() != s.URI || len(s.URI) > 4*maxURI ||
					strings.IndexFunc(s.URI, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0 {
					t.Errorf("URI %q accepted (%v)", s.URI, err)
				}
			}
		}
	})
}

// TestSubjectAltNameMatch: the proxies' matching of a certificate's SANs
// (route.MatchSubjectAltNames) against the names Build accepts.
func TestSubjectAltNameMatch(t *testing.T) {
	u, _ := url.Parse("spiffe://cluster.example.com/ns/team-a/sa/app")
	cert := &x509.Certificate{DNSNames: []string{"App.Internal.example.com", "*.wild.example.com"}, URIs: []*url.URL{u}}
	cert.Subject.CommonName = "cn.example.com"
	for _, tc := range []struct {
		san  gatewayv1.SubjectAltName
		want bool
	}{
		{gatewayv1.SubjectAltName{Type: "Hostname", Hostname: "app.internal.example.com"}, true},
		{gatewayv1.SubjectAltName{Type: "Hostname", Hostname: "*.internal.example.com"}, true},
		{gatewayv1.SubjectAltName{Type: "Hostname", Hostname: "x.wild.example.com"}, true},
		{gatewayv1.SubjectAltName{Type: "Hostname", Hostname: "x.y.wild.example.com"}, false},
		{gatewayv1.SubjectAltName{Type: "Hostname", Hostname: "wild.example.com"}, false},
		{gatewayv1.SubjectAltName{Type: "Hostname", Hostname: "*.example.com"}, false},
		{gatewayv1.SubjectAltName{Type: "Hostname", Hostname: "cn.example.com"}, false},
		{gatewayv1.SubjectAltName{Type: "URI", URI: "spiffe://cluster.example.com/ns/team-a/sa/app"}, true},
		{gatewayv1.SubjectAltName{Type: "URI", URI: "spiffe://cluster.example.com/ns/team-a/sa/other"}, false},
		{gatewayv1.SubjectAltName{Type: "URI", URI: "spiffe://app.internal.example.com"}, false},
	} {
		sans, msg := subjectAltNames([]gatewayv1.SubjectAltName{tc.san})
		if msg != "" {
			t.Fatalf("%+v refused: %s", tc.san, msg)
		}
		if got := route.MatchSubjectAltNames(cert, sans); got != tc.want {
			t.Errorf("%+v matches = %v, want %v", tc.san, got, tc.want)
		}
	}
}
