package gatewayhosts_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/dns/gatewayhosts"
	"sluice.dev/sluice/internal/gateway"
)

// FuzzSources: whatever a tenant writes into a route's hostnames, a
// platform team into a listener's, or a Gateway's status holds, Sources
// never panics, gives only lower-case hosts without a trailing dot that
// are the listener's or a route's, and dns.Desired takes them.
func FuzzSources(f *testing.F) {
	f.Add("www.example.com", "shop.example.com", "192.0.2.1", "IPAddress")
	f.Add("*.apps.example.com", "A.apps.example.com.", "lb.example.net.", "Hostname")
	f.Add("", "*.example.com", "2001:db8::1%eth0", "")
	f.Add("*", "..", "not-an-ip", "NamedAddress")
	f.Fuzz(func(t *testing.T, listenerHost, routeHost, addr, addrType string) {
		from := gatewayv1.NamespacesFromAll
		l := gatewayv1.Listener{Name: "l", Protocol: gatewayv1.HTTPProtocolType, Port: 80,
			AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from}}}
		if listenerHost != "" {
			h := gatewayv1.Hostname(listenerHost)
			l.Hostname = &h
		}
		typ := gatewayv1.AddressType(addrType)
		g := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "sluice", Listeners: []gatewayv1.Listener{l}},
			Status: gatewayv1.GatewayStatus{
				Conditions: []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionTrue}},
				Addresses:  []gatewayv1.GatewayStatusAddress{{Type: &typ, Value: addr}},
			}}
		ns := gatewayv1.Namespace("infra")
		r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "r"},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web", Namespace: &ns}}},
				Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(routeHost)},
				Rules:           []gatewayv1.HTTPRouteRule{{}},
			}}
		class := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "sluice"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: gateway.ControllerName}}
		srcs, _ := gatewayhosts.Sources(gateway.Input{GatewayClasses: []*gatewayv1.GatewayClass{class},
			Gateways: []*gatewayv1.Gateway{g}, HTTPRoutes: []*gatewayv1.HTTPRoute{r}}, gatewayhosts.Options{})
		for _, s := range srcs {
			if s.Host == "" || s.Host != strings.ToLower(s.Host) || strings.HasSuffix(s.Host, ".") {
				t.Fatalf("source host %q", s.Host)
			}
			lh, rh := strings.ToLower(listenerHost), strings.ToLower(routeHost)
			if s.Host != lh && s.Host != rh {
				t.Fatalf("source host %q is neither the listener's %q nor the route's %q", s.Host, listenerHost, routeHost)
			}
		}
		dns.Desired(srcs, dns.DesiredOptions{Zones: []dns.Zone{{ID: "example.com", Name: "example.com"}}, TTL: 60})
	})
}
