package gatewaystatus_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/gatewaystatus"
	"sluice.dev/sluice/internal/gateway"
)

// newClient is a fake client holding objs, with the status subresource
// of every kind the reconciler writes.
func newClient(objs ...client.Object) client.Client {
	s := ct.Scheme()
	if err := gatewayv1.Install(s); err != nil {
		panic(err)
	}
	return fake.NewClientBuilder().WithScheme(s).
		WithStatusSubresource(&gatewayv1.GatewayClass{}, &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}, &gatewayv1.GRPCRoute{},
			&gatewayv1.BackendTLSPolicy{}, &v1alpha1.LoadBalancerBinding{}).
		WithObjects(objs...).Build()
}

// newReconciler is newClient(objs...) and a reconciler on it, the
// controller's namespace sluice-system.
func newReconciler(t *testing.T, objs ...client.Object) (client.Client, *gatewaystatus.Reconciler) {
	t.Helper()
	c := newClient(objs...)
	r, err := gatewaystatus.New(gatewaystatus.Options{Client: c, Namespace: "sluice-system"})
	if err != nil {
		t.Fatal(err)
	}
	return c, r
}

// reconcileGet runs one Reconcile of r, then reads the object key names
// into obj.
func reconcileGet(t *testing.T, r *gatewaystatus.Reconciler, c client.Client, key client.ObjectKey, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, obj); err != nil {
		t.Fatal(err)
	}
}

func fixtures() []client.Object {
	from := gatewayv1.NamespacesFromAll
	binding := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "sluice-system", Name: "lb"}}
	binding.Status.Addresses = []v1alpha1.LoadBalancerAddress{{IP: "192.0.2.10"}, {Hostname: "lb.example.net"}}
	other := gatewayv1.RouteParentStatus{ControllerName: "example.com/other", ParentRef: gatewayv1.ParentReference{Name: "theirs"},
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.Unix(1, 0)}}}
	route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web", Namespace: ptr(gatewayv1.Namespace("infra"))}, {Name: "theirs"}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: "private", Namespace: ptr(gatewayv1.Namespace("team-b")), Port: ptr(gatewayv1.PortNumber(80))}}}}}},
		}}
	route.Status.Parents = []gatewayv1.RouteParentStatus{other}
	return []client.Object{
		binding,
		&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "sluice"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: gateway.ControllerName}},
		&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "sluice",
			Listeners: []gatewayv1.Listener{{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80,
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from}}}}}},
		route,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "private"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
	}
}

func ptr[T any](v T) *T { return &v }

func condition(t *testing.T, conds []metav1.Condition, typ string) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, conds)
	}
	return c
}

// TestReconcile writes the class, Gateway and route statuses (addresses
// from the binding in the controller's namespace; the cross-namespace
// backendRef without a grant is RefNotPermitted), keeps another
// controller's route parent entry, and a second run writes nothing.
func TestReconcile(t *testing.T) {
	c := newClient(fixtures()...)
	clock := ct.NewClock()
	r, err := gatewaystatus.New(gatewaystatus.Options{Client: c, Namespace: "sluice-system", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	var gc gatewayv1.GatewayClass
	if err := c.Get(ctx, client.ObjectKey{Name: "sluice"}, &gc); err != nil {
		t.Fatal(err)
	}
	if cd := condition(t, gc.Status.Conditions, "Accepted"); cd.Status != metav1.ConditionTrue || cd.LastTransitionTime.IsZero() {
		t.Errorf("class Accepted = %+v", cd)
	}
	var gw gatewayv1.Gateway
	if err := c.Get(ctx, client.ObjectKey{Namespace: "infra", Name: "web"}, &gw); err != nil {
		t.Fatal(err)
	}
	if len(gw.Status.Addresses) != 2 || gw.Status.Addresses[0].Value != "192.0.2.10" || gw.Status.Addresses[1].Value != "lb.example.net" {
		t.Errorf("addresses = %+v", gw.Status.Addresses)
	}
	if cd := condition(t, gw.Status.Conditions, "Programmed"); cd.Status != metav1.ConditionTrue {
		t.Errorf("Programmed = %+v", cd)
	}
	if len(gw.Status.Listeners) != 1 || gw.Status.Listeners[0].AttachedRoutes != 1 {
		t.Errorf("listeners = %+v", gw.Status.Listeners)
	}
	var rt gatewayv1.HTTPRoute
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "app"}, &rt); err != nil {
		t.Fatal(err)
	}
	if len(rt.Status.Parents) != 2 || rt.Status.Parents[0].ControllerName != "example.com/other" {
		t.Fatalf("parents = %+v", rt.Status.Parents)
	}
	ours := rt.Status.Parents[1]
	if cd := condition(t, ours.Conditions, "ResolvedRefs"); cd.Status != metav1.ConditionFalse || cd.Reason != "RefNotPermitted" {
		t.Errorf("ResolvedRefs = %+v", cd)
	}
	if cd := condition(t, ours.Conditions, "Accepted"); cd.Status != metav1.ConditionTrue {
		t.Errorf("Accepted = %+v", cd)
	}

	// Idempotent: nothing changes on a second run, even later.
	before := rt.ResourceVersion + gw.ResourceVersion + gc.ResourceVersion
	clock.Advance(time.Minute)
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	_ = c.Get(ctx, client.ObjectKey{Name: "sluice"}, &gc)
	_ = c.Get(ctx, client.ObjectKey{Namespace: "infra", Name: "web"}, &gw)
	_ = c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "app"}, &rt)
	if after := rt.ResourceVersion + gw.ResourceVersion + gc.ResourceVersion; after != before {
		t.Errorf("second reconcile wrote statuses (%s -> %s)", before, after)
	}
}

