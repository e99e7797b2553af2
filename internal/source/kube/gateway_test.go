package kube

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"sluice.dev/sluice/internal/translate"

	"sluice.dev/sluice/internal/gateway"
)

// crdDiscovery answers discovery for gateway.networking.k8s.io/v1 with the
// watched kinds once installed is set (GRPCRoutes, BackendTLSPolicies too
// once grpc, tls are set),
// and NotFound before.
type crdDiscovery struct {
	*fakediscovery.FakeDiscovery
	installed atomic.Bool
	grpc      atomic.Bool
	tls       atomic.Bool // BackendTLSPolicies served too
	calls     atomic.Int64
}

func (d *crdDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.calls.Add(1)
	if gv != gatewayv1.GroupVersion.String() || !d.installed.Load() {
		return nil, notFound(gv)
	}
	list := &metav1.APIResourceList{GroupVersion: gv}
	for _, k := range gateway.Resources {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: k})
	}
	if d.grpc.Load() {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: "grpcroutes"})
	}
	if d.tls.Load() {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: "backendtlspolicies"})
	}
	return list, nil
}

// looks waits until discovery was asked n more times (for what).
func (d *crdDiscovery) looks(t *testing.T, n int64, what string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for seen := d.calls.Load(); d.calls.Load() < seen+n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("discovery is not asked again for %s", what)
		}
	}
}

func notFound(gv string) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: "discovery"}, gv)
}

var _ discovery.DiscoveryInterface = (*crdDiscovery)(nil)

func gatewayObjects() (*gatewayv1.GatewayClass, *gatewayv1.Gateway, *gatewayv1.HTTPRoute, *gatewayv1.ReferenceGrant) {
	return &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "sluice"}},
		&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"}},
		&gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r"}},
		&gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "g"}}
}

// startGateway runs a Source with Gateway API watching over fake clients.
func startGateway(t *testing.T, installed bool) (*harness, *crdDiscovery, *gwfake.Clientset) {
	t.Helper()
	return startGatewayWith(t, installed, false)
}

