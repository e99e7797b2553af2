package binding_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	ct "sluice.dev/sluice/internal/controller/controllertest"
)

// A second binding on the same backend must neither register nor
// deregister anything, and says why; its deletion leaves the owner's
// targets alone.
func TestSharedGroupRefused(t *testing.T) {
	e := newEnv(t, ct.Pod("p1", "10.244.1.5"), ct.Binding("a"), ct.Binding("b", func(b *v1alpha1.LoadBalancerBinding) {
		b.Spec.Selector.MatchLabels = map[string]string{"app": "other"} // b alone would deregister a's target
	}))
	e.mustReconcile("a")
	want := []string{"10.244.1.5:8080=initial"}
	if got := e.states(); !slices.Equal(got, want) {
		t.Fatalf("targets after a = %v, want %v", got, want)
	}
	calls := len(e.p.Calls())
	for range 2 {
		e.mustReconcile("b")
	}
	if extra := e.p.Calls()[calls:]; len(extra) != 0 {
		t.Errorf("refused binding called the provider: %v", extra)
	}
	if got := e.states(); !slices.Equal(got, want) {
		t.Fatalf("targets after b = %v, want %v (b touched a's group)", got, want)
	}
	b := e.binding("b")
	if c := condition(b, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != binding.ReasonGroupConflict {
		t.Errorf("Ready = %s/%s, want False/%s", c.Status, c.Reason, binding.ReasonGroupConflict)
	}
	if c := condition(b, v1alpha1.ConditionProviderReachable); c.Status == metav1.ConditionFalse {
		t.Errorf("ProviderReachable False for a conflict: %+v", c)
	}
	if n := e.rec.Count("LoadBalancerBinding ingress/b", binding.ReasonGroupConflict); n != 1 {
		t.Errorf("%s events on b = %d, want 1 (reasons %v)", binding.ReasonGroupConflict, n, e.rec.Reasons("LoadBalancerBinding ingress/b"))
	}
	if c := condition(e.binding("a"), v1alpha1.ConditionReady); c.Reason == binding.ReasonGroupConflict {
		t.Errorf("the owner was refused: %+v", c)
	}

	// Deleting the refused binding deregisters nothing.
	if err := e.c.Delete(context.Background(), e.binding("b")); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile("b")
	if got := e.states(); !slices.Equal(got, want) {
		t.Fatalf("targets after deleting b = %v, want %v", got, want)
	}
	var gone v1alpha1.LoadBalancerBinding
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: "b"}, &gone); err == nil {
		t.Errorf("b still exists with finalizers %v", gone.Finalizers)
	}
}

// Bindings on different backends both work.
func TestDifferentGroupsNoConflict(t *testing.T) {
	e := newEnv(t, ct.Pod("p1", "10.244.1.5", ct.WithCondition(corev1.PodReady, corev1.ConditionFalse)), ct.Binding("a"), ct.Binding("b", ct.Group("be2")))
	e.mustReconcile("a")
	e.mustReconcile("b")
	if got := ct.States(e.p, "be2"); !slices.Equal(got, []string{"10.244.1.5:8080=initial"}) {
		t.Errorf("targets in be2 = %v", got)
	}
	if c := condition(e.binding("b"), v1alpha1.ConditionReady); c.Reason == binding.ReasonGroupConflict {
		t.Errorf("b refused: %+v", c)
	}
}
