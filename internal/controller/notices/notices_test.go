package notices

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func ingress(name string) *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name)}}
}

func newClient(funcs interceptor.Funcs) client.Client {
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(funcs).Build()
}

func newWriter(t *testing.T, c client.Client, clk *clock) *Writer {
	t.Helper()
	w, err := New(Options{Client: c, Controller: "sluice.dev/controller", Instance: "controller-0", Action: "Translate", Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// events lists the Events by reason and note, with their series counts
// (1 for none).
func events(t *testing.T, c client.Client) map[string]int32 {
	t.Helper()
	var l eventsv1.EventList
	if err := c.List(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, e := range l.Items {
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		if e.Regarding.Kind != "Ingress" || e.Regarding.APIVersion != "networking.k8s.io/v1" || e.Regarding.UID == "" {
			t.Errorf("Event %s regards %+v", e.Name, e.Regarding)
		}
		out[e.Type+" "+e.Reason+": "+e.Note] = n
	}
	return out
}

func equal(t *testing.T, step string, got, want map[string]int32) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: Events %v, want %v", step, got, want)
		return
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: Events %v, want %v", step, got, want)
			return
		}
	}
}

// TestLifecycle: two problems of one Ingress with the same reason are two
// Events; a standing problem is refreshed after Refresh, not before; a
// problem that clears gets a Resolved Event; a new writer (a new leader)
// refreshes the Events of the last instead of writing new ones.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	c := newClient(interceptor.Funcs{})
	clk := &clock{t: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	w := newWriter(t, c, clk)
	ing := ingress("shop")
	a := Notice{Object: ing, Type: corev1.EventTypeWarning, Reason: "ForeignRecord", Message: "a.example.com is held by another owner"}
	b := Notice{Object: ing, Type: corev1.EventTypeWarning, Reason: "ForeignRecord", Message: "b.example.com is held by another owner"}
	wa, wb := "Warning ForeignRecord: "+a.Message, "Warning ForeignRecord: "+b.Message

	sync := func(ns ...Notice) {
		t.Helper()
		if err := w.Sync(ctx, "dns", ns); err != nil {
			t.Fatal(err)
		}
	}
	sync(a, b, a)
	equal(t, "first", events(t, c), map[string]int32{wa: 1, wb: 1})
	clk.t = clk.t.Add(DefaultRefresh - time.Second)
	sync(a, b)
	equal(t, "before the refresh", events(t, c), map[string]int32{wa: 1, wb: 1})
	clk.t = clk.t.Add(time.Second)
	sync(b, a)
	equal(t, "refreshed", events(t, c), map[string]int32{wa: 2, wb: 2})
	if err := w.Sync(ctx, "other scope", nil); err != nil {
		t.Fatal(err)
	}
	equal(t, "another scope", events(t, c), map[string]int32{wa: 2, wb: 2})
	sync(b)
	res := "Normal Resolved: resolved: ForeignRecord: " + a.Message
	equal(t, "a resolved", events(t, c), map[string]int32{wa: 2, wb: 2, res: 1})

	leader := newWriter(t, c, clk)
	if err := leader.Sync(ctx, "dns", []Notice{b}); err != nil {
		t.Fatal(err)
	}
	equal(t, "a new leader", events(t, c), map[string]int32{wa: 2, wb: 2, res: 1})
}

// TestFailedWriteRetried: a write that failed is tried again on the next
// Sync, and a problem never written is not reported as resolved.
func TestFailedWriteRetried(t *testing.T) {
	ctx := context.Background()
	fail := true
	c := newClient(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.CreateOption) error {
		if fail {
			return errors.New("apiserver away")
		}
		return c.Create(ctx, obj, o...)
	}})
	clk := &clock{t: time.Now()}
	w := newWriter(t, c, clk)
	n := Notice{Object: ingress("shop"), Type: corev1.EventTypeWarning, Reason: "ServiceNotFound", Message: "service web not found"}
	if err := w.Sync(ctx, "ingress", []Notice{n}); err == nil || !strings.Contains(err.Error(), "apiserver away") {
		t.Fatalf("Sync = %v, want the create's error", err)
	}
	if err := w.Sync(ctx, "ingress", nil); err != nil {
		t.Fatal(err)
	}
	equal(t, "never written, gone", events(t, c), map[string]int32{})
	if err := w.Sync(ctx, "ingress", []Notice{n}); err == nil {
		t.Fatal("Sync succeeded with creates failing")
	}
	fail = false
	if err := w.Sync(ctx, "ingress", []Notice{n}); err != nil {
		t.Fatal(err)
	}
	equal(t, "retried", events(t, c), map[string]int32{"Warning ServiceNotFound: service web not found": 1})
}

// TestEventNames: names are valid and distinct per object, reason and
// message, also for the longest object names.
func TestEventNames(t *testing.T) {
	long := strings.Repeat("a", 199) + "." + strings.Repeat("b", 53)
	seen := map[string]bool{}
	for _, o := range []*networkingv1.Ingress{ingress("shop"), ingress(long)} {
		for _, r := range []string{"A", "B"} {
			for _, m := range []string{"x", "y"} {
				n := eventName(o, r, m)
				if len(n) > 253 || strings.Contains(n, "..") || seen[n] {
					t.Errorf("eventName(%d bytes, %s, %s) = %q: too long, invalid or repeated", len(o.Name), r, m, n)
				}
				seen[n] = true
			}
		}
	}
}