// TestNoAddress: without a binding address the Gateway is not Programmed
// (AddressNotAssigned), and a route that leaves our Gateways loses our
// parent entry.
func TestNoAddress(t *testing.T) {
	objs := fixtures()
	objs[0].(*v1alpha1.LoadBalancerBinding).Status.Addresses = nil
	c, r := newReconciler(t, objs...)
	ctx := context.Background()
	var gw gatewayv1.Gateway
	reconcileGet(t, r, c, client.ObjectKey{Namespace: "infra", Name: "web"}, &gw)
	if cd := condition(t, gw.Status.Conditions, "Programmed"); cd.Status != metav1.ConditionFalse || cd.Reason != "AddressNotAssigned" {
		t.Errorf("Programmed = %+v", cd)
	}
	var rt gatewayv1.HTTPRoute
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "app"}, &rt); err != nil {
		t.Fatal(err)
	}
	rt.Spec.ParentRefs = rt.Spec.ParentRefs[1:]
	if err := c.Update(ctx, &rt); err != nil {
		t.Fatal(err)
	}
	reconcileGet(t, r, c, client.ObjectKey{Namespace: "team-a", Name: "app"}, &rt)
	if len(rt.Status.Parents) != 1 || rt.Status.Parents[0].ControllerName != "example.com/other" {
		t.Errorf("parents after detaching = %+v", rt.Status.Parents)
	}
}

// TestOwnAddresses: with spec.gatewayAddresses each Gateway gets one
// address of its own (the oldest first), a Gateway left without one is
// not Programmed, and a deleted Gateway's address goes to the next.
func TestOwnAddresses(t *testing.T) {
	objs := fixtures()
	objs[0].(*v1alpha1.LoadBalancerBinding).Spec.GatewayAddresses = []string{"198.51.100.1"}
	web := objs[2].(*gatewayv1.Gateway)
	web.CreationTimestamp = metav1.Unix(100, 0)
	second := web.DeepCopy()
	second.Name, second.CreationTimestamp = "second", metav1.Unix(200, 0)
	c, r := newReconciler(t, append(objs, second)...)
	ctx := context.Background()
	get := func(name string) *gatewayv1.Gateway {
		t.Helper()
		var gw gatewayv1.Gateway
		reconcileGet(t, r, c, client.ObjectKey{Namespace: "infra", Name: name}, &gw)
		return &gw
	}
	if gw := get("web"); len(gw.Status.Addresses) != 1 || gw.Status.Addresses[0].Value != "198.51.100.1" {
		t.Errorf("web addresses = %+v, want its own 198.51.100.1 only", gw.Status.Addresses)
	}
	gw := get("second")
	if len(gw.Status.Addresses) != 0 {
		t.Errorf("second addresses = %+v, want none (the pool is used up)", gw.Status.Addresses)
	}
	if cd := condition(t, gw.Status.Conditions, "Programmed"); cd.Status != metav1.ConditionFalse || cd.Reason != "AddressNotAssigned" {
		t.Errorf("second Programmed = %+v", cd)
	}
	if err := c.Delete(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	gw = get("second")
	if len(gw.Status.Addresses) != 1 || gw.Status.Addresses[0].Value != "198.51.100.1" {
		t.Errorf("second after web's deletion = %+v, want 198.51.100.1", gw.Status.Addresses)
	}
	if cd := condition(t, gw.Status.Conditions, "Programmed"); cd.Status != metav1.ConditionTrue {
		t.Errorf("second Programmed after = %+v", cd)
	}
}
