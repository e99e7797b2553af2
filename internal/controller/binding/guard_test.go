package binding_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	ct "sluice.dev/sluice/internal/controller/controllertest"
)

func TestSelectorEditHeldUntilConfirmed(t *testing.T) {
	e := newEnv(t, ct.Node("node-1", "zone-a"), ct.Node("node-2", "zone-b"),
		ct.Pod("p1", "10.244.1.5"), ct.Pod("p2", "10.244.2.5", ct.OnNode("node-2")), ct.Binding("b"))
	e.mustReconcile("b")
	e.p.Step()
	e.mustReconcile("b")
	b := e.binding("b")
	if got := b.Status.Zones; len(got) != 2 || got[0].Zone != "zone-a" || got[0].Healthy != 1 || got[1].Zone != "zone-b" || got[1].Healthy != 1 {
		t.Fatalf("zones = %+v", got)
	}
	if v := gauge(t, e, "sluice_controller_zone_healthy_targets", "zone-b"); v != 1 {
		t.Fatalf("zone metric = %v", v)
	}

	// The selector now matches nothing: both pods still run.
	b.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "nothing"}}
	b.Generation = 2
	e.update(b)
	e.mustReconcile("b")
	if got := e.states(); !slices.Equal(got, []string{"10.244.1.5:8080=healthy", "10.244.2.5:8080=healthy"}) {
		t.Fatalf("targets while held = %v", got)
	}
	b = e.binding("b")
	if c := condition(b, v1alpha1.ConditionHeld); c.Status != metav1.ConditionTrue || c.Reason != binding.ReasonHeld {
		t.Fatalf("Held = %+v", c)
	}
	if n := e.rec.Count("LoadBalancerBinding ingress/b", binding.ReasonHeld); n != 1 {
		t.Fatalf("Held events = %d (%v)", n, e.rec.Events())
	}
	e.mustReconcile("b") // still held, no second Event
	if n := e.rec.Count("LoadBalancerBinding ingress/b", binding.ReasonHeld); n != 1 {
		t.Fatalf("Held events after a second reconcile = %d", n)
	}
	if v := gauge(t, e, "sluice_controller_held_targets", ""); v != 2 {
		t.Fatalf("held metric = %v", v)
	}

	// A confirmation for an older generation does not count.
	b.Annotations = map[string]string{v1alpha1.AnnotationConfirmDeregister: "1"}
	e.update(b)
	e.mustReconcile("b")
	if got := e.states(); len(got) != 2 || got[0] != "10.244.1.5:8080=healthy" {
		t.Fatalf("targets after a stale confirmation = %v", got)
	}
	confirm(t, e.c, e.binding("b"))
	e.mustReconcile("b")
	if got := e.states(); !slices.Equal(got, []string{"10.244.1.5:8080=draining", "10.244.2.5:8080=draining"}) {
		t.Fatalf("targets after confirming = %v", got)
	}
	if c := condition(e.binding("b"), v1alpha1.ConditionHeld); c.Status != metav1.ConditionFalse {
		t.Fatalf("Held after confirming = %+v", c)
	}
}

func TestRolloutNotHeld(t *testing.T) {
	hold := func(p *corev1.Pod) { p.Finalizers = []string{"test/hold"} }
	e := newEnv(t, ct.Pod("p1", "10.244.1.5", hold), ct.Binding("b"))
	e.mustReconcile("b")
	e.p.Step()
	e.mustReconcile("b")
	// The only pod is deleted (its replacement not up yet): not held.
	if err := e.c.Delete(context.Background(), ct.Pod("p1", "10.244.1.5")); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile("b")
	if got := e.states(); !slices.Equal(got, []string{"10.244.1.5:8080=draining"}) {
		t.Fatalf("targets = %v", got)
	}
	if c := condition(e.binding("b"), v1alpha1.ConditionHeld); c.Status == metav1.ConditionTrue {
		t.Fatalf("Held = %+v", c)
	}
}

// gauge reads a gauge of binding ingress/b (and zone, when not "").
func gauge(t *testing.T, e *env, name, zone string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				switch {
				case l.GetName() == "binding" && l.GetValue() != "ingress/b",
					l.GetName() == "zone" && l.GetValue() != zone:
					continue metrics
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s for zone %q", name, zone)
	return 0
}

// The emptying guard reads the namespace's pods only when a plan
// deregisters: a steady reconcile lists the selected pods once, nothing
// more.
func TestGuardReadsPodsOnlyToDeregister(t *testing.T) {
	e := newEnv(t, ct.Pod("p1", "10.244.1.5"), ct.Pod("p2", "10.244.2.5"), ct.Binding("b"))
	e.mustReconcile("b")
	e.p.Step()
	e.mustReconcile("b")
	lists := func() int {
		before := e.podLists
		e.mustReconcile("b")
		return e.podLists - before
	}
	if n := lists(); n != 1 {
		t.Errorf("a steady reconcile listed pods %d times, want 1 (the selected pods)", n)
	}
	// p2 leaves the selector while it runs: the guard reads the pods.
	p2 := ct.Pod("p2", "10.244.2.5")
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(p2), p2); err != nil {
		t.Fatal(err)
	}
	p2.Labels = map[string]string{"app": "other"}
	if err := e.c.Update(context.Background(), p2); err != nil {
		t.Fatal(err)
	}
	if n := lists(); n != 2 {
		t.Errorf("a reconcile that deregisters listed pods %d times, want 2 (selected, then the guard's)", n)
	}
}
