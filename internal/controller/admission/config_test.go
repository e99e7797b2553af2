package admission

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	ct "sluice.dev/sluice/internal/controller/controllertest"
)

// chartConfigurations are the configurations as the Helm chart renders
// them: selectors and a Service, no caBundle.
func chartConfigurations() (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	cc, _ := clientConfig("", "sluice-system/sluice-controller-webhook", nil, Path)
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rel-eviction-floor"},
		Webhooks: webhooks(cc, []string{"team-a"})}
	scc, _ := clientConfig("", "sluice-system/sluice-controller-webhook", nil, SteerPath)
	m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rel-zone-steer"},
		Webhooks: steerWebhooks(scc, []string{"team-a"})}
	m.Webhooks[0].ObjectSelector.MatchLabels = map[string]string{"app.kubernetes.io/instance": "rel"}
	return v, m
}

// Without CreateConfigurations the server patches only the caBundle of
// the chart's configurations, found by name, and never creates one: while
// they are missing it retries, and serves meanwhile.
func TestServerPatchesCABundleOnly(t *testing.T) {
	h, _ := twoZones(t)
	var calls apiCalls
	v, m := chartConfigurations()
	c := ct.NewClient(calls.funcs())
	addr := freeAddr(t)
	s, err := New(Options{Address: addr, Hosts: []string{"127.0.0.1"}, Service: "sluice-system/sluice-controller-webhook",
		ConfigName: v.Name, SteerConfigName: m.Name, Client: c, Handler: h, Steer: http.NotFoundHandler()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	defer func() { cancel(); <-done }()

	// Missing: reads fail (NotFound) and are retried; nothing is created.
	waitFor(t, "a failed read", func() bool { return calls.gets.Load() > 0 })
	if err := errors.Join(c.Create(ctx, v.DeepCopy()), c.Create(ctx, m.DeepCopy())); err != nil {
		t.Fatal(err)
	}
	created := calls.creates.Load() // the two above
	var gotV admissionregistrationv1.ValidatingWebhookConfiguration
	var gotM admissionregistrationv1.MutatingWebhookConfiguration
	waitFor(t, "the caBundles", func() bool {
		return c.Get(ctx, client.ObjectKey{Name: v.Name}, &gotV) == nil && len(gotV.Webhooks[0].ClientConfig.CABundle) > 0 &&
			c.Get(ctx, client.ObjectKey{Name: m.Name}, &gotM) == nil && len(gotM.Webhooks[0].ClientConfig.CABundle) > 0
	})
	if created != 2 || calls.updates.Load() != 0 || calls.patches.Load() != 2 {
		t.Errorf("creates %d (want the test's 2), updates %d (want 0), patches %d (want 2)", created, calls.updates.Load(), calls.patches.Load())
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(gotV.Webhooks[0].ClientConfig.CABundle) || !reflect.DeepEqual(gotV.Webhooks[0].ClientConfig.CABundle, gotM.Webhooks[0].ClientConfig.CABundle) {
		t.Error("caBundle holds no certificate, or not the same in both")
	}
	// Everything but the caBundle is the chart's.
	gotV.Webhooks[0].ClientConfig.CABundle, gotM.Webhooks[0].ClientConfig.CABundle = nil, nil
	if len(gotV.Webhooks) != 1 || !reflect.DeepEqual(gotV.Webhooks[0], v.Webhooks[0]) {
		t.Errorf("validating webhooks changed:\n%+v\nwant\n%+v", gotV.Webhooks, v.Webhooks)
	}
	if len(gotM.Webhooks) != 1 || !reflect.DeepEqual(gotM.Webhooks[0], m.Webhooks[0]) {
		t.Errorf("mutating webhooks changed:\n%+v\nwant\n%+v", gotM.Webhooks, m.Webhooks)
	}
}

func TestNamespaceSelector(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want bool
	}{{nil, false}, {[]string{"*"}, false}, {[]string{"a", "*"}, false}, {[]string{"a", "b"}, true}} {
		sel := namespaceSelector(tc.in)
		if (sel != nil) != tc.want {
			t.Errorf("%q: %+v", tc.in, sel)
		}
		if sel != nil && (sel.MatchExpressions[0].Key != "kubernetes.io/metadata.name" || !reflect.DeepEqual(sel.MatchExpressions[0].Values, tc.in)) {
			t.Errorf("%q: %+v", tc.in, sel)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitFor polls cond (the server runs in its own goroutine) for 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// apiCalls counts a fake client's calls by verb.
type apiCalls struct {
	gets, creates, updates, patches atomic.Int32
}

// funcs pass every call through and count it.
func (a *apiCalls) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, o ...client.GetOption) error {
			a.gets.Add(1)
			return c.Get(ctx, key, obj, o...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.CreateOption) error {
			a.creates.Add(1)
			return c.Create(ctx, obj, o...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.UpdateOption) error {
			a.updates.Add(1)
			return c.Update(ctx, obj, o...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, o ...client.PatchOption) error {
			a.patches.Add(1)
			return c.Patch(ctx, obj, p, o...)
		},
	}
}
