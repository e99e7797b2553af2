package gateway

import (
	"crypto/x509"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
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
