package kube

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"sluice.dev/sluice/internal/translate"
)

// waitTimeout bounds every wait for an informer event; it is a deadlock
// guard, not a latency assertion.
const waitTimeout = 30 * time.Second

type harness struct {
	t      *testing.T
	client *fake.Clientset
	src    *Source
	notes  chan struct{}
}

// start runs a Source over a fake clientset holding objs and waits for the
// first notify.
func start(t *testing.T, namespaces []string, objs ...runtime.Object) *harness {
	t.Helper()
	client := fake.NewClientset(objs...)
	src, err := New(Options{Client: client, Namespaces: namespaces, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if src.Synced() {
		t.Fatal("Synced before Run")
	}
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
	if !src.Synced() {
		t.Fatal("notified before Synced")
	}
	return h
}

func (h *harness) notify() {
	select {
	case h.notes <- struct{}{}:
	default: // coalesce like the real caller
	}
}

// wait blocks until a notify arrived.
func (h *harness) wait(what string) {
	h.t.Helper()
	select {
	case <-h.notes:
	case <-time.After(waitTimeout):
		h.t.Fatalf("no notify after %s", what)
	}
}

// eventually waits for notifies until cond holds on the Snapshot.
func (h *harness) eventually(what string, cond func(translate.Input) bool) {
	h.t.Helper()
	deadline := time.After(waitTimeout)
	for !cond(h.src.Snapshot()) {
		select {
		case <-h.notes:
		case <-deadline:
			h.t.Fatalf("snapshot never showed %s: %+v", what, h.src.Snapshot())
		}
	}
}

// testLogger logs into the test output; lines that background goroutines
// write after the test ended are dropped (t.Log would panic).
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func objMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}

func ingress(ns, name, host string) *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: objMeta(ns, name), Spec: networkingv1.IngressSpec{
		Rules: []networkingv1.IngressRule{{Host: host}},
	}}
}

func service(ns, name string, port int32) *corev1.Service {
	return &corev1.Service{ObjectMeta: objMeta(ns, name), Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Port: port}},
	}}
}

func slice(ns, name, addr string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: objMeta(ns, name), AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr}}}}
}

func secret(ns, name string, typ corev1.SecretType, crt string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: objMeta(ns, name), Type: typ,
		Data: map[string][]byte{"tls.crt": []byte(crt), "tls.key": []byte("key")}}
}

func class(name string) *networkingv1.IngressClass {
	return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IngressClassSpec{Controller: translate.ControllerName}}
}

func hosts(in translate.Input) map[string]string {
	m := map[string]string{}
	for _, i := range in.Ingresses {
		if len(i.Spec.Rules) > 0 {
			m[i.Namespace+"/"+i.Name] = i.Spec.Rules[0].Host
		}
	}
	return m
}

func TestNewWithoutClient(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without client: no error")
	}
}

func TestInitialLoad(t *testing.T) {
	h := start(t, nil,
		ingress("a", "web", "a.example"),
		class("sluice"),
		service("a", "web", 80),
		slice("a", "web-1", "10.244.1.10"),
		secret("a", "cert", corev1.SecretTypeTLS, "crt"),
		secret("a", "token", corev1.SecretTypeOpaque, "x"),
	)
	in := h.src.Snapshot()
	if len(in.Ingresses) != 1 || len(in.IngressClasses) != 1 || len(in.Services) != 1 ||
		len(in.EndpointSlices) != 1 || len(in.Secrets) != 1 {
		t.Fatalf("snapshot counts: %d ingresses, %d classes, %d services, %d slices, %d secrets; want 1 each",
			len(in.Ingresses), len(in.IngressClasses), len(in.Services), len(in.EndpointSlices), len(in.Secrets))
	}
	if in.Secrets[0].Name != "cert" {
		t.Errorf("secret %q served; want only the TLS secret", in.Secrets[0].Name)
	}
}

func TestRunTwice(t *testing.T) {
	h := start(t, nil)
	if err := h.src.Run(context.Background(), func() {}); err == nil {
		t.Fatal("second Run: no error")
	}
}

