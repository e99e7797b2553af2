package dns_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	networkingv1 "k8s.io/api/networking/v1"

	ct "sluice.dev/sluice/internal/controller/controllertest"
	dnsctl "sluice.dev/sluice/internal/controller/dns"
	"sluice.dev/sluice/internal/controller/ingressstatus"
	"sluice.dev/sluice/internal/controller/routeclaims"
	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/dns/dnstest"
	"sluice.dev/sluice/internal/gateway"
)

// newGatewayEnv is newEnv with the Gateway API types and a route reader
// that the CRDs are served to (as --gateway-api once it found them).
func newGatewayEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	e := &env{t: t, p: dnstest.New(zone), clock: ct.NewClock()}
	var routes *routeclaims.Reader
	e.c, routes = gatewayClient(t, objs...)
	e.opts = dnsctl.Options{OwnerID: "test", Keys: keys, TTL: 60 * time.Second, DeleteDelay: 2 * time.Minute,
		Serving: ingressstatus.ServingOptions{Namespace: ct.Namespace}, Routes: routes}
	e.restart()
	return e
}

// gatewayClient is a fake client with the Gateway API types holding objs,
// and a route reader the CRDs are served to.
func gatewayClient(t *testing.T, objs ...client.Object) (client.WithWatch, *routeclaims.Reader) {
	t.Helper()
	s := ct.Scheme()
	if err := gatewayv1.Install(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&networkingv1.Ingress{}, &gatewayv1.Gateway{}).
		WithObjects(objs...).Build()
	routes := routeclaims.New(routeclaims.Options{Client: c})
	routes.Serve()
	routes.ServeGRPCRoutes(true)
	return c, routes
}

func gatewayClass() *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "sluice"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: gateway.ControllerName}}
}

// gw is Gateway infra/web with an HTTP listener for each hostname (any
// host for ""), taking routes of every namespace, Programmed at addrs
// (not Programmed without).
func gw(hostnames []string, addrs ...string) *gatewayv1.Gateway {
	from := gatewayv1.NamespacesFromAll
	g := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web", UID: "uid-gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "sluice"}}
	for i, hostname := range hostnames {
		l := gatewayv1.Listener{Name: gatewayv1.SectionName(fmt.Sprintf("l%d", i)), Protocol: gatewayv1.HTTPProtocolType, Port: 80,
			AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from}}}
		if hostname != "" {
			h := gatewayv1.Hostname(hostname)
			l.Hostname = &h
		}
		g.Spec.Listeners = append(g.Spec.Listeners, l)
	}
	setAddresses(g, addrs...)
	return g
}

func setAddresses(g *gatewayv1.Gateway, addrs ...string) {
	g.Status.Addresses = nil
	st := metav1.ConditionFalse
	if len(addrs) > 0 {
		st = metav1.ConditionTrue
	}
	g.Status.Conditions = []metav1.Condition{{Type: string(gatewayv1.GatewayConditionProgrammed), Status: st, Reason: "X", LastTransitionTime: metav1.Unix(1, 0)}}
	for _, a := range addrs {
		g.Status.Addresses = append(g.Status.Addresses, gatewayv1.GatewayStatusAddress{Value: a})
	}
}

// httpRoute is HTTPRoute ns/name attached to infra/web for hosts,
// created at second created.
func httpRoute(ns, name string, created int64, hosts ...string) *gatewayv1.HTTPRoute {
	gwns := gatewayv1.Namespace("infra")
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.Unix(created, 0)},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web", Namespace: &gwns}}},
			Rules:           []gatewayv1.HTTPRouteRule{{}},
		}}
	for _, h := range hosts {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	return r
}