// startGatewayWith is startGateway, with BackendTLSPolicies served when
// tls is set; the core client holds a ConfigMap with a CA bundle.
func startGatewayWith(t *testing.T, installed, tls bool) (*harness, *crdDiscovery, *gwfake.Clientset) {
	t.Helper()
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ca", Labels: map[string]string{"x": "y"}},
		Data: map[string]string{gateway.CAKey: "pem", "other": "secret-ish"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"a": "b"}}})
	gc, gw, r, g := gatewayObjects()
	// Created through the typed client: given to the constructor, the
	// Gateway lands under a version the informer does not list.
	gwc := gwfake.NewSimpleClientset() // NewClientset's type converter lacks v1 Gateways
	bg := context.Background()
	if _, err := gwc.GatewayV1().GatewayClasses().Create(bg, gc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := gwc.GatewayV1().Gateways(gw.Namespace).Create(bg, gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := gwc.GatewayV1().HTTPRoutes(r.Namespace).Create(bg, r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := gwc.GatewayV1().ReferenceGrants(g.Namespace).Create(bg, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src, err := New(Options{Client: client, Logger: testLogger(t), Gateway: gwc})
	if err != nil {
		t.Fatal(err)
	}
	d := &crdDiscovery{FakeDiscovery: client.Discovery().(*fakediscovery.FakeDiscovery)}
	d.installed.Store(installed)
	d.tls.Store(tls)
	src.gw.disco = d
	src.gw.poll = 5 * time.Millisecond
	h := &harness{t: t, client: client, src: src, notes: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, h.notify) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	h.wait("first load")
	return h, d, gwc
}

func gatewayCount(in translate.Input) int {
	g := in.Gateway
	return len(g.GatewayClasses) + len(g.Gateways) + len(g.HTTPRoutes) + len(g.ReferenceGrants)
}

// TestGatewayInFirstSnapshot: with the CRDs installed, the first snapshot
// (the one a new proxy turns ready with) already holds every Gateway API
// object and the Namespaces, and changes notify.
func TestGatewayInFirstSnapshot(t *testing.T) {
	h, _, gwc := startGateway(t, true)
	in := h.src.Snapshot()
	if n := gatewayCount(in); n != 4 {
		t.Fatalf("first snapshot has %d Gateway API objects, want 4: %+v", n, in.Gateway)
	}
	if len(in.Gateway.Namespaces) != 1 || in.Gateway.Namespaces[0].Labels["a"] != "b" {
		t.Fatalf("namespaces = %+v", in.Gateway.Namespaces)
	}
	_, err := gwc.GatewayV1().HTTPRoutes("team-a").Create(context.Background(),
		&gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r2"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("the new HTTPRoute", func(in translate.Input) bool { return len(in.Gateway.HTTPRoutes) == 2 })
}

// TestGatewayCRDsAbsent: without the CRDs the source syncs at once without
// Gateway API objects (no crash, no wait), and picks them up once the CRDs
// appear.
func TestGatewayCRDsAbsent(t *testing.T) {
	h, d, _ := startGateway(t, false)
	if !h.src.Synced() {
		t.Fatal("not synced")
	}
	if n := gatewayCount(h.src.Snapshot()); n != 0 {
		t.Fatalf("snapshot without CRDs has %d Gateway API objects", n)
	}
	d.installed.Store(true)
	h.eventually("the Gateway API objects", func(in translate.Input) bool { return gatewayCount(in) == 4 })
}

// TestGRPCRouteCRDLater: GRPCRoutes whose CRD the API server serves only
// after the watch started are read once it does (looked for every poll),
// with a notify, without a restart; the other kinds are read meanwhile.
func TestGRPCRouteCRDLater(t *testing.T) {
	h, d, gwc := startGateway(t, true)
	if n := gatewayCount(h.src.Snapshot()); n != 4 {
		t.Fatalf("first snapshot has %d Gateway API objects, want 4", n)
	}
	_, err := gwc.GatewayV1().GRPCRoutes("team-a").Create(context.Background(),
		&gatewayv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "g"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.looks(t, 3, "GRPCRoutes") // none is read meanwhile
	if n := len(h.src.Snapshot().Gateway.GRPCRoutes); n != 0 {
		t.Fatalf("%d GRPCRoutes read while their CRD is not served", n)
	}
	d.grpc.Store(true)
	h.eventually("the GRPCRoute", func(in translate.Input) bool { return len(in.Gateway.GRPCRoutes) == 1 })
	_, err = gwc.GatewayV1().GRPCRoutes("team-a").Create(context.Background(),
		&gatewayv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "g2"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("the second GRPCRoute (watched)", func(in translate.Input) bool { return len(in.Gateway.GRPCRoutes) == 2 })
	if n := gatewayCount(h.src.Snapshot()); n != 4 {
		t.Fatalf("%d other Gateway API objects after GRPCRoutes appeared, want 4", n)
	}
}

// TestBackendTLSPolicyWatch: with BackendTLSPolicies served, the snapshot
// holds them and the ConfigMaps, each with its CA bundle only; without
// the CRD no ConfigMap is read.
func TestBackendTLSPolicyWatch(t *testing.T) {
	h, _, _ := startGatewayWith(t, true, false)
	if in := h.src.Snapshot(); len(in.Gateway.ConfigMaps) != 0 || in.Gateway.BackendTLSPolicies != nil {
		t.Fatalf("without the BackendTLSPolicy CRD: %d ConfigMaps, policies %v", len(in.Gateway.ConfigMaps), in.Gateway.BackendTLSPolicies)
	}
	h, _, gwc := startGatewayWith(t, true, true)
	in := h.src.Snapshot()
	if len(in.Gateway.ConfigMaps) != 1 {
		t.Fatalf("ConfigMaps = %+v", in.Gateway.ConfigMaps)
	}
	if cm := in.Gateway.ConfigMaps[0]; len(cm.Data) != 1 || cm.Data[gateway.CAKey] != "pem" || cm.Labels != nil {
		t.Errorf("ConfigMap kept as %+v, want its %s only", cm, gateway.CAKey)
	}
	_, err := gwc.GatewayV1().BackendTLSPolicies("team-a").Create(context.Background(),
		&gatewayv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("the new BackendTLSPolicy", func(in translate.Input) bool { return len(in.Gateway.BackendTLSPolicies) == 1 })
}

// TestBackendTLSPolicyCRDLater: BackendTLSPolicies whose CRD the API
// server serves only after the watch started are read once it does
// (looked for every poll), with the ConfigMaps (their CA bundle only) and
// a notify, without a restart; nothing of them is read before, and the
// other kinds are read meanwhile.
func TestBackendTLSPolicyCRDLater(t *testing.T) {
	h, d, gwc := startGateway(t, true)
	_, err := gwc.GatewayV1().BackendTLSPolicies("team-a").Create(context.Background(),
		&gatewayv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.looks(t, 3, "BackendTLSPolicies") // none is read meanwhile
	if in := h.src.Snapshot(); len(in.Gateway.BackendTLSPolicies) != 0 || len(in.Gateway.ConfigMaps) != 0 {
		t.Fatalf("%d BackendTLSPolicies, %d ConfigMaps read while their CRD is not served", len(in.Gateway.BackendTLSPolicies), len(in.Gateway.ConfigMaps))
	}
	d.tls.Store(true)
	h.eventually("the BackendTLSPolicy and the ConfigMap", func(in translate.Input) bool {
		return len(in.Gateway.BackendTLSPolicies) == 1 && len(in.Gateway.ConfigMaps) == 1
	})
	if cm := h.src.Snapshot().Gateway.ConfigMaps[0]; len(cm.Data) != 1 || cm.Data[gateway.CAKey] != "pem" {
		t.Errorf("ConfigMap kept as %+v, want its %s only", cm, gateway.CAKey)
	}
	_, err = gwc.GatewayV1().BackendTLSPolicies("team-a").Create(context.Background(),
		&gatewayv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p2"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("the second BackendTLSPolicy (watched)", func(in translate.Input) bool { return len(in.Gateway.BackendTLSPolicies) == 2 })
	if n := gatewayCount(h.src.Snapshot()); n != 4 {
		t.Fatalf("%d other Gateway API objects after BackendTLSPolicies appeared, want 4", n)
	}
}
