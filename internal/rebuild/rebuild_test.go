package rebuild

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/internal/testcert"
	"sluice.dev/sluice/internal/translate"
)

// fakeSource hands out a settable snapshot and lets the test fire notify.
type fakeSource struct {
	mu     sync.Mutex
	in     translate.Input
	synced atomic.Bool
	notify chan func()
}

func (f *fakeSource) Run(ctx context.Context, notify func()) error {
	f.notify <- notify
	<-ctx.Done()
	return nil
}
func (f *fakeSource) Snapshot() translate.Input { f.mu.Lock(); defer f.mu.Unlock(); return f.in }
func (f *fakeSource) Synced() bool              { return f.synced.Load() }
func (f *fakeSource) set(in translate.Input)    { f.mu.Lock(); f.in = in; f.mu.Unlock() }

type updates struct{}

func (updates) Update(*route.Table) {}

func ingress(name, host string, class *string) *networkingv1.Ingress {
	pt := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: class,
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "svc", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
			}}}},
		},
	}
}

func TestLoopBuildsOnChangeAndReportsProblems(t *testing.T) {
	class := "sluice"
	src := &fakeSource{notify: make(chan func(), 1)}
	// OnTable runs after the table is live and its metrics recorded.
	tables := make(chan *route.Table, 10)
	reg := prometheus.NewRegistry()
	l, err := New(Options{Source: src, Updater: updates{}, Registerer: reg,
		OnTable: func(t *route.Table, _ []translate.Problem) { tables <- t }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx)
	notify := <-src.notify

	// Not synced: a notify builds nothing and the loop is not ready.
	notify()
	select {
	case <-tables:
		t.Fatal("table built before the source synced")
	case <-time.After(50 * time.Millisecond):
	}
	if l.Ready() {
		t.Fatal("ready before the first table")
	}

	src.set(translate.Input{
		Ingresses: []*networkingv1.Ingress{ingress("a", "a.example.com", &class)},
		Services:  []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "svc"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}},
	})
	src.synced.Store(true)
	notify()
	tbl := <-tables
	if r := tbl.Match("a.example.com", "/"); r == nil || r.Backend.Name != "default/svc:80" {
		t.Fatalf("route for a.example.com = %+v", r)
	}
	if !l.Ready() {
		t.Fatal("not ready after the first table")
	}

	// A bad Ingress is reported and does not take the good one down.
	src.set(translate.Input{
		Ingresses: []*networkingv1.Ingress{ingress("a", "a.example.com", &class), ingress("b", "bad_host!", &class)},
		Services:  []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "svc"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}},
	})
	notify()
	tbl = <-tables
	if r := tbl.Match("a.example.com", "/"); r == nil {
		t.Fatal("good route lost after a bad Ingress appeared")
	}
	if got := testutil.ToFloat64(l.rejected.WithLabelValues("Ingress", "default", "InvalidHost")); got != 1 {
		t.Errorf("objects_rejected{Ingress,default,InvalidHost} = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(l.certExpiry); n != 0 {
		t.Errorf("certificate_expiry_timestamp_seconds has %d series without certificates, want 0", n)
	}
	if got := testutil.ToFloat64(l.generation); got != 2 {
		t.Errorf("table_generation = %v, want 2", got)
	}

	// Refused endpoints are counted once per Service port, and the good
	// one is used.
	port, other := int32(8080), "other"
	src.set(translate.Input{
		Ingresses: []*networkingv1.Ingress{ingress("a", "a.example.com", &class)},
		Services:  []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "svc"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}},
		EndpointSlices: []*discoveryv1.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "svc-1", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: &port}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.0.0.1"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"}},
				{Addresses: []string{"169.254.169.254"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "q"}},
				{Addresses: []string{"10.0.0.2"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: other, Name: "r"}},
				{Addresses: []string{"10.0.0.3"}},
			},
		}},
	})
	notify()
	tbl = <-tables
	if r := tbl.Match("a.example.com", "/"); r == nil || len(r.Backend.Endpoints) != 1 || r.Backend.Endpoints[0].Address != "10.0.0.1:8080" {
		t.Fatalf("route for a.example.com = %+v, want the one Pod endpoint", r)
	}
	if got := testutil.ToFloat64(l.refused); got != 3 {
		t.Errorf("endpoints_refused = %v, want 3", got)
	}
	if got := testutil.ToFloat64(l.rejected.WithLabelValues("Ingress", "default", translate.ReasonEndpointsRefused)); got != 1 {
		t.Errorf("objects_rejected{Ingress,EndpointsRefused} = %v, want 1", got)
	}
}

