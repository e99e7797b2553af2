package ingressstatus_test

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/ingressstatus"
	"sluice.dev/sluice/internal/controller/routeclaims"
	"sluice.dev/sluice/internal/gateway"
)

// TestStatusHostOwnedByRoute: an older HTTPRoute of another namespace,
// attached to a Gateway of a sluice GatewayClass, owns the host as it does
// for the proxies (translate.HostOwnership): the newer Ingress gets no
// status. Before the Gateway API CRDs are served (no Serve), or when the
// route is not attached, the Ingress owns the host.
func TestStatusHostOwnedByRoute(t *testing.T) {
	from := gatewayv1.NamespacesFromAll
	ns := gatewayv1.Namespace("infra")
	objs := []client.Object{
		ingress("i", className("sluice"), hostRule("shop.example.com")), // created at Unix(2)
		ct.Binding("a", ct.Publish(v1alpha1.PublishAddress{IP: "192.0.2.10"})),
		&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "fleet-b"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: gateway.ControllerName}},
		&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "fleet-b",
			Listeners: []gatewayv1.Listener{{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80, AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from}}}}}},
	}
	route := func(parent string) client.Object {
		return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r", CreationTimestamp: metav1.Unix(1, 0)},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(parent), Namespace: &ns}}},
				Hostnames:       []gatewayv1.Hostname{"shop.example.com"},
				Rules:           []gatewayv1.HTTPRouteRule{{}}, // no backendRefs: 500, still a claim
			}}
	}
	for _, tc := range []struct {
		name   string
		parent string
		served bool
		want   []string
	}{
		{"attached route owns the host", "web", true, nil},
		{"CRDs not served yet: Ingresses alone", "web", false, []string{"192.0.2.10"}},
		{"route not attached claims nothing", "elsewhere", true, []string{"192.0.2.10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ct.Scheme()
			if err := gatewayv1.Install(s); err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&networkingv1.Ingress{}).
				WithObjects(append(slices.Clone(objs), route(tc.parent))...).Build()
			routes := routeclaims.New(routeclaims.Options{Client: c})
			if tc.served {
				routes.Serve()
			}
			r, err := ingressstatus.New(ingressstatus.Options{Client: c, Namespace: ct.Namespace, Routes: routes})
			if err != nil {
				t.Fatal(err)
			}
			key := types.NamespacedName{Namespace: "app", Name: "i"}
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			var got networkingv1.Ingress
			if err := c.Get(context.Background(), key, &got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(addrs(&got), tc.want) {
				t.Errorf("status = %v, want %v", addrs(&got), tc.want)
			}
		})
	}
}
