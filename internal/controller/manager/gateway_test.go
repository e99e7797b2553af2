package manager

import (
	"context"
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
// served is set, then the kinds (all of them only when full is set).
type crds struct {
	*fakediscovery.FakeDiscovery
	served, full atomic.Bool
}

func (d *crds) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if gv != gatewayv1.GroupVersion.String() || !d.served.Load() {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	list := &metav1.APIResourceList{GroupVersion: gv}
	for i, r := range gateway.Resources {
		if i < 2 || d.full.Load() {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r})
		}
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
