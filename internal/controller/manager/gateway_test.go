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
// GRPCRoutes when grpc is).
type crds struct {
	*fakediscovery.FakeDiscovery
	served, full, grpc atomic.Bool
	calls              atomic.Int64
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

// TestWaitGRPCRoutes: with the other kinds served, the GRPCRoute watch is
// added only once the API server serves GRPCRoutes too, exactly once,
// after looks that found none; its error is the wait's.
func TestWaitGRPCRoutes(t *testing.T) {
	d := &crds{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}}
	d.served.Store(true)
	d.full.Store(true)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	var watches atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- waitGRPCRoutes(context.Background(), d, time.Millisecond, log, func() error { watches.Add(1); return nil })
	}()
	deadline := time.Now().Add(30 * time.Second)
	for d.calls.Load() < 3 { // three looks without GRPCRoutes
		if time.Now().After(deadline) {
			t.Fatal("discovery is not asked for GRPCRoutes again")
		}
		time.Sleep(time.Millisecond)
	}
	if n := watches.Load(); n != 0 {
		t.Fatalf("%d watches while GRPCRoutes are not served", n)
	}
	d.grpc.Store(true)
	select {
	case err := <-done:
		if err != nil || watches.Load() != 1 {
			t.Fatalf("wait ended with %v after %d watches", err, watches.Load())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("never watched GRPCRoutes once they were served")
	}
	if err := waitGRPCRoutes(context.Background(), d, time.Millisecond, log, func() error { return errors.New("no cache") }); err == nil {
		t.Error("a failing watch was not reported")
	}
}
