package gatewaystatus_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/gatewaystatus"
)

// TestGRPCRoutes: with GRPCRoutes served, a GRPCRoute gets sluice's parent
// entry (ResolvedRefs=False RefNotPermitted for a backend of another
// namespace without a grant), and counts in the listener's
// attachedRoutes; without, it is not read.
func TestGRPCRoutes(t *testing.T) {
	for _, served := range []bool{true, false} {
		s := ct.Scheme()
		if err := gatewayv1.Install(s); err != nil {
			t.Fatal(err)
		}
		grpc := echoGRPCRoute()
		c, r := grpcFixture(t, s, grpc)
		r.ServeGRPCRoutes(served)
		ctx := context.Background()
		if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
			t.Fatal(err)
		}
		var got gatewayv1.GRPCRoute
		if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "echo"}, &got); err != nil {
			t.Fatal(err)
		}
		var gw gatewayv1.Gateway
		if err := c.Get(ctx, client.ObjectKey{Namespace: "infra", Name: "web"}, &gw); err != nil {
			t.Fatal(err)
		}
		if !served {
			if len(got.Status.Parents) != 0 || gw.Status.Listeners[0].AttachedRoutes != 1 {
				t.Errorf("GRPCRoutes not served: parents %+v, attachedRoutes %d; want none and 1", got.Status.Parents, gw.Status.Listeners[0].AttachedRoutes)
			}
			continue
		}
		if len(got.Status.Parents) != 1 {
			t.Fatalf("parents = %+v", got.Status.Parents)
		}
		if cd := condition(t, got.Status.Parents[0].Conditions, "ResolvedRefs"); cd.Status != metav1.ConditionFalse || cd.Reason != "RefNotPermitted" {
			t.Errorf("ResolvedRefs = %+v", cd)
		}
		if cd := condition(t, got.Status.Parents[0].Conditions, "Accepted"); cd.Status != metav1.ConditionTrue {
			t.Errorf("Accepted = %+v", cd)
		}
		if n := gw.Status.Listeners[0].AttachedRoutes; n != 2 {
			t.Errorf("attachedRoutes = %d, want 2 (the HTTPRoute and the GRPCRoute)", n)
		}
	}
}

// echoGRPCRoute is a GRPCRoute attached to infra/web with a backend of
// another namespace and no grant.
func echoGRPCRoute() *gatewayv1.GRPCRoute {
	return &gatewayv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "echo"},
		Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web", Namespace: ptr(gatewayv1.Namespace("infra"))}}},
			Rules: []gatewayv1.GRPCRouteRule{{BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: "private", Namespace: ptr(gatewayv1.Namespace("team-b")), Port: ptr(gatewayv1.PortNumber(80))}}}}}},
		}}
}

// grpcFixture is a fake client with the fixtures and grpc, and a
// reconciler on it.
func grpcFixture(t *testing.T, s *runtime.Scheme, grpc *gatewayv1.GRPCRoute) (client.Client, *gatewaystatus.Reconciler) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(s).
		WithStatusSubresource(&gatewayv1.GatewayClass{}, &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}, &gatewayv1.GRPCRoute{}, &v1alpha1.LoadBalancerBinding{}).
		WithObjects(append(fixtures(), grpc)...).Build()
	r, err := gatewaystatus.New(gatewaystatus.Options{Client: c, Namespace: "sluice-system"})
	if err != nil {
		t.Fatal(err)
	}
	return c, r
}

// TestWatchGRPCRoutesLater: a reconciler set up without GRPCRoutes (their
// CRD was not served yet) adds their watch once, and from then on reads
// them and writes their statuses; before Setup it refuses, and a failing
// watch is reported.
func TestWatchGRPCRoutesLater(t *testing.T) {
	s := ct.Scheme()
	if err := gatewayv1.Install(s); err != nil {
		t.Fatal(err)
	}
	c, r := grpcFixture(t, s, echoGRPCRoute())
	ctx := context.Background()
	if err := r.WatchGRPCRoutes(); err == nil {
		t.Fatal("watched GRPCRoutes before Setup")
	}
	parents := func() int {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
			t.Fatal(err)
		}
		var got gatewayv1.GRPCRoute
		if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "echo"}, &got); err != nil {
			t.Fatal(err)
		}
		return len(got.Status.Parents)
	}
	watches := 0
	r.SetWatchGRPC(func() error { watches++; return nil })
	if n := parents(); n != 0 || watches != 0 {
		t.Fatalf("before WatchGRPCRoutes: %d parents, %d watches; want 0, 0", n, watches)
	}
	if err := r.WatchGRPCRoutes(); err != nil {
		t.Fatal(err)
	}
	if n := parents(); n != 1 || watches != 1 {
		t.Fatalf("after WatchGRPCRoutes: %d parents, %d watches; want 1, 1", n, watches)
	}
	r.SetWatchGRPC(func() error { return errors.New("no cache") })
	if err := r.WatchGRPCRoutes(); err == nil || !strings.Contains(err.Error(), "no cache") {
		t.Errorf("a failing watch: %v", err)
	}
}
