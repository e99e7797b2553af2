package gateway

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// FuzzBuild builds a Gateway, an HTTPRoute of another namespace and a
// ReferenceGrant from fuzzed values (hostnames, paths, namespaces, kinds,
// allowedRoutes): Build must not panic, and the tenancy invariants hold
// (checkInvariants): no rule reaches another namespace's Service without a
// ReferenceGrant, no rule comes from a route no listener allows; rule hosts
// and paths are ones the routing table can serve.
func FuzzBuild(f *testing.F) {
	f.Add("*.example.com", "HTTP", int32(80), "All", "team-a", "shop.example.com", "PathPrefix", "/cart", "team-b", "Service", "team-a", "app", "http")
	f.Add("", "HTTPS", int32(443), "Same", "infra", "", "Exact", "/", "", "", "infra", "", "")
	f.Add("a.example.com", "HTTP", int32(80), "Selector", "team-a", "*.example.com", "RegularExpression", "/x.*", "team-a", "Bucket", "team-c", "other", "nope")
	f.Add("A.EXAMPLE.COM", "HTTP", int32(80), "All", "team-a", "A.Example.Com.", "PathPrefix", "//..//", "team-b", "Service", "team-b", "app", "")
	f.Fuzz(func(t *testing.T, lHost, proto string, port int32, from, routeNS, rHost, pathType, path, beNS, beKind, grantFrom, grantName, section string) {
		gw := &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "sluice", Listeners: []gatewayv1.Listener{{
				Name: "http", Protocol: gatewayv1.ProtocolType(proto), Port: port,
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{
					From:     ptr(gatewayv1.FromNamespaces(from)),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"access": "yes"}},
				}},
				TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "cert"}}},
			}}},
		}
		if lHost != "" {
			gw.Spec.Listeners[0].Hostname = ptr(gatewayv1.Hostname(lHost))
		}
		rt := &gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: routeNS, Name: "r"},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
					Name: "web", Namespace: ptr(gatewayv1.Namespace("infra")),
				}}},
				Rules: []gatewayv1.HTTPRouteRule{{
					Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
						Type: ptr(gatewayv1.PathMatchType(pathType)), Value: ptr(path)}}},
					BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
						Kind: ptr(gatewayv1.Kind(beKind)), Name: "app", Namespace: ptr(gatewayv1.Namespace(beNS)), Port: ptr(gatewayv1.PortNumber(80)),
					}}}},
				}},
			},
		}
		if rHost != "" {
			rt.Spec.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(rHost)}
		}
		if section != "" {
			rt.Spec.ParentRefs[0].SectionName = ptr(gatewayv1.SectionName(section))
		}
		grant := &gatewayv1.ReferenceGrant{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "g"},
			Spec: gatewayv1.ReferenceGrantSpec{
				From: []gatewayv1.ReferenceGrantFrom{{Group: Group, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(grantFrom)}},
				To:   []gatewayv1.ReferenceGrantTo{{Kind: "Service", Name: ptr(gatewayv1.ObjectName(grantName))}},
			},
		}
		var services []*corev1.Service
		for _, ns := range []string{"infra", "team-a", "team-b", routeNS, beNS} {
			services = append(services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}})
		}
		in := Input{
			GatewayClasses:  []*gatewayv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "sluice"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: ControllerName}}},
			Gateways:        []*gatewayv1.Gateway{gw},
			HTTPRoutes:      []*gatewayv1.HTTPRoute{rt},
			ReferenceGrants: []*gatewayv1.ReferenceGrant{grant},
			Namespaces:      []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"access": "yes"}}}},
			Services:        services,
			Secrets:         []*corev1.Secret{testTLSSecret("infra", "cert")},
		}
		res := Build(in, Options{})
		checkInvariants(t, in, res)
		for _, r := range res.Rules {
			if r.Host != strings.ToLower(r.Host) || (r.Host != "" && checkHostname(r.Host) != "") {
				t.Errorf("rule host %q is not a valid lower-case hostname", r.Host)
			}
			if checkPath(r.Path) != "" {
				t.Errorf("rule path %q is invalid", r.Path)
			}
			if from == "Selector" && routeNS != "team-a" && routeNS != "infra" {
				t.Errorf("route of namespace %q attached through a selector that does not select it", routeNS)
			}
			if from != "All" && from != "Selector" && routeNS != "infra" {
				t.Errorf("route of namespace %q attached to a listener allowing %q", routeNS, from)
			}
		}

		// With an address pool and an extra port: the Gateway's status
		// address (fuzzed) puts its rules in that scope only if the pool
		// has it, and a port scope is only ever the extra port.
		gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Value: rHost}, {Type: ptr(gatewayv1.IPAddressType), Value: "192.0.2.10"}}
		pool := Options{Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}, ExtraHTTPPorts: []int32{8080}, ExtraHTTPSPorts: []int32{8443}}
		res = Build(in, pool)
		checkInvariants(t, in, res)
		for _, r := range res.Rules {
			if r.Scope != "192.0.2.10" {
				t.Errorf("rule in scope %q, want the Gateway's address", r.Scope)
			}
			if r.Port != 0 && r.Port != port || r.Port != 0 && r.Port != 8080 && r.Port != 8443 {
				t.Errorf("rule on port %d (listener port %d)", r.Port, port)
			}
		}
		gw.Status.Addresses = nil
		if res := Build(in, pool); len(res.Rules)+len(res.Certificates) != 0 {
			t.Errorf("a Gateway without an address of the pool serves %d rules, %d certificates", len(res.Rules), len(res.Certificates))
		}
	})
}

// FuzzIntersect checks the hostname intersection: every host it yields is
// covered by both the listener's hostname and one of the route's.
func FuzzIntersect(f *testing.F) {
	f.Add("*.example.com", "a.example.com", "*.b.example.com")
	f.Add("", "", "x.org")
	f.Add("a.example.com", "*.example.com", "a.example.com")
	f.Fuzz(func(t *testing.T, lh, r1, r2 string) {
		for _, h := range []string{lh, r1, r2} {
			if h != "" && checkHostname(h) != "" {
				return
			}
		}
		routeHosts := []string{r1, r2}
		for _, h := range intersect(lh, routeHosts) {
			if !covers(lh, h) {
				t.Errorf("intersect(%q, %q) yields %q, not covered by the listener", lh, routeHosts, h)
			}
			if !covers(r1, h) && !covers(r2, h) {
				t.Errorf("intersect(%q, %q) yields %q, not covered by the route", lh, routeHosts, h)
			}
		}
	})
}

// covers reports whether pattern ("" any, "*.x" any name under x) covers
// host (a name or a wildcard).
func covers(pattern, host string) bool {
	switch {
	case pattern == "":
		return true
	case pattern == host:
		return true
	case strings.HasPrefix(pattern, "*."):
		return strings.HasSuffix(host, pattern[1:]) && len(host) > len(pattern)-1
	}
	return false
}

// testTLSSecret is a kubernetes.io/tls Secret with a valid key pair.
func testTLSSecret(ns, name string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS}
	withTestKeyPair(s)
	return s
}