// TestGatewayRecords: a Programmed Gateway's listener hostname and the
// hosts of the routes attached to it point at its status.addresses, each
// owned (TXT) by its object, with Events on it; a route host an older
// Ingress of another namespace owns gets no record and a
// HostOwnedElsewhere Event on the route; addresses gone leave the
// records as they are; a route deleted loses its record after the delete
// delay, the Gateway's stays.
func TestGatewayRecords(t *testing.T) {
	old := ingress("old", "taken.example.com")
	old.CreationTimestamp = metav1.Unix(1, 0)
	e := newGatewayEnv(t, gatewayClass(), gw([]string{"www.example.com", ""}, "192.0.2.20"),
		httpRoute("team", "shop", 10, "www.example.com", "shop.example.com", "taken.example.com"), old, lbBinding("192.0.2.10"))
	e.mustReconcile()
	for host, want := range map[string]string{"www.example.com": "192.0.2.20", "shop.example.com": "192.0.2.20", "taken.example.com": "192.0.2.10"} {
		if got := e.a(host); !slices.Equal(got, []string{want}) {
			t.Errorf("A %s = %v, want [%s]", host, got, want)
		}
	}
	if o := e.owner("www.example.com"); o == nil || o.Ingress != (dns.Ref{Kind: dns.KindHTTPRoute, Namespace: "team", Name: "shop", UID: "uid-shop"}) {
		t.Errorf("owner of www.example.com = %+v, want the route (its namespace owns the host)", o)
	}
	if n := e.rec.Count("*v1.HTTPRoute team/shop", "DNSPublished"); n != 2 {
		t.Errorf("%d DNSPublished Events on the route, want 2: %+v", n, e.rec.Events())
	}
	if n := e.rec.Count("*v1.HTTPRoute team/shop", "HostOwnedElsewhere"); n != 1 {
		t.Errorf("%d HostOwnedElsewhere Events on the route, want 1: %+v", n, e.rec.Events())
	}

	// The Gateway loses its address: nothing changes, nothing is deleted.
	ctx := context.Background()
	var g gatewayv1.Gateway
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "infra", Name: "web"}, &g); err != nil {
		t.Fatal(err)
	}
	setAddresses(&g)
	if err := e.c.Status().Update(ctx, &g); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	e.mustReconcile()
	if got := e.a("www.example.com"); !slices.Equal(got, []string{"192.0.2.20"}) {
		t.Fatalf("A www.example.com = %v while the Gateway has no address, want it kept", got)
	}

	// A new address is followed.
	setAddresses(&g, "192.0.2.21")
	if err := e.c.Status().Update(ctx, &g); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile()
	if got := e.a("www.example.com"); !slices.Equal(got, []string{"192.0.2.21"}) {
		t.Fatalf("A www.example.com = %v, want the Gateway's new address", got)
	}

	// The route goes: the Gateway's listener hostname is its own now.
	if err := e.c.Delete(ctx, httpRoute("team", "shop", 10)); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile()
	if o := e.owner("www.example.com"); o == nil || o.Ingress.Kind != dns.KindGateway || !o.UnwantedSince.IsZero() {
		t.Fatalf("owner of www.example.com = %+v, want the Gateway, wanted", o)
	}
	if o := e.owner("shop.example.com"); o == nil || o.UnwantedSince.IsZero() {
		t.Fatalf("owner of shop.example.com = %+v, want stamped unwanted", o)
	}

	// The Gateway goes: deleted after the delay, not before.
	if err := e.c.Delete(ctx, &g); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile()
	if e.a("www.example.com") == nil {
		t.Fatal("www.example.com deleted at once, want after the delete delay")
	}
	e.clock.Advance(3 * time.Minute)
	e.mustReconcile()
	for _, h := range []string{"www.example.com", "shop.example.com"} {
		if e.a(h) != nil || e.owner(h) != nil {
			t.Fatalf("%s still there after the delete delay", h)
		}
	}
	if n := e.rec.Count("*v1.Gateway infra/web", "DNSPublished"); n != 1 {
		t.Errorf("%d DNSPublished Events on the Gateway, want 1: %+v", n, e.rec.Events())
	}
	if got := e.a("taken.example.com"); got == nil {
		t.Error("the Ingress's host was deleted")
	}
}

// TestGatewayRecordsNeedServedCRDs: without the Gateway API (no reader)
// or before the CRDs are served, Gateways give no records.
func TestGatewayRecordsNeedServedCRDs(t *testing.T) {
	for _, served := range []bool{false, true} {
		e := newGatewayEnv(t, gatewayClass(), gw([]string{"www.example.com"}, "192.0.2.20"), httpRoute("team", "shop", 10, "www.example.com"))
		if !served {
			e.opts.Routes = routeclaims.New(routeclaims.Options{Client: e.c})
			e.restart()
		}
		e.mustReconcile()
		if got := e.a("www.example.com") != nil; got != served {
			t.Errorf("served=%v: www.example.com published: %v", served, got)
		}
	}
}