// TestCertificateExpiry: each certificate of the table, the default one
// too, is a series with its expiry.
func TestCertificateExpiry(t *testing.T) {
	l, err := New(Options{Source: nil, Updater: updates{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	crt, key := testcert.SelfSigned(t, "shop.example.com")
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := route.Config{
		Certificates:       []route.Certificate{{Hosts: []string{"shop.example.com"}, Source: "team-a/shop-tls", Cert: &pair}},
		DefaultCertificate: &route.Certificate{Source: "sluice-system/default-tls", Cert: &pair},
	}
	l.record(&cfg, nil)
	want := float64(pair.Leaf.NotAfter.Unix())
	for _, secret := range []string{"team-a/shop-tls", "sluice-system/default-tls"} {
		if got := testutil.ToFloat64(l.certExpiry.WithLabelValues(secret)); got != want {
			t.Errorf("certificate_expiry_timestamp_seconds{secret=%q} = %v, want %v", secret, got, want)
		}
	}
	l.record(&route.Config{}, nil)
	if n := testutil.CollectAndCount(l.certExpiry); n != 0 {
		t.Errorf("%d expiry series after the certificates left the table, want 0", n)
	}
}

// TestLoopTranslatesIncrementally: after the first table, a change to one
// Ingress is translated incrementally, the untouched host keeps its
// compiled routes, and the table is the full translation's.
func TestLoopTranslatesIncrementally(t *testing.T) {
	class := "sluice"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "svc"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	other := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	b := ingress("b", "b.example.com", &class)
	b.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "other" // not linked to a by its Service
	src := &fakeSource{notify: make(chan func(), 1)}
	src.set(translate.Input{Ingresses: []*networkingv1.Ingress{ingress("a", "a.example.com", &class), b}, Services: []*corev1.Service{svc, other}})
	src.synced.Store(true)
	tables := make(chan *route.Table, 10)
	l, err := New(Options{Source: src, Updater: updates{}, Registerer: prometheus.NewRegistry(),
		OnTable: func(t *route.Table, _ []translate.Problem) { tables <- t }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx)
	notify := <-src.notify
	notify()
	first := <-tables

	in := translate.Input{Ingresses: []*networkingv1.Ingress{ingress("a", "c.example.com", &class), b}, Services: []*corev1.Service{svc, other}}
	src.set(in)
	notify()
	second := <-tables
	if got := testutil.ToFloat64(l.translations.WithLabelValues("incremental")); got != 1 {
		t.Errorf("incremental translations: %v; want 1", got)
	}
	if got := testutil.ToFloat64(l.translations.WithLabelValues("full")); got != 1 {
		t.Errorf("full translations: %v; want 1 (the first table)", got)
	}
	if r := second.Match("c.example.com", "/"); r == nil || r.Ingress != "default/a" {
		t.Errorf("route for the changed host = %+v", r)
	}
	if r := second.Match("a.example.com", "/"); r != nil {
		t.Errorf("the old host still routes: %+v", r)
	}
	if r1, r2 := first.Match("b.example.com", "/"), second.Match("b.example.com", "/"); r1 == nil || r1 != r2 {
		t.Errorf("untouched host: route %p then %p; want the same compiled route", r1, r2)
	}
	want, _ := translate.Build(in, translate.Options{})
	if got := *second.Config(); !reflect.DeepEqual(got, want) {
		t.Errorf("table %+v; want that of a full translation %+v", got, want)
	}
}