func TestRunEndsBeforeSync(t *testing.T) {
	src, err := New(Options{Client: fake.NewClientset(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := src.Run(ctx, func() {}); err != nil {
		t.Fatalf("Run with ended ctx: %v", err)
	}
}

// TestChanges creates, updates and deletes one object of every kind and
// checks each step notifies and shows in the Snapshot.
func TestChanges(t *testing.T) {
	ctx := context.Background()
	h := start(t, nil)
	c := h.client

	type step struct {
		name   string
		do     func() error
		inSnap func(translate.Input) bool
	}
	count := func(f func(translate.Input) int, n int) func(translate.Input) bool {
		return func(in translate.Input) bool { return f(in) == n }
	}
	nIng := func(in translate.Input) int { return len(in.Ingresses) }
	nCls := func(in translate.Input) int { return len(in.IngressClasses) }
	nSvc := func(in translate.Input) int { return len(in.Services) }
	nEps := func(in translate.Input) int { return len(in.EndpointSlices) }
	nSec := func(in translate.Input) int { return len(in.Secrets) }

	steps := []step{
		{"create ingress", func() error {
			_, err := c.NetworkingV1().Ingresses("a").Create(ctx, ingress("a", "web", "a.example"), metav1.CreateOptions{})
			return err
		}, count(nIng, 1)},
		{"update ingress", func() error {
			_, err := c.NetworkingV1().Ingresses("a").Update(ctx, ingress("a", "web", "b.example"), metav1.UpdateOptions{})
			return err
		}, func(in translate.Input) bool { return hosts(in)["a/web"] == "b.example" }},
		{"delete ingress", func() error {
			return c.NetworkingV1().Ingresses("a").Delete(ctx, "web", metav1.DeleteOptions{})
		}, count(nIng, 0)},

		{"create class", func() error {
			_, err := c.NetworkingV1().IngressClasses().Create(ctx, class("sluice"), metav1.CreateOptions{})
			return err
		}, count(nCls, 1)},
		{"update class", func() error {
			ic := class("sluice")
			ic.Spec.Controller = "other"
			_, err := c.NetworkingV1().IngressClasses().Update(ctx, ic, metav1.UpdateOptions{})
			return err
		}, func(in translate.Input) bool {
			return len(in.IngressClasses) == 1 && in.IngressClasses[0].Spec.Controller == "other"
		}},
		{"delete class", func() error {
			return c.NetworkingV1().IngressClasses().Delete(ctx, "sluice", metav1.DeleteOptions{})
		}, count(nCls, 0)},

		{"create service", func() error {
			_, err := c.CoreV1().Services("a").Create(ctx, service("a", "web", 80), metav1.CreateOptions{})
			return err
		}, count(nSvc, 1)},
		{"update service", func() error {
			_, err := c.CoreV1().Services("a").Update(ctx, service("a", "web", 81), metav1.UpdateOptions{})
			return err
		}, func(in translate.Input) bool {
			return len(in.Services) == 1 && in.Services[0].Spec.Ports[0].Port == 81
		}},
		{"delete service", func() error {
			return c.CoreV1().Services("a").Delete(ctx, "web", metav1.DeleteOptions{})
		}, count(nSvc, 0)},

		{"create slice", func() error {
			_, err := c.DiscoveryV1().EndpointSlices("a").Create(ctx, slice("a", "web-1", "10.244.1.10"), metav1.CreateOptions{})
			return err
		}, count(nEps, 1)},
		{"update slice", func() error {
			_, err := c.DiscoveryV1().EndpointSlices("a").Update(ctx, slice("a", "web-1", "10.244.1.11"), metav1.UpdateOptions{})
			return err
		}, func(in translate.Input) bool {
			return len(in.EndpointSlices) == 1 && in.EndpointSlices[0].Endpoints[0].Addresses[0] == "10.244.1.11"
		}},
		{"delete slice", func() error {
			return c.DiscoveryV1().EndpointSlices("a").Delete(ctx, "web-1", metav1.DeleteOptions{})
		}, count(nEps, 0)},

		{"create secret", func() error {
			_, err := c.CoreV1().Secrets("a").Create(ctx, secret("a", "cert", corev1.SecretTypeTLS, "one"), metav1.CreateOptions{})
			return err
		}, count(nSec, 1)},
		{"update secret", func() error {
			_, err := c.CoreV1().Secrets("a").Update(ctx, secret("a", "cert", corev1.SecretTypeTLS, "two"), metav1.UpdateOptions{})
			return err
		}, func(in translate.Input) bool {
			return len(in.Secrets) == 1 && string(in.Secrets[0].Data["tls.crt"]) == "two"
		}},
		{"delete secret", func() error {
			return c.CoreV1().Secrets("a").Delete(ctx, "cert", metav1.DeleteOptions{})
		}, count(nSec, 0)},
	}
	for _, s := range steps {
		// Drain a coalesced notify left from an earlier step so that the
		// wait below sees this step's own notify.
		select {
		case <-h.notes:
		default:
		}
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		h.wait(s.name)
		h.eventually(s.name, s.inSnap)
	}
}

func TestNamespaceFilter(t *testing.T) {
	ctx := context.Background()
	h := start(t, []string{"mine", "also", "mine"},
		ingress("mine", "web", "mine.example"),
		ingress("also", "web", "also.example"),
		service("also", "web", 80),
		secret("also", "cert", corev1.SecretTypeTLS, "crt"),
		ingress("other", "web", "other.example"),
		service("other", "web", 80),
		slice("other", "web-1", "10.244.1.10"),
		secret("other", "cert", corev1.SecretTypeTLS, "crt"),
		class("sluice"),
	)
	in := h.src.Snapshot()
	if got := hosts(in); len(in.Ingresses) != 2 || got["mine/web"] != "mine.example" || got["also/web"] != "also.example" {
		t.Errorf("ingresses = %v; want only mine/web and also/web", got)
	}
	if len(in.Services) != 1 || in.Services[0].Namespace != "also" || len(in.Secrets) != 1 || in.Secrets[0].Namespace != "also" || len(in.EndpointSlices) != 0 {
		t.Errorf("objects of another namespace in snapshot, or of a watched one missing: %+v", in)
	}
	if len(in.IngressClasses) != 1 {
		t.Errorf("IngressClasses = %d; want 1 (cluster-scoped, always watched)", len(in.IngressClasses))
	}

	// A change in another namespace does not reach the snapshot; one in the
	// watched namespace does (and its notify proves the other had its
	// chance to be seen first: informers deliver in order per kind).
	if _, err := h.client.NetworkingV1().Ingresses("other").Create(ctx, ingress("other", "new", "x.example"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.NetworkingV1().Ingresses("mine").Create(ctx, ingress("mine", "new", "y.example"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("mine/new", func(in translate.Input) bool { return hosts(in)["mine/new"] == "y.example" })
	if _, ok := hosts(h.src.Snapshot())["other/new"]; ok {
		t.Error("other/new in snapshot of namespaces mine and also")
	}
}

func TestTransformStrips(t *testing.T) {
	ing := ingress("a", "web", "a.example")
	ing.Annotations = map[string]string{lastAppliedAnnotation: "{}", "keep": "yes"}
	ing.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	h := start(t, nil, ing)
	in := h.src.Snapshot()
	if len(in.Ingresses) != 1 {
		t.Fatalf("ingresses = %d; want 1", len(in.Ingresses))
	}
	got := in.Ingresses[0]
	if got.ManagedFields != nil {
		t.Errorf("managedFields kept: %v", got.ManagedFields)
	}
	if _, ok := got.Annotations[lastAppliedAnnotation]; ok {
		t.Error("last-applied annotation kept")
	}
	if got.Annotations["keep"] != "yes" {
		t.Errorf("other annotations lost: %v", got.Annotations)
	}
}

func TestSameVersionUpdateDoesNotNotify(t *testing.T) {
	a := ingress("a", "web", "a.example")
	a.ResourceVersion = "5"
	b := a.DeepCopy()
	if !sameVersion(a, b) {
		t.Error("same resource version not recognised")
	}
	b.ResourceVersion = "6"
	if sameVersion(a, b) {
		t.Error("different resource versions treated as same")
	}
	a.ResourceVersion, b.ResourceVersion = "", ""
	if sameVersion(a, b) {
		t.Error("empty resource versions treated as same")
	}
}
