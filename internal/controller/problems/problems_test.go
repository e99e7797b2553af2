package problems

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/testcert"
)

func ingress(name, svc string, ann map[string]string, created int64) *networkingv1.Ingress {
	class := "sluice"
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: ann, CreationTimestamp: metav1.Unix(created, 0)},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{
			Host: "shop.example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}}},
		}}},
	}
}

func ptr[T any](v T) *T { return &v }

func service(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt(8080)}}}}
}

// TestEventsOncePerChange: each problem is an Event on its Ingress once;
// a resync announces nothing; a fix and a new problem announce the new one
// and the fixed one as resolved.
func TestEventsOncePerChange(t *testing.T) {
	ctx := context.Background()
	c := ct.NewClient(interceptor.Funcs{},
		ingress("old", "web", nil, 1),
		ingress("new", "missing", map[string]string{"sluice.dev/retries": "many"}, 2),
		service("web"))
	rec := &ct.Recorder{}
	r, err := New(Options{Client: c, Notices: &ct.Notices{Recorder: rec}})
	if err != nil {
		t.Fatal(err)
	}
	run := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
			t.Fatal(err)
		}
	}
	run()
	got := map[string]string{}
	for _, e := range rec.Events() {
		if e.Type != corev1.EventTypeWarning {
			t.Errorf("event type %s", e.Type)
		}
		got[e.Reason] = e.Note
		if !strings.HasSuffix(e.Object, "default/new") {
			t.Errorf("event on %s: %s %s", e.Object, e.Reason, e.Note)
		}
	}
	for reason, part := range map[string]string{
		"Conflict":          "already routed by Ingress default/old",
		"InvalidAnnotation": "sluice.dev/retries",
		"NotServed":         "no rule",
	} {
		if !strings.Contains(got[reason], part) {
			t.Errorf("%s event %q lacks %q", reason, got[reason], part)
		}
	}
	n := len(rec.Events())
	run() // a resync
	if len(rec.Events()) != n {
		t.Errorf("resync announced %v", rec.Events()[n:])
	}

	// The user fixes the annotation and breaks the Service name of old.
	var ing networkingv1.Ingress
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "new"}, &ing); err != nil {
		t.Fatal(err)
	}
	ing.Annotations = nil
	if err := c.Update(ctx, &ing); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, service("web")); err != nil {
		t.Fatal(err)
	}
	run()
	fresh := rec.Events()[n:]
	if len(fresh) != 2 || fresh[0].Reason != "ServiceNotFound" || !strings.HasSuffix(fresh[0].Object, "default/old") ||
		fresh[1].Reason != "Resolved" || fresh[1].Type != corev1.EventTypeNormal || !strings.HasSuffix(fresh[1].Object, "default/new") ||
		!strings.Contains(fresh[1].Note, "InvalidAnnotation") {
		t.Errorf("after the change: %v, want one ServiceNotFound on default/old and InvalidAnnotation resolved on default/new", fresh)
	}
}

// TestSecretChangesSeenThroughTheCache: parsed Secrets are kept between
// runs, but a changed Secret is parsed again: a broken certificate is
// announced, its fix clears the problem, and breaking it again announces
// it again.
func TestSecretChangesSeenThroughTheCache(t *testing.T) {
	ctx := context.Background()
	tlsIng := ingress("shop", "web", nil, 1)
	tlsIng.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "shop-tls"}}
	crt, key := testcert.SelfSigned(t, "shop.example.com")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-tls", Namespace: "default"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: []byte("not a certificate"), corev1.TLSPrivateKeyKey: key}}
	c := ct.NewClient(interceptor.Funcs{}, tlsIng, service("web"), secret)
	rec := &ct.Recorder{}
	r, err := New(Options{Client: c, Notices: &ct.Notices{Recorder: rec}, ReadSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	run := func() []ct.Event {
		t.Helper()
		n := len(rec.Events())
		if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
			t.Fatal(err)
		}
		return rec.Events()[n:]
	}
	setCert := func(b []byte) {
		t.Helper()
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "shop-tls"}, &s); err != nil {
			t.Fatal(err)
		}
		s.Data[corev1.TLSCertKey] = b
		if err := c.Update(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	invalid := func(evs []ct.Event) int {
		n := 0
		for _, e := range evs {
			if e.Reason == "InvalidSecret" {
				n++
			}
		}
		return n
	}
	if got := run(); invalid(got) != 1 {
		t.Fatalf("broken certificate: events %v, want one InvalidSecret", got)
	}
	if r.keyPairs.Len() != 1 {
		t.Fatalf("cache holds %d Secrets, want 1", r.keyPairs.Len())
	}
	setCert(crt)
	if got := run(); len(got) != 1 || got[0].Reason != "Resolved" || !strings.Contains(got[0].Note, "InvalidSecret") {
		t.Fatalf("fixed certificate: events %v, want InvalidSecret resolved", got)
	}
	setCert([]byte("broken again"))
	if got := run(); invalid(got) != 1 {
		t.Fatalf("broken again: events %v, want one InvalidSecret (a stale parse would announce nothing)", got)
	}
}

