package manager

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/gateway"
)

// crds answers discovery of gateway.networking.k8s.io/v1: NotFound until
// served is set, then the kinds (all of them only when full is set, and
// GRPCRoutes, BackendTLSPolicies when grpc, tls are).
type crds struct {
	*fakediscovery.FakeDiscovery
	served, full, grpc, tls atomic.Bool
	calls                   atomic.Int64
}

func (d *crds) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.calls.Add(1)
	if gv != gatewayv1.GroupVersion.String() || !d.served.Load() {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	list := &metav1.APIResourceList{GroupVersion: gv}
	for i, r := range gateway.Resources {
		if i < 2 || d.full.Load() {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r})
		}
	}
	if d.grpc.Load() {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: "grpcroutes"})
	}
	if d.tls.Load() {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: "backendtlspolicies"})
	}
	return list, nil
}

// TestWaitGatewayCRDs: the status reconciler is set up only once every
// Gateway API kind is served (not on a partial install), exactly once;
// without CRDs the wait ends with its context, without error.
func TestWaitGatewayCRDs(t *testing.T) {
	d := &crds{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if ok, err := gatewayInstalled(d); ok || err != nil {
		t.Fatalf("installed without CRDs: %v %v", ok, err)
	}
	d.served.Store(true)
	if ok, _ := gatewayInstalled(d); ok {
		t.Fatal("installed with half the kinds")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitGatewayCRDs(ctx, d, time.Millisecond, log, func() error { t.Error("set up without CRDs"); return nil }); err != nil {
		t.Fatal(err)
	}

	var setups atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- waitGatewayCRDs(context.Background(), d, time.Millisecond, log, func() error { setups.Add(1); return nil })
	}()
	d.full.Store(true)
	select {
	case err := <-done:
		if err != nil || setups.Load() != 1 {
			t.Fatalf("wait ended with %v after %d setups", err, setups.Load())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("never set up once the CRDs were served")
	}
}

// TestWaitLateKinds: with the other kinds served, the GRPCRoute and the
// BackendTLSPolicy watches are each added only once the API server
// serves that kind too, exactly once, after looks that found none; the
// wait ends once both are watched; a watch's error is the wait's.
func TestWaitLateKinds(t *testing.T) {
	d := &crds{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}}
	d.served.Store(true)
	d.full.Store(true)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	var grpcWatches, tlsWatches atomic.Int32
	late := []lateKind{
		{"GRPCRoutes", func() bool { return gateway.GRPCRoutesServed(d) }, func() error { grpcWatches.Add(1); return nil }},
		{"BackendTLSPolicies", func() bool { return gateway.BackendTLSPoliciesServed(d) }, func() error { tlsWatches.Add(1); return nil }},
	}
	done := make(chan error, 1)
	go func() { done <- waitLate(context.Background(), time.Millisecond, log, late) }()
	looks := func(n int64, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for seen := d.calls.Load(); d.calls.Load() < seen+n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("discovery is not asked for %s again", what)
			}
		}
	}
	looks(3, "GRPCRoutes and BackendTLSPolicies")
	if g, b := grpcWatches.Load(), tlsWatches.Load(); g != 0 || b != 0 {
		t.Fatalf("%d GRPCRoute, %d BackendTLSPolicy watches while neither is served", g, b)
	}
	d.tls.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for tlsWatches.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("never watched BackendTLSPolicies once they were served")
		}
		time.Sleep(time.Millisecond)
	}
	looks(3, "GRPCRoutes")
	if g, b := grpcWatches.Load(), tlsWatches.Load(); g != 0 || b != 1 {
		t.Fatalf("%d GRPCRoute, %d BackendTLSPolicy watches with BackendTLSPolicies served; want 0, 1", g, b)
	}
	d.grpc.Store(true)
	select {
	case err := <-done:
		if g, b := grpcWatches.Load(), tlsWatches.Load(); err != nil || g != 1 || b != 1 {
			t.Fatalf("wait ended with %v after %d GRPCRoute, %d BackendTLSPolicy watches; want 1, 1", err, g, b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("never watched GRPCRoutes once they were served")
	}
	failing := []lateKind{{"GRPCRoutes", func() bool { return true }, func() error { return errors.New("no cache") }}}
	if err := waitLate(context.Background(), time.Millisecond, log, failing); err == nil {
		t.Error("a failing watch was not reported")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitLate(ctx, time.Millisecond, log, []lateKind{{"GRPCRoutes", func() bool { return false }, nil}}); err != nil {
		t.Errorf("a wait whose context ended: %v", err)
	}
}
