package problems

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/routeclaims"
	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/translate"
)

// TestRouteOwnsHost: an older HTTPRoute of another namespace attached to a
// sluice Gateway owns the host, so the newer Ingress is told
// HostOwnedElsewhere, as the proxies refuse it.
func TestRouteOwnsHost(t *testing.T) {
	s := ct.Scheme()
	if err := gatewayv1.Install(s); err != nil {
		t.Fatal(err)
	}
	from := gatewayv1.NamespacesFromAll
	ns := gatewayv1.Namespace("infra")
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		ingress("late", "web", nil, 2), service("web"),
		&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "sluice"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: gateway.ControllerName}},
		&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "sluice",
			Listeners: []gatewayv1.Listener{{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80, AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from}}}}}},
		&gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r", CreationTimestamp: metav1.Unix(1, 0)},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web", Namespace: &ns}}},
				Hostnames:       []gatewayv1.Hostname{"shop.example.com"},
				Rules:           []gatewayv1.HTTPRouteRule{{}},
			}},
	).Build()
	routes := routeclaims.New(routeclaims.Options{Client: c})
	routes.Serve()
	rec := &ct.Recorder{}
	r, err := New(Options{Client: c, Notices: &ct.Notices{Recorder: rec}, Routes: routes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range rec.Events() {
		if strings.HasSuffix(e.Object, "default/late") {
			got[e.Reason] = e.Note
		}
		if strings.Contains(e.Object, "HTTPRoute") || strings.Contains(e.Object, "team-a/r") {
			t.Errorf("an Event on the route (the gateway-status reconciler reports routes): %+v", e)
		}
	}
	if got[translate.ReasonHostOwnedElsewhere] == "" {
		t.Errorf("events on default/late %v; want %s", got, translate.ReasonHostOwnedElsewhere)
	}
}