// TestSecretsNotRead: by default no Secret is listed (the controller's
// RBAC grants none), and no Ingress gets a Secret problem or NotServed for
// a certificate the proxies may well have.
func TestSecretsNotRead(t *testing.T) {
	tlsIng := ingress("shop", "web", nil, 1)
	tlsIng.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "shop-tls"}}
	certOnly := ingress("cert-only", "web", nil, 2)
	certOnly.Spec.Rules = nil
	certOnly.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"cert.example.com"}, SecretName: "cert-tls"}}
	listed := 0
	c := ct.NewClient(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*corev1.SecretList); ok {
			listed++
			return errors.New("secrets are forbidden")
		}
		return c.List(ctx, list, opts...)
	}}, tlsIng, certOnly, service("web"))
	rec := &ct.Recorder{}
	r, err := New(Options{Client: c, Notices: &ct.Notices{Recorder: rec}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if listed != 0 {
		t.Errorf("Secrets listed %d times, want none", listed)
	}
	if evs := rec.Events(); len(evs) != 0 {
		t.Errorf("events %v, want none (the Secrets are the proxies' to check)", evs)
	}
}

// TestRefusedEndpointsAnnounced: an EndpointSlice with endpoints the
// checks refuse (the metadata address, a Pod of another namespace, no
// targetRef) is an EndpointsRefused Event on the Ingress using the
// Service; with AllowEndpointsWithoutPod the endpoint without a targetRef
// is not named.
func TestRefusedEndpointsAnnounced(t *testing.T) {
	ctx := context.Background()
	port, name := int32(8080), "http"
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.1"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-a"}},
			{Addresses: []string{"169.254.169.254"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-b"}},
			{Addresses: []string{"10.244.2.1"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: "x"}},
			{Addresses: []string{"10.244.3.1"}},
		},
	}
	for _, tc := range []struct {
		withoutPod bool
		named      []string
		notNamed   []string
	}{
		{false, []string{"3 endpoint(s)", "169.254.169.254", "10.244.2.1", "10.244.3.1"}, []string{"10.244.1.1"}},
		{true, []string{"2 endpoint(s)", "169.254.169.254", "10.244.2.1"}, []string{"10.244.1.1", "10.244.3.1"}},
	} {
		c := ct.NewClient(interceptor.Funcs{}, ingress("shop", "web", nil, 1), service("web"), slice.DeepCopy())
		rec := &ct.Recorder{}
		r, err := New(Options{Client: c, Notices: &ct.Notices{Recorder: rec}, AllowEndpointsWithoutPod: tc.withoutPod})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
			t.Fatal(err)
		}
		evs := rec.Events()
		if len(evs) != 1 || evs[0].Reason != "EndpointsRefused" || !strings.HasSuffix(evs[0].Object, "default/shop") {
			t.Fatalf("withoutPod %t: events %v, want one EndpointsRefused on default/shop", tc.withoutPod, evs)
		}
		for _, s := range tc.named {
			if !strings.Contains(evs[0].Note, s) {
				t.Errorf("withoutPod %t: event %q does not name %s", tc.withoutPod, evs[0].Note, s)
			}
		}
		for _, s := range tc.notNamed {
			if strings.Contains(evs[0].Note, s) {
				t.Errorf("withoutPod %t: event %q names %s", tc.withoutPod, evs[0].Note, s)
			}
		}
	}
}

// TestForwardAuthAnyURL: the controller takes the proxies'
// --forward-auth-any-url, so an external auth URL is an Event only where
// the proxies refuse it.
func TestForwardAuthAnyURL(t *testing.T) {
	for _, anyURL := range []bool{false, true} {
		c := ct.NewClient(interceptor.Funcs{},
			ingress("web", "web", map[string]string{"sluice.dev/auth-url": "https://auth.example.com/check"}, 1), service("web"))
		rec := &ct.Recorder{}
		r, err := New(Options{Client: c, Notices: &ct.Notices{Recorder: rec}, ForwardAuthAnyURL: anyURL})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(context.Background(), reconcile.Request{}); err != nil {
			t.Fatal(err)
		}
		invalid := 0
		for _, e := range rec.Events() {
			if e.Reason == "InvalidAnnotation" && strings.Contains(e.Note, "auth-url") {
				invalid++
			}
		}
		if want := map[bool]int{false: 1, true: 0}[anyURL]; invalid != want {
			t.Errorf("ForwardAuthAnyURL=%v: %d InvalidAnnotation Events for auth-url, want %d (%v)", anyURL, invalid, want, rec.Events())
		}
	}
}
