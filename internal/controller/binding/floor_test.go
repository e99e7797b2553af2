package binding_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/targets"
)

func TestDeletionCostsFollowZones(t *testing.T) {
	e := newEnv(t, ct.Node("node-1", "zone-a"), ct.Node("node-2", "zone-b"),
		ct.Pod("a1", "10.244.1.5"), ct.Pod("a2", "10.244.1.6"), ct.Pod("b1", "10.244.2.5", ct.OnNode("node-2")), ct.Binding("b"))
	e.mustReconcile("b")
	cost := func(name string) string {
		var p corev1.Pod
		if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		return p.Annotations[targets.AnnotationDeletionCost]
	}
	if got := cost("a1"); got != "0" {
		t.Fatalf("cost before any target is healthy = %q", got)
	}
	e.p.Step()
	e.mustReconcile("b")
	// Zone a has one healthy target to spare, zone b none.
	if a1, a2, b1 := cost("a1"), cost("a2"), cost("b1"); a1 != "1000" || a2 != "1000" || b1 != "10000" {
		t.Fatalf("costs a1=%s a2=%s b1=%s", a1, a2, b1)
	}
}
