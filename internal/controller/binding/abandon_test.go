package binding_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/lb"
)

// A deleted binding whose provider stays unreachable reports
// DeletionBlocked once its drain timeout has passed; an abandon annotation
// with a stale generation is refused with an Event, and one with the
// current generation lets it go in one reconcile without a provider call,
// leaving its targets there.
func TestAbandonStuckDeletion(t *testing.T) {
	e := newEnv(t, ct.Pod("p1", "10.244.1.5"), ct.Binding("b"))
	e.mustReconcile("b")
	if err := e.c.Delete(context.Background(), e.binding("b")); err != nil {
		t.Fatal(err)
	}
	confirm(t, e.c, e.binding("b"))
	// The test clock starts before the fake client's deletion timestamp.
	e.clock.Advance(e.binding("b").DeletionTimestamp.Sub(e.clock.Now()) + time.Minute)
	e.p.SetUnreachable(true)

	const obj = "LoadBalancerBinding ingress/b"
	if _, err := e.reconcile("b"); !errors.Is(err, lb.ErrUnreachable) {
		t.Fatalf("reconcile = %v, want the provider error (retried)", err)
	}
	if c := condition(e.binding("b"), v1alpha1.ConditionDeletionBlocked); c.Status != "" || e.rec.Count(obj, "DeletionBlocked") != 0 {
		t.Fatalf("DeletionBlocked before drain.timeout: %+v", c)
	}
	e.clock.Advance(5 * time.Minute)
	for range 2 {
		if _, err := e.reconcile("b"); !errors.Is(err, lb.ErrUnreachable) {
			t.Fatalf("reconcile = %v, want the provider error", err)
		}
	}
	c := condition(e.binding("b"), v1alpha1.ConditionDeletionBlocked)
	if c.Status != metav1.ConditionTrue || c.Reason != "ProviderUnreachable" || !strings.Contains(c.Message, v1alpha1.AnnotationAbandonTargets) {
		t.Fatalf("DeletionBlocked = %+v", c)
	}
	if n := e.rec.Count(obj, "DeletionBlocked"); n != 1 {
		t.Errorf("DeletionBlocked Events = %d, want 1 (when it becomes blocked)", n)
	}

	annotate := func(v string) {
		t.Helper()
		b := e.binding("b")
		orig := b.DeepCopy()
		b.Annotations[v1alpha1.AnnotationAbandonTargets] = v
		if err := e.c.Patch(context.Background(), b, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	}
	gen := e.binding("b").Generation
	annotate(strconv.FormatInt(gen+7, 10)) // copied from elsewhere
	for range 2 {
		if _, err := e.reconcile("b"); !errors.Is(err, lb.ErrUnreachable) {
			t.Fatalf("reconcile with a stale annotation = %v, want the provider error", err)
		}
	}
	if n := e.rec.Count(obj, "AbandonIgnored"); n != 1 {
		t.Errorf("AbandonIgnored Events = %d, want 1", n)
	}

	calls := len(e.p.Calls())
	annotate(strconv.FormatInt(gen, 10))
	if _, err := e.reconcile("b"); err != nil {
		t.Fatalf("reconcile with the abandon annotation: %v", err)
	}
	var b v1alpha1.LoadBalancerBinding
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: "b"}, &b); !apierrors.IsNotFound(err) {
		t.Fatalf("binding still there (%v): finalizers %v", err, b.Finalizers)
	}
	if n := len(e.p.Calls()) - calls; n != 0 {
		t.Errorf("%d provider calls while abandoning, want none", n)
	}
	i := slices.IndexFunc(e.rec.Events(), func(ev ct.Event) bool { return ev.Reason == "TargetsAbandoned" })
	if i < 0 || !strings.Contains(e.rec.Events()[i].Note, "10.244.1.5:8080") {
		t.Fatalf("TargetsAbandoned Event missing or without the target left: %+v", e.rec.Events())
	}
	e.p.SetUnreachable(false)
	if got := e.states(); !slices.Equal(got, []string{"10.244.1.5:8080=initial"}) {
		t.Errorf("targets left in the provider = %v, want the one registered", got)
	}
}
