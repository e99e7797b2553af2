package gatewaystatus_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/controller/gatewaystatus"
)

// TestGRPCRoutes: with GRPCRoutes served, a GRPCRoute gets sluice's parent
// entry (ResolvedRefs=False RefNotPermitted for a backend of another
// namespace without a grant), and counts in the listener's
// attachedRoutes; without, it is not read.
func TestGRPCRoutes(t *testing.T) {
	for _, served := range []bool{true, false} {
		c, r := newReconciler(t, append(fixtures(), echoGRPCRoute())...)
		r.ServeGRPCRoutes(served)
		var got gatewayv1.GRPCRoute
		reconcileGet(t, r, c, client.ObjectKey{Namespace: "team-a", Name: "echo"}, &got)
		var gw gatewayv1.Gateway
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "infra", Name: "web"}, &gw); err != nil {
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

// TestWatchLater: a reconciler set up without GRPCRoutes, or without
// BackendTLSPolicies (their CRD was not served yet), adds the kind's
// watch once, and from then on reads it and writes its statuses; before
// Setup it refuses, and a failing watch is reported.
func TestWatchLater(t *testing.T) {
	for _, kind := range []struct {
		name     string
		obj      client.Object
		key      client.ObjectKey
		setWatch func(*gatewaystatus.Reconciler, func() error)
		watch    func(*gatewaystatus.Reconciler) error
		entries  func(client.Object) int
	}{
		{"GRPCRoutes", echoGRPCRoute(), client.ObjectKey{Namespace: "team-a", Name: "echo"},
			(*gatewaystatus.Reconciler).SetWatchGRPC, (*gatewaystatus.Reconciler).WatchGRPCRoutes,
			func(o client.Object) int { return len(o.(*gatewayv1.GRPCRoute).Status.Parents) }},
		{"BackendTLSPolicies", securePolicy(), client.ObjectKey{Namespace: "team-a", Name: "secure"},
			(*gatewaystatus.Reconciler).SetWatchBackendTLS, (*gatewaystatus.Reconciler).WatchBackendTLSPolicies,
			func(o client.Object) int { return len(o.(*gatewayv1.BackendTLSPolicy).Status.Ancestors) }},
	} {
		t.Run(kind.name, func(t *testing.T) {
			c, r := newReconciler(t, append(fixtures(), kind.obj, secureRoute(), secureService())...)
			if err := kind.watch(r); err == nil {
				t.Fatalf("watched %s before Setup", kind.name)
			}
			entries := func() int {
				t.Helper()
				got := kind.obj.DeepCopyObject().(client.Object)
				reconcileGet(t, r, c, kind.key, got)
				return kind.entries(got)
			}
			watches := 0
			kind.setWatch(r, func() error { watches++; return nil })
			if n := entries(); n != 0 || watches != 0 {
				t.Fatalf("before the late watch: %d status entries, %d watches; want 0, 0", n, watches)
			}
			if err := kind.watch(r); err != nil {
				t.Fatal(err)
			}
			if n := entries(); n != 1 || watches != 1 {
				t.Fatalf("after the late watch: %d status entries, %d watches; want 1, 1", n, watches)
			}
			kind.setWatch(r, func() error { return errors.New("no cache") })
			if err := kind.watch(r); err == nil || !strings.Contains(err.Error(), "no cache") {
				t.Errorf("a failing watch: %v", err)
			}
		})
	}
}
